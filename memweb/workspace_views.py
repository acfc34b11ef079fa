"""Switching the workspace a session acts in, and the admins' page of workspaces and members. An
admin manages the members of the workspaces they administer (a superuser: of all), renames and
archives those workspaces; another workspace's membership or workspace answers 404, as every object
of another workspace does. The rules and the audit trail live in memweb.user_admin."""
from urllib.parse import urlsplit

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from memweb import user_admin
from memweb.listing import Sorting, list_page
from memweb.models import AdminEvent, Membership, Workspace, workspace_landing_remember
from memweb.roles import Role, role_required
from memweb.user_admin import AdminRefused, workspaces_administered
from memweb.workspaces import SESSION_KEY, workspaces_of


@require_POST
@role_required()
def workspace_switch(request):
    """Act in another of the user's workspaces from now on, in this session and where their next one
    lands; one they do not belong to is a 404."""
    workspace = get_object_or_404(workspaces_of(request.user), pk=request.POST.get("workspace") or 0)
    request.session[SESSION_KEY] = workspace.pk
    workspace_landing_remember(user=request.user, workspace=workspace)
    archived = " It is archived: read-only until an admin unarchives it." if workspace.is_archived else ""
    messages.success(request, f"Now working in “{workspace.name}”.{archived}")
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


class WorkspaceRenameForm(forms.ModelForm):
    class Meta:
        model = Workspace
        fields = ["name"]
        labels = {"name": "New name"}


def _rename_form(workspace: Workspace, data=None) -> WorkspaceRenameForm:
    # One form per workspace card: the prefix keeps each card's field ids unique.
    return WorkspaceRenameForm(data, instance=workspace, prefix=f"workspace-{workspace.pk}")


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


def _workspaces_page(request, *, workspace_form=None, membership_form=None, rename_form=None, status=200):
    workspaces = list(workspaces_administered(request.user))
    # Counted apart: for an admin the workspaces query joins memberships already (theirs), and a
    # count over that join would see only their own.
    counts = dict(Membership.objects.filter(workspace__in=workspaces).values("workspace")
                  .annotate(members=Count("user", distinct=True)).values_list("workspace", "members"))
    for workspace in workspaces:
        workspace.member_count = counts.get(workspace.pk, 0)
        bound = rename_form if rename_form is not None and rename_form.instance.pk == workspace.pk else None
        workspace.rename_form = bound or _rename_form(workspace)
    context = {
        "workspaces": workspaces,
        "roles": Role.choices,
        "workspace_form": workspace_form or WorkspaceForm(),
        "membership_form": membership_form or MembershipForm(user=request.user),
    }
    return render(request, "memweb/workspaces.html", context, status=status)


@require_GET
@role_required(Role.ADMIN)
def workspaces(request):
    return _workspaces_page(request)


MEMBER_SORTING = Sorting(columns={"user": "user__username", "role": "role", "since": "created_at"})


class MemberFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search", widget=forms.TextInput(attrs={"type": "search"}),
                        help_text="Part of a username or an email address.")
    role = forms.ChoiceField(required=False, label="Role", choices=[("", "Any role"), *Role.choices])
    status = forms.ChoiceField(required=False, label="Status",
                               choices=[("", "Active and inactive"), ("active", "Active"), ("inactive", "Inactive")])

    def filtered(self, memberships):
        if not self.is_valid():
            return memberships
        if query := self.cleaned_data["q"].strip():
            memberships = memberships.filter(Q(user__username__icontains=query) | Q(user__email__icontains=query))
        if role := self.cleaned_data["role"]:
            memberships = memberships.filter(role=role)
        if status := self.cleaned_data["status"]:
            memberships = memberships.filter(user__is_active=status == "active")
        return memberships


@require_GET
@role_required(Role.ADMIN)
def workspace_members(request, workspace_id: int):
    """One workspace's members, a page at a time, searched and filtered by role and status."""
    workspace = _workspace_or_404(request, workspace_id)
    filters = MemberFilterForm(request.GET or None)
    memberships = filters.filtered(workspace.memberships.select_related("user").order_by("user__username", "pk"))
    return list_page(request, rows=memberships, template="memweb/workspace_members.html",
                     partial="memweb/_member_rows.html", sorting=MEMBER_SORTING,
                     context={"workspace": workspace, "filters": filters, "roles": Role.choices})


