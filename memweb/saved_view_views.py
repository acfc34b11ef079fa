"""Saved views of list pages: save the current filters under a name, rename, delete (each user
only their own; another user's view is a 404). Every action returns to the list, with the filters
it was showing, and a page message."""
from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from memweb.models import SavedView
from memweb.roles import role_required
from memweb.saved_views import SavedViewForm, query_for_view, saved_view_create, saved_view_rename, saved_view_url


class RenameForm(forms.Form):
    name = forms.CharField(max_length=100, label="New name",
                           error_messages={"required": "give it a name (up to 100 characters)."})


def _back(request, list_name: str):
    """The list page as the request's `query` field says it was showing."""
    query = query_for_view(request.POST.get("query", ""))
    return redirect(reverse(list_name) + (f"?{query}" if query else ""))


def _problems(form: forms.Form) -> str:
    return " ".join(f"{form.fields[name].label}: {error}" for name, errors in form.errors.items() for error in errors)


@require_POST
@role_required()
def saved_view_save(request):
    form = SavedViewForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"The view was not saved. {_problems(form)}")
        return _back(request, form.cleaned_data["list_name"]) if "list_name" in form.cleaned_data else redirect("home")
    try:
        view = saved_view_create(user=request.user, **form.cleaned_data)
    except ValueError as refused:
        messages.error(request, f"The view was not saved: {refused}")
        return _back(request, form.cleaned_data["list_name"])
    messages.success(request, f"Saved the view “{view.name}”.")
    return redirect(saved_view_url(view))


@require_POST
@role_required()
def saved_view_rename_page(request, view_id: int):
    view = get_object_or_404(SavedView, pk=view_id, user=request.user)
    form, old_name = RenameForm(request.POST), view.name
    try:
        if not form.is_valid():
            raise ValueError(" ".join(form.errors["name"]))
        saved_view_rename(view=view, name=form.cleaned_data["name"])
    except ValueError as refused:
        messages.error(request, f"“{old_name}” was not renamed: {refused}")
    else:
        messages.success(request, f"Renamed the view “{old_name}” to “{view.name}”.")
    return _back(request, view.list_name)


@require_POST
@role_required()
def saved_view_delete(request, view_id: int):
    view = get_object_or_404(SavedView, pk=view_id, user=request.user)
    view.delete()
    messages.success(request, f"Deleted the view “{view.name}”.")
    return _back(request, view.list_name)
