"""Undoing a merge: the merged-away Orb gets back the decision it had (status, reviewer, note) and
stops naming the kept Orb, which stays as it is; both Orbs record the undo in their review history.

The rule people read on the page: a merge can be undone for UNDO_DAYS days, as long as neither Orb
has changed since (the kept Orb not edited, approved, rejected or deleted, the merged one not touched).
After that, what agents were served and reviewers decided rests on the merged state, and the way back
is a new review decision, not an undo.
"""
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from orbs.errors import InvalidTransition
from orbs.models import Orb, ReviewEvent
from orbs.services.identity import orb_current
from orbs.services.review import merge_decision, orb_update_if_version, review_event_record

UNDO_DAYS = 7


@dataclass(frozen=True)
class MergeUndo:
    """Whether the merge of `orb` into `kept` can be undone, and until when."""

    orb: Orb  # the merged-away Orb
    kept: Orb  # the kept Orb's current revision
    merge: ReviewEvent
    until: datetime
    refusal: str  # "" when it can be undone

    @property
    def allowed(self) -> bool:
        return not self.refusal


def merge_undo_state(*, orb: Orb, now: datetime | None = None) -> MergeUndo | None:
    """The undo `orb` (a current revision) offers; None when it is not a merged Orb."""
    if orb.merged_into_id is None:
        return None
    merge = orb.events.filter(action=ReviewEvent.Action.MERGED).order_by("-at", "-id").first()
    if merge is None:
        return None
    kept = orb_current(orb_id=orb.merged_into_id)
    until = merge.at + timedelta(days=UNDO_DAYS)
    return MergeUndo(orb=orb, kept=kept, merge=merge, until=until,
                     refusal=_refusal(orb, kept, merge, until, now or timezone.now()))


def _refusal(orb: Orb, kept: Orb, merge: ReviewEvent, until: datetime, now: datetime) -> str:
    if "target_version" not in merge.after:
        return "this merge was made before memweb recorded what an undo needs"
    if now > until:
        return f"the {UNDO_DAYS} days to undo it ended on {until:%Y-%m-%d %H:%M} UTC"
    if orb.status != Orb.Status.SUPERSEDED or orb.events.order_by("-at", "-id").first() != merge:
        return f"Orb #{orb.lineage_id} has changed since the merge"
    if kept.pk != orb.merged_into_id or kept.version != merge.after["target_version"]:
        return f"Orb #{kept.lineage_id}, the kept one, has changed since the merge (edited, approved, rejected or deleted)"
    return ""


def _still_a_user(user_id: int | None) -> int | None:
    """The reviewer of the decision restored, unless their account is gone meanwhile."""
    return user_id if user_id and get_user_model().objects.filter(pk=user_id).exists() else None


def orb_merge_undo(*, orb_id: int, expected_version: int, actor, note: str = "") -> Orb:
    """Undo the merge of Orb `orb_id` (stable or revision id): it gets back its decision from before
    the merge. InvalidTransition, saying why, when the merge can no longer be undone."""
    with transaction.atomic():
        orb = orb_current(orb_id=orb_id, queryset=Orb.objects.select_related("bank"))
        state = merge_undo_state(orb=orb)
        if state is None:
            raise InvalidTransition(f"Orb #{orb.lineage_id} was not merged into another Orb")
        if not state.allowed:
            raise InvalidTransition(f"the merge of Orb #{orb.lineage_id} cannot be undone: {state.refusal}")
        before = {**merge_decision(orb), "merged_into": state.kept.lineage_id}
        decision = state.merge.before
        orb = orb_update_if_version(
            orb, expected_version, status=decision["status"], merged_into=None, review_note=decision["review_note"],
            reviewer_id=_still_a_user(decision["reviewer_id"]), reviewed_at=parse_datetime(decision["reviewed_at"] or ""))
        review_event_record(orb, action=ReviewEvent.Action.MERGE_UNDONE, actor=actor, before=before,
                            after={**merge_decision(orb), "merged_into": None}, note=note.strip())
        review_event_record(state.kept, action=ReviewEvent.Action.MERGE_UNDONE, actor=actor, before={},
                            after={"released": orb.lineage_id}, note=note.strip())
    return orb
