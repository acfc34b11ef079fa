"""Switching the workspace a session acts in, and the admins' page of workspaces and members. An
admin manages the members of the workspaces they administer (a superuser: of all); another
workspace's membership answers 404, as every object of another workspace does."""
from urllib.parse import urlsplit

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from memweb.models import Membership, Workspace, workspace_landing_remember
from memweb.roles import Role, role_required
from memweb.workspaces import SESSION_KEY, workspaces_of


@require_POST
@role_required()
def workspace_switch(request):
    """Act in another of the user's workspaces from now on, in this session and where their next one
    lands; one they do not belong to is a 404."""
    workspace = get_object_or_404(workspaces_of(request.user), pk=request.POST.get("workspace") or 0)
    request.session[SESSION_KEY] = workspace.pk
    workspace_landing_remember(user=request.user, workspace=workspace)
    messages.success(request, f"Now working in “{workspace.name}”.")
    back = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure())
    return redirect(_same_list(back) if safe else "home")


def _same_list(path: str) -> str:
    """The page to show after a switch: `path` itself when it names no object, else the nearest list
    above it (/orbs/12/edit/ → /orbs/), since the old workspace's object is a 404 in the new one."""
    if not _names_an_object(path):
        return path
    parts = urlsplit(path).path.rstrip("/").split("/")
    while len(parts) > 1:
        parts.pop()
        candidate = "/".join(parts) + "/"
        match = _resolved(candidate)
        if match is not None and not match.kwargs:
            return candidate
    return reverse("home")


def _names_an_object(path: str) -> bool:
    match = _resolved(urlsplit(path).path)
    return match is None or bool(match.kwargs)


def _resolved(path: str):
    try:
        return resolve(path)
    except Resolver404:
        return None


class WorkspaceForm(forms.ModelForm):
    class Meta:
        model = Workspace
        fields = ["name", "slug"]


def workspaces_administered(user):
    if user.is_superuser:
        return Workspace.objects.all()
    return Workspace.objects.filter(memberships__user=user, memberships__role=Role.ADMIN).distinct()


class MembershipForm(forms.Form):
    workspace = forms.ModelChoiceField(Workspace.objects.none())
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices)

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["workspace"].queryset = workspaces_administered(user)

    def clean_username(self):
        user = get_user_model().objects.filter(username=self.cleaned_data["username"]).first()
        if user is None:
            raise forms.ValidationError("No user with this username")
        return user


def _workspaces_page(request, *, workspace_form=None, membership_form=None, status=200):
    context = {
        "workspaces": workspaces_administered(request.user).prefetch_related("memberships__user"),
        "workspace_form": workspace_form or WorkspaceForm(),
        "membership_form": membership_form or MembershipForm(user=request.user),
    }
    return render(request, "memweb/workspaces.html", context, status=status)


@require_GET
@role_required(Role.ADMIN)
def workspaces(request):
    return _workspaces_page(request)


@require_POST
@role_required(Role.ADMIN)
def workspace_create(request):
    form = WorkspaceForm(request.POST)
    if not form.is_valid():
        return _workspaces_page(request, workspace_form=form, status=400)
    with transaction.atomic():
        workspace = form.save()
        Membership.objects.create(workspace=workspace, user=request.user, role=Role.ADMIN)
    # The creator stays where they work: switching to the new workspace is their choice.
    messages.success(request, f"Workspace “{workspace.name}” created with you as its admin; add its members below, "
                              "and switch to it from the workspace menu.")
    return redirect("workspaces")


@require_POST
@role_required(Role.ADMIN)
def membership_add(request):
    form = MembershipForm(request.POST, user=request.user)
    if not form.is_valid():
        return _workspaces_page(request, membership_form=form, status=400)
    data = form.cleaned_data
    try:
        with transaction.atomic():
            Membership.objects.create(workspace=data["workspace"], user=data["username"], role=data["role"])
    except IntegrityError:
        form.add_error("role", "This user already holds this role in this workspace")
        return _workspaces_page(request, membership_form=form, status=400)
    messages.success(request, f"{data['username']} is now {data['role']} in “{data['workspace']}”.")
    return redirect("workspaces")


@require_POST
@role_required(Role.ADMIN)
def membership_remove(request, membership_id: int):
    membership = get_object_or_404(Membership, pk=membership_id, workspace__in=workspaces_administered(request.user))
    membership.delete()
    messages.success(request, f"{membership.user} is no longer {membership.role} in “{membership.workspace}”.")
    return redirect("workspaces")
