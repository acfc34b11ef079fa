"""Which workspace a request acts in: the session's choice (or an API key's workspace), the roles
held there, and the middleware that scopes every workspace-owned query of the request to it
(memweb.scoping). An object of another workspace answers 404, exactly as one that does not exist: a
403 would tell the caller that it exists. An archived workspace is read-only: the middleware (and
an API key's check, memweb.auth) refuses every write made in it.
"""
from django.contrib import messages
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme

from memweb.models import Membership, Workspace, landing_workspace_id
from memweb.scoping import workspace_scope

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Writes still allowed in an archived workspace: signing in and out, leaving it, the admins' pages
# that unarchive it or manage its people, choosing a password, and revoking a key (taking access away is always allowed).
ARCHIVE_EXEMPT = frozenset({
    "login", "logout", "workspace_switch", "workspace_create", "workspace_rename", "workspace_archive",
    "workspace_unarchive", "membership_add", "membership_remove", "membership_role", "user_create",
    "user_deactivate", "user_reactivate", "api_key_revoke", "saved_view_save", "saved_view_rename",
    "saved_view_delete", "password_set", "password_reset", "password_reset_confirm",
})

SESSION_KEY = "memweb_workspace"


def workspaces_of(user):
    """The workspaces a user may act in: every one for a superuser, else where they are a member.
    The switcher lists the open ones (workspaces_listed); an archived one stays readable."""
    if user.is_superuser:
        return Workspace.objects.all()
    return Workspace.objects.filter(memberships__user=user).distinct()


def workspaces_listed(user, current: Workspace):
    """The switcher's choices: the user's open workspaces, and the current one even when archived."""
    return [workspace for workspace in workspaces_of(user) if not workspace.is_archived or workspace == current]


def archived_refusal(workspace: Workspace) -> str:
    return (f"Workspace “{workspace.name}” is archived: it is read-only, so nothing can be changed or started "
            "in it. An admin can unarchive it on the Workspaces page.")


def archived_workspace_context(request) -> dict:
    """`archived_workspace` for base.html's banner: the request's workspace when it is archived, so
    every page says why its buttons are refused before anyone presses one."""
    workspace = getattr(request, "workspace", None)
    return {"archived_workspace": workspace if workspace is not None and workspace.is_archived else None}


def workspace_activate(*, user, workspace: Workspace) -> None:
    """Make `workspace` the one the user's roles are read in for the rest of this request or task."""
    user._memweb_workspace = workspace


def workspace_current(user) -> Workspace:
    """The workspace activated for `user`, else the one they land in (code outside a request)."""
    current = getattr(user, "_memweb_workspace", None)
    if current is None:
        current = Workspace.objects.get(pk=landing_workspace_id(user))
        workspace_activate(user=user, workspace=current)
    return current


def workspace_for_session(request) -> Workspace | None:
    """The workspace the session chose, if the user still belongs to it, else the one they land in: the
    last they chose in any session (memweb.models.landing_workspace_id)."""
    user = request.user
    if not user.is_authenticated:
        return None
    chosen = request.session.get(SESSION_KEY)
    workspace = workspaces_of(user).filter(pk=chosen).first() if chosen else None
    return workspace or Workspace.objects.get(pk=landing_workspace_id(user))


def workspace_roles(*, user, workspace: Workspace) -> set[str]:
    """The roles `user` holds in `workspace`, read once per workspace for the user object."""
    cached = getattr(user, "_memweb_roles", None)
    if cached is None or cached[0] != workspace.pk:
        cached = (workspace.pk, set(Membership.objects.filter(user=user, workspace=workspace)
                                    .values_list("role", flat=True)))
        user._memweb_roles = cached
    return cached[1]


class CurrentWorkspace:
    """Sets `request.workspace` for signed-in users and scopes every workspace-owned query of the
    request to it (memweb.scoping); an API key sets both again from the key."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.workspace = workspace_for_session(request)
        if request.workspace is not None:
            workspace_activate(user=request.user, workspace=request.workspace)
        with workspace_scope(request.workspace):
            response = self.get_response(request)
        if response.streaming:  # its body is read after this returns: keep it in the request's workspace
            response.streaming_content = _scoped_stream(response.streaming_content, request.workspace)
        return response

    def process_view(self, request, view_func, view_args, view_kwargs):
        """Refuse a write made in an archived workspace (None lets the view run)."""
        workspace = getattr(request, "workspace", None)
        if workspace is None or not workspace.is_archived or request.method in SAFE_METHODS:
            return None
        if request.headers.get("Authorization") or request.headers.get("X-API-Key"):
            return None  # a key acts in its own workspace, which its check (memweb.auth) refuses if archived
        match = request.resolver_match
        if match.url_name in ARCHIVE_EXEMPT or "admin" in match.namespaces:
            return None
        return _archived_answer(request, archived_refusal(workspace))


def _archived_answer(request, refusal: str):
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": refusal}, status=409)
    messages.error(request, refusal)
    back = request.headers.get("Referer", "")
    safe = url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure())
    if request.headers.get("HX-Request"):
        answer = HttpResponse(refusal, status=409)
        answer["HX-Redirect"] = back if safe else "/"
        return answer
    return redirect(back if safe else "home")


def _scoped_stream(chunks, workspace):
    with workspace_scope(workspace):
        yield from chunks
