"""Workspace scoping by default: every model a workspace owns reads through `WorkspaceManager`, which
cuts each query to the workspace the current request acts in.

- Inside a request, `CurrentWorkspace` (memweb.workspaces) and an API key's check set the scope, so
  `Orb.objects.filter(...)` in a page, an API route or a form sees only that workspace's rows: an
  object of another workspace answers 404 exactly as a missing one, with no wrapper at the call site.
  A request with no workspace (nobody signed in) is denied: it sees no rows at all.
- Outside a request (Celery work, management commands, migrations) there is no scope: that code acts
  on the objects it was handed, by id, and a selector that lists a workspace's objects asks for the
  workspace explicitly with `.of(workspace)`, which refuses a missing one.
- `Model.all_workspaces` reads across workspaces. It is for the few places whose own check replaces
  the workspace's (an API key found by its prefix, an annotator's link token, a name unique across
  workspaces); docs/ARCHITECTURE.md lists them.

Top-level objects carry a `workspace` field; a child model names the path to its owner's workspace in
`WORKSPACE_PATH` (an Orb: "bank__workspace").
"""
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import models

_UNSCOPED = object()  # outside any request
_DENIED = object()  # a request acting in no workspace
_scope: ContextVar = ContextVar("memweb_workspace_scope", default=_UNSCOPED)


class WorkspaceMissing(ValueError):
    """A selector was asked for a workspace's rows without a workspace."""


def workspace_path(model) -> str:
    return getattr(model, "WORKSPACE_PATH", "workspace")


@contextmanager
def workspace_scope(workspace):
    """Scope every workspace-owned query in this block to `workspace` (None denies them all)."""
    token = _scope.set(_DENIED if workspace is None else workspace.pk)
    try:
        yield
    finally:
        _scope.reset(token)


@contextmanager
def workspace_unscoped():
    """Read across workspaces in this block: for checks of names unique across the server, which
    Django makes through the default manager."""
    token = _scope.set(_UNSCOPED)
    try:
        yield
    finally:
        _scope.reset(token)


def workspace_scope_switch(workspace) -> None:
    """Inside a request's scope, act in `workspace` from here on (an API key names its own); the
    request's `workspace_scope` block restores what was there before it."""
    _scope.set(_DENIED if workspace is None else workspace.pk)


def scoped_workspace_id() -> int | None:
    """The workspace the current request acts in; None outside a request or when denied."""
    scope = _scope.get()
    return scope if isinstance(scope, int) else None


class WorkspaceQuerySet(models.QuerySet):
    def of(self, workspace) -> "WorkspaceQuerySet":
        """These rows, cut to the ones `workspace` owns; WorkspaceMissing when it is None."""
        if workspace is None:
            raise WorkspaceMissing(f"{self.model._meta.verbose_name_plural} are read inside a workspace; none was given")
        return self.filter(**{workspace_path(self.model): workspace})


class WorkspaceManager(models.Manager.from_queryset(WorkspaceQuerySet)):
    """The default manager of a workspace-owned model: scoped to the current request's workspace."""

    def get_queryset(self):
        rows = super().get_queryset()
        scope = _scope.get()
        if scope is _UNSCOPED:
            return rows
        if scope is _DENIED:
            return rows.none()
        return rows.filter(**{workspace_path(self.model): scope})


class AllWorkspacesManager(models.Manager.from_queryset(WorkspaceQuerySet)):
    """Reads across workspaces; see the module's docstring for who may."""
