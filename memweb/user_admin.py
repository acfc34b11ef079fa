"""Administration in the dashboard: accounts, roles per workspace, workspaces' names and archiving, and
the audit trail of all of it (memweb.models.AdminEvent).

Who may manage whom: a superuser manages every account but their own (they cannot lock themselves
out). A workspace admin manages an account only when every workspace it belongs to is one they
administer, and never a superuser's account or their own: deactivating someone locks them out of all
their workspaces, so an admin of one team must not reach another team's people. No page here can
make anyone a superuser or staff. Each workspace keeps at least one active admin.
"""
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memweb.models import AdminEvent, Membership, Workspace
from memweb.roles import Role


class AdminRefused(Exception):
    """An administrative change that is not allowed, with the reason to show."""


def workspaces_administered(user):
    if user.is_superuser:
        return Workspace.objects.all()
    return Workspace.objects.filter(memberships__user=user, memberships__role=Role.ADMIN).distinct()


def users_visible_to(actor):
    """The accounts listed on the users page: all for a superuser, else the members of the workspaces
    the actor administers."""
    users = get_user_model().objects.all()
    if not actor.is_superuser:
        users = users.filter(memberships__workspace__in=workspaces_administered(actor)).distinct()
    return users.order_by("username")


def manage_refusal(actor, target) -> str:
    """Why `actor` may not deactivate or reactivate `target`; empty when they may."""
    return manage_refusals(actor, [target])[target.pk]


def manage_refusals(actor, targets) -> dict[int, str]:
    """manage_refusal for each of `targets` (a page of the users list), in two queries."""
    mine = set(workspaces_administered(actor).values_list("pk", flat=True))
    theirs: dict[int, set[int]] = {target.pk: set() for target in targets}
    for user_id, workspace_id in Membership.objects.filter(user__in=theirs).values_list("user_id", "workspace_id"):
        theirs[user_id].add(workspace_id)
    return {target.pk: _refusal(actor, target, theirs[target.pk], mine) for target in targets}


def _refusal(actor, target, theirs: set[int], mine: set[int]) -> str:
    if target.pk == actor.pk:
        return "You cannot change your own account here."
    if actor.is_superuser:
        return ""
    if target.is_superuser:
        return "Superuser accounts are managed by superusers only."
    if not theirs or not theirs <= mine:
        return "This user also belongs to workspaces you do not administer."
    return ""


def audit(*, actor, action: str, target_user=None, workspace=None, old_role="", new_role="", note="") -> AdminEvent:
    return AdminEvent.objects.create(actor=actor, action=action, target_user=target_user, workspace=workspace,
                                     old_role=old_role, new_role=new_role, note=note[:200])


def audit_visible_to(actor):
    """The trail a superuser sees whole; an admin, the events of their workspaces and of their members."""
    events = AdminEvent.objects.select_related("actor", "target_user", "workspace")
    if actor.is_superuser:
        return events
    return events.filter(Q(workspace__in=workspaces_administered(actor))
                         | Q(workspace__isnull=True, target_user__in=users_visible_to(actor)))


@transaction.atomic
def user_create(*, actor, username: str, email: str, password: str | None, workspace: Workspace, role: str):
    """A new account holding `role` in `workspace`; without a password it has none usable until its
    set-password link is used. Never staff, never superuser."""
    user = get_user_model().objects.create_user(username=username, email=email, password=password)
    Membership.objects.create(workspace=workspace, user=user, role=role)
    audit(actor=actor, action=AdminEvent.Action.USER_CREATED, target_user=user, workspace=workspace, new_role=role)
    return user


def _workspaces_left_without_admin(user) -> list[str]:
    """The workspaces where `user` is the only active admin."""
    held = Membership.objects.filter(user=user, role=Role.ADMIN).select_related("workspace")
    return sorted(membership.workspace.name for membership in held if _is_last_admin(membership))


