"""Review of experiences, with the Orbs semantics: approve or reject (a reason is
required), the reviewer names the version they saw, and a stale version is refused."""
from django.db.models import F
from django.utils import timezone

from orbs.dmrm.models import Experience
from orbs.errors import OrbsError

ALLOWED_FROM = {
    Experience.Status.APPROVED: (Experience.Status.PENDING, Experience.Status.REJECTED),
    Experience.Status.REJECTED: (Experience.Status.PENDING, Experience.Status.APPROVED),
}


def experience_review(*, experience_id: int, expected_version: int, status: str, actor, note: str = "") -> Experience:
    if status not in ALLOWED_FROM:
        raise OrbsError(f"status: {status!r} is not a review decision; use approved or rejected")
    if status == Experience.Status.REJECTED and not note.strip():
        raise OrbsError("reason: a reason is required to reject an experience")
    updated = Experience.objects.filter(
        pk=experience_id, version=expected_version, status__in=ALLOWED_FROM[status]
    ).update(status=status, reviewer=actor, reviewed_at=timezone.now(), review_note=note.strip(),
             version=F("version") + 1)
    current = Experience.objects.get(pk=experience_id)
    if not updated:
        raise OrbsError(f"experience #{experience_id} is {current.status} at version {current.version} "
                        f"(you saw version {expected_version}); nothing was changed, reload and decide again")
    return current


def experience_flag(*, experience_id: int, note: str) -> bool:
    """Put an experience before a reviewer with the reason (a measurement that says it does harm),
    once: a flag never deletes, rejects or stops serving it. False when it was flagged already."""
    return bool(Experience.objects.filter(pk=experience_id, flagged_at__isnull=True).update(
        flagged_at=timezone.now(), flag_note=note))
