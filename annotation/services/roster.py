"""Who may work on a campaign. The lead picks annotators of the campaign's workspace; an empty
roster means every annotator of the workspace may (how campaigns worked before rosters, so older
campaigns keep working). Whoever leaves the roster loses their unfinished work to the others."""
from django.contrib.auth import get_user_model
from django.db import transaction

from annotation.models import Assignment, Campaign, FeedbackTask, RosterMember
from memweb.roles import Role


class RosterError(ValueError):
    pass


def roster_members(*, campaign: Campaign):
    return RosterMember.objects.filter(campaign=campaign).select_related("annotator", "added_by")


def roster_ids(*, campaign: Campaign) -> set[int]:
    return set(RosterMember.objects.filter(campaign=campaign).values_list("annotator_id", flat=True))


def annotator_allowed(*, campaign: Campaign, annotator) -> bool:
    """True if the campaign's roster is empty or names `annotator`."""
    members = roster_ids(campaign=campaign)
    return not members or annotator.pk in members


def workspace_annotators(*, campaign: Campaign):
    """Active annotators of the campaign's workspace: the people a roster is chosen from."""
    return (get_user_model().objects.filter(is_active=True, memberships__workspace_id=campaign.workspace_id,
                                            memberships__role=Role.ANNOTATOR)
            .distinct().order_by("username"))


def roster_candidates(*, campaign: Campaign):
    """Workspace annotators not on the roster yet."""
    return workspace_annotators(campaign=campaign).exclude(pk__in=roster_ids(campaign=campaign))


@transaction.atomic
def roster_add(*, campaign: Campaign, annotator_id, added_by) -> RosterMember:
    """Put a workspace annotator on the roster. The first member closes the campaign to everyone
    else, so their unfinished work is released to the members."""
    annotator = workspace_annotators(campaign=campaign).filter(pk=_user_id(annotator_id)).first()
    if annotator is None:
        raise RosterError("choose an annotator of this workspace")
    member, created = RosterMember.objects.get_or_create(campaign=campaign, annotator=annotator,
                                                         defaults={"added_by": added_by})
    if not created:
        raise RosterError(f"{annotator.username} is on the roster already")
    outsiders_release(campaign=campaign)
    return member


@transaction.atomic
def roster_remove(*, campaign: Campaign, annotator_id) -> int:
    """Take an annotator off the roster; their open assignments and feedback tasks go back to the
    pool. Returns how many were released. Their finished work stays."""
    removed, _ = RosterMember.objects.filter(campaign=campaign, annotator_id=_user_id(annotator_id)).delete()
    if not removed:
        raise RosterError("that annotator is not on the roster")
    return outsiders_release(campaign=campaign)


@transaction.atomic
def roster_set(*, campaign: Campaign, usernames: list[str], set_by) -> int:
    """Make the roster exactly `usernames` (workspace annotators; empty opens the campaign to all of
    them). All or nothing: an unknown name changes nothing. Whoever leaves it, or is left out by
    a first member, gives back their unfinished work; returns how many items were released."""
    wanted = list(dict.fromkeys(name.strip() for name in usernames))
    chosen = {user.username: user for user in workspace_annotators(campaign=campaign).filter(username__in=wanted)}
    unknown = [name for name in wanted if name not in chosen]
    if unknown:
        raise RosterError(f"not an annotator of this workspace: {', '.join(unknown)}")
    current = roster_ids(campaign=campaign)
    RosterMember.objects.filter(campaign=campaign).exclude(annotator__in=chosen.values()).delete()
    RosterMember.objects.bulk_create([RosterMember(campaign=campaign, annotator=user, added_by=set_by)
                                      for user in chosen.values() if user.pk not in current])
    return outsiders_release(campaign=campaign)


def outsiders_release(*, campaign: Campaign) -> int:
    """Release the open work of everyone the roster leaves out (nobody while it is empty)."""
    members = roster_ids(campaign=campaign)
    if not members:
        return 0
    assignments = (Assignment.objects.filter(campaign=campaign, status=Assignment.Status.ASSIGNED)
                   .exclude(annotator_id__in=members).update(status=Assignment.Status.EXPIRED))
    tasks = (FeedbackTask.objects.filter(campaign=campaign, status=FeedbackTask.Status.ASSIGNED)
             .exclude(writer_id__in=members).update(status=FeedbackTask.Status.OPEN, writer=None, assigned_at=None))
    return assignments + tasks


def _user_id(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