@transaction.atomic
def user_active_set(*, actor, target, active: bool) -> None:
    """Deactivate (no sign-in, no session, no API key works) or reactivate an account."""
    if refusal := manage_refusal(actor, target):
        raise AdminRefused(refusal)
    if not active and (orphaned := _workspaces_left_without_admin(target)):
        raise AdminRefused(f"{target.get_username()} is the last admin of {', '.join(orphaned)}: "
                           "make someone else admin there first.")
    target.is_active = active
    target.save(update_fields=["is_active"])
    action = AdminEvent.Action.USER_REACTIVATED if active else AdminEvent.Action.USER_DEACTIVATED
    audit(actor=actor, action=action, target_user=target)


def _is_last_admin(membership: Membership) -> bool:
    """Whether no other active account is admin of the membership's workspace."""
    if membership.role != Role.ADMIN:
        return False
    others = Membership.objects.filter(workspace=membership.workspace, role=Role.ADMIN, user__is_active=True)
    return not others.exclude(user_id=membership.user_id).exists()


def membership_refusal(actor, membership: Membership) -> str:
    """Why `actor` may not change or remove this membership; empty when they may."""
    if membership.user.is_superuser and not actor.is_superuser:
        return "Superuser accounts are managed by superusers only."
    return ""


def membership_of(actor, membership_id: int) -> Membership | None:
    """A membership of a workspace `actor` administers, or None (a 404)."""
    return (Membership.objects.select_related("user", "workspace")
            .filter(pk=membership_id, workspace__in=workspaces_administered(actor)).first())


def is_demotion(membership: Membership, role: str) -> bool:
    return membership.role == Role.ADMIN and role != Role.ADMIN


@transaction.atomic
def membership_role_change(*, actor, membership: Membership, role: str) -> None:
    if refusal := membership_refusal(actor, membership):
        raise AdminRefused(refusal)
    if is_demotion(membership, role) and _is_last_admin(membership):
        raise AdminRefused(f"{membership.user.get_username()} is the last admin of “{membership.workspace}”: "
                           "make someone else admin first.")
    if Membership.objects.filter(workspace=membership.workspace, user=membership.user, role=role).exists():
        raise AdminRefused(f"{membership.user.get_username()} already holds the role {role} in “{membership.workspace}”.")
    old_role, membership.role = membership.role, role
    membership.save(update_fields=["role"])
    audit(actor=actor, action=AdminEvent.Action.ROLE_CHANGED, target_user=membership.user,
          workspace=membership.workspace, old_role=old_role, new_role=role)


@transaction.atomic
def membership_remove(*, actor, membership: Membership) -> None:
    if refusal := membership_refusal(actor, membership):
        raise AdminRefused(refusal)
    if _is_last_admin(membership):
        raise AdminRefused(f"{membership.user.get_username()} is the last admin of “{membership.workspace}”: "
                           "make someone else admin first.")
    membership.delete()
    audit(actor=actor, action=AdminEvent.Action.ROLE_REMOVED, target_user=membership.user,
          workspace=membership.workspace, old_role=membership.role)


def membership_granted(*, actor, membership: Membership) -> None:
    audit(actor=actor, action=AdminEvent.Action.ROLE_GRANTED, target_user=membership.user,
          workspace=membership.workspace, new_role=membership.role)


@transaction.atomic
def workspace_rename(*, actor, workspace: Workspace, name: str) -> None:
    old_name, workspace.name = workspace.name, name
    workspace.save(update_fields=["name"])
    audit(actor=actor, action=AdminEvent.Action.WORKSPACE_RENAMED, workspace=workspace, note=f"was “{old_name}”")


@transaction.atomic
def workspace_archived_set(*, actor, workspace: Workspace, archived: bool) -> None:
    if archived and workspace.is_default:
        raise AdminRefused(f"“{workspace}” is the default workspace: work made outside any workspace lands "
                           "there, so it cannot be archived.")
    workspace.archived_at = timezone.now() if archived else None
    workspace.save(update_fields=["archived_at"])
    action = AdminEvent.Action.WORKSPACE_ARCHIVED if archived else AdminEvent.Action.WORKSPACE_UNARCHIVED
    audit(actor=actor, action=action, workspace=workspace)
