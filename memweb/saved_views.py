"""Saved views: a user names the filters (and sort) of a list page to open them again later. Each
view belongs to one user; nobody else sees, opens, renames or deletes it."""
from django import forms
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import QueryDict
from django.urls import NoReverseMatch, reverse

from memweb.models import SavedView


class SavedViewForm(forms.Form):
    list_name = forms.CharField(max_length=100, widget=forms.HiddenInput)
    query = forms.CharField(max_length=2000, required=False, widget=forms.HiddenInput)
    name = forms.CharField(max_length=100, label="Name", error_messages={"required": "Give the view a name."})

    def clean_list_name(self) -> str:
        list_name = self.cleaned_data["list_name"]
        try:
            reverse(list_name)
        except NoReverseMatch:
            raise forms.ValidationError(f"“{list_name}” is not a list page.") from None
        return list_name

    def clean_query(self) -> str:
        return query_for_view(self.cleaned_data["query"])


def query_for_view(query: str) -> str:
    """The query string a view keeps: the filters and sort, never the page it was on."""
    params = QueryDict(query.removeprefix("?"), mutable=True)
    params.pop("page", None)
    return params.urlencode()


def saved_view_url(view: SavedView) -> str:
    return reverse(view.list_name) + (f"?{view.query}" if view.query else "")


def saved_views_of(*, user, list_name: str) -> QuerySet:
    return SavedView.objects.filter(user=user, list_name=list_name)


def saved_view_create(*, user, list_name: str, name: str, query: str) -> SavedView:
    """Raises ValueError when the user already has a view of that name on that list."""
    try:
        with transaction.atomic():
            return SavedView.objects.create(user=user, list_name=list_name, name=name, query=query)
    except IntegrityError:
        raise ValueError(f"You already have a view named “{name}” on this list.") from None


def saved_view_rename(*, view: SavedView, name: str) -> SavedView:
    """Raises ValueError when another of the user's views on that list has the name."""
    view.name = name
    try:
        with transaction.atomic():
            view.save(update_fields=["name"])
    except IntegrityError:
        raise ValueError(f"You already have a view named “{name}” on this list.") from None
    return view
