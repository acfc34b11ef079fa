"""Which workspace a request acts in: the session's choice (or an API key's workspace), the roles
held there, and the middleware that scopes every workspace-owned query of the request to it
(memweb.scoping). An object of another workspace answers 404, exactly as one that does not exist: a
403 would tell the caller that it exists.
"""
from memweb.models import Membership, Workspace, landing_workspace_id
from memweb.scoping import workspace_scope

SESSION_KEY = "memweb_workspace"


def workspaces_of(user):
    """The workspaces a user may switch to: every one for a superuser, else where they are a member."""
    if user.is_superuser:
        return Workspace.objects.all()
    return Workspace.objects.filter(memberships__user=user).distinct()


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


def _scoped_stream(chunks, workspace):
    with workspace_scope(workspace):
        yield from chunks
