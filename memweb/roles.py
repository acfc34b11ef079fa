"""The four roles and how pages and the API enforce them.

A role is held in a workspace (memweb.models.Membership) and checked in the workspace the request
acts in (memweb.workspaces). Superusers, and admins of that workspace, pass every check. The role
groups hold the model permissions each role declares; the Django admin site is for superusers only
(memweb.admin_site), so no role, staff flag or group opens it.
"""
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import models

from memweb.registry import role_permissions


class Role(models.TextChoices):
    OPERATOR = "operator", "Operator"
    REVIEWER = "reviewer", "Reviewer"
    ANNOTATOR = "annotator", "Annotator"
    ADMIN = "admin", "Admin"


def user_roles(user) -> set[str]:
    """The user's roles in their current workspace."""
    from memweb.workspaces import workspace_current, workspace_roles

    if not user.is_authenticated:
        return set()
    held = set(workspace_roles(user=user, workspace=workspace_current(user)))
    if user.is_superuser:
        held.add(Role.ADMIN)
    return held


def has_role(user, *roles: str) -> bool:
    """True if the user holds any of `roles`; admins hold them all."""
    held = user_roles(user)
    return Role.ADMIN in held or bool(held.intersection(roles))


def role_required(*roles: str):
    """Login required, then 403 unless the user has one of `roles`. No roles
    means any signed-in user. The roles are kept on the view so the
    authorisation-matrix test can read them from the URL configuration."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if roles and not has_role(request.user, *roles):
                raise PermissionDenied(f"This page needs one of the roles: {', '.join(roles)}")
            return view(request, *args, **kwargs)

        guarded = login_required(wrapped)
        guarded.required_roles = tuple(roles)
        return guarded

    return decorator


def roles_context(request) -> dict:
    from memweb.workspaces import workspaces_listed

    held = user_roles(request.user) if hasattr(request, "user") else set()
    is_admin = Role.ADMIN in held
    current = getattr(request, "workspace", None)
    return {
        "current_workspace": current,
        "user_workspaces": workspaces_listed(request.user, current) if current is not None else (),
        "user_roles": held,
        "is_operator": is_admin or Role.OPERATOR in held,
        "is_reviewer": is_admin or Role.REVIEWER in held,
        "is_annotator": is_admin or Role.ANNOTATOR in held,
        "is_admin_role": is_admin,
    }


# Django model permissions each role's group receives (used by the admin site).
# Each app adds its own through its AppConfig's `role_permissions`.
CORE_ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    Role.OPERATOR: ("memweb.view_llmcall", "memweb.view_workerheartbeat"),
}


def _declared_permissions(role: str) -> list[str]:
    if role == Role.ADMIN:
        # What the other roles hold, and nothing beyond: never all permissions (the users' among them).
        return sorted({perm for other in Role.values if other != Role.ADMIN for perm in _declared_permissions(other)})
    return [*CORE_ROLE_PERMISSIONS.get(role, ()), *role_permissions(role)]


def roles_sync(**_signal_kwargs) -> None:
    """Create the role groups and give them their permissions (idempotent;
    runs after every migrate so new models' permissions are picked up)."""
    from django.contrib.auth.models import Group

    for role in Role.values:
        group, _ = Group.objects.get_or_create(name=role)
        wanted = [_permission(dotted) for dotted in _declared_permissions(role)]
        group.permissions.set([perm for perm in wanted if perm is not None])


def _permission(dotted: str):
    from django.contrib.auth.models import Permission

    app_label, codename = dotted.split(".", 1)
    return Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