@require_POST
@role_required(Role.ADMIN)
def workspace_create(request):
    form = WorkspaceForm(request.POST)
    if not form.is_valid():
        return _workspaces_page(request, workspace_form=form, status=400)
    with transaction.atomic():
        workspace = form.save()
        Membership.objects.create(workspace=workspace, user=request.user, role=Role.ADMIN)
        user_admin.audit(actor=request.user, action=AdminEvent.Action.WORKSPACE_CREATED, workspace=workspace)
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
            membership = Membership.objects.create(workspace=data["workspace"], user=data["username"], role=data["role"])
            user_admin.membership_granted(actor=request.user, membership=membership)
    except IntegrityError:
        form.add_error("role", "This user already holds this role in this workspace")
        return _workspaces_page(request, membership_form=form, status=400)
    messages.success(request, f"{data['username']} is now {data['role']} in “{data['workspace']}”.")
    return redirect("workspaces")


@require_POST
@role_required(Role.ADMIN)
def membership_remove(request, membership_id: int):
    membership = _membership_or_404(request, membership_id)
    try:
        user_admin.membership_remove(actor=request.user, membership=membership)
    except AdminRefused as refused:
        messages.error(request, str(refused))
        return redirect(_members_list(request, membership))
    messages.success(request, f"{membership.user} is no longer {membership.role} in “{membership.workspace}”.")
    return redirect(_members_list(request, membership))


def _members_list(request, membership: Membership) -> str:
    """Where a member's change returns: the members list it was made from (`back`, with its filters
    and page), else that workspace's members list."""
    back = request.POST.get("back", "")
    if url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return back
    return reverse("workspace_members", args=[membership.workspace_id])


def _membership_or_404(request, membership_id: int) -> Membership:
    membership = user_admin.membership_of(request.user, membership_id)
    if membership is None:
        raise Http404("No such membership in a workspace you administer")
    return membership


@require_POST
@role_required(Role.ADMIN)
def membership_role(request, membership_id: int):
    """Change a member's role; taking the admin role away asks for a confirmation first."""
    membership = _membership_or_404(request, membership_id)
    role = request.POST.get("role", "")
    if role not in Role.values:
        messages.error(request, f"Role: choose one of {', '.join(Role.values)}.")
        return redirect(_members_list(request, membership))
    if user_admin.is_demotion(membership, role) and request.POST.get("confirmed") != "yes":
        context = {"membership": membership, "role": role, "role_label": Role(role).label,
                   "back": _members_list(request, membership)}
        return render(request, "memweb/membership_role_confirm.html", context)
    try:
        user_admin.membership_role_change(actor=request.user, membership=membership, role=role)
    except AdminRefused as refused:
        messages.error(request, str(refused))
        return redirect(_members_list(request, membership))
    messages.success(request, f"{membership.user} is now {role} in “{membership.workspace}”.")
    return redirect(_members_list(request, membership))


def _workspace_or_404(request, workspace_id: int) -> Workspace:
    return get_object_or_404(workspaces_administered(request.user), pk=workspace_id)


@require_POST
@role_required(Role.ADMIN)
def workspace_rename(request, workspace_id: int):
    workspace = _workspace_or_404(request, workspace_id)
    old_name = workspace.name
    form = _rename_form(workspace, request.POST)
    if not form.is_valid():
        return _workspaces_page(request, rename_form=form, status=400)
    # Validating the form wrote the new name onto `workspace`: the service reads the stored one afresh.
    user_admin.workspace_rename(actor=request.user, workspace=Workspace.objects.get(pk=workspace.pk),
                                name=form.cleaned_data["name"])
    messages.success(request, f"Workspace “{old_name}” is now “{form.cleaned_data['name']}”.")
    return redirect("workspaces")


@require_POST
@role_required(Role.ADMIN)
def workspace_archive(request, workspace_id: int):
    return _archived_set(request, workspace_id, archived=True)


@require_POST
@role_required(Role.ADMIN)
def workspace_unarchive(request, workspace_id: int):
    return _archived_set(request, workspace_id, archived=False)


def _archived_set(request, workspace_id: int, *, archived: bool):
    workspace = _workspace_or_404(request, workspace_id)
    try:
        user_admin.workspace_archived_set(actor=request.user, workspace=workspace, archived=archived)
    except AdminRefused as refused:
        messages.error(request, str(refused))
        return redirect("workspaces")
    if archived:
        messages.success(request, f"Workspace “{workspace}” archived: its pages stay readable, nothing new can be "
                                  "written there, and it left the workspace menu.")
    else:
        messages.success(request, f"Workspace “{workspace}” unarchived: its members can work there again.")
    return redirect("workspaces")
