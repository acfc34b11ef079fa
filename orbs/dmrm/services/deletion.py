"""Soft deletion of DMRM experiences, with the Orbs' semantics: the caller names the version they
saw (a stale one changes nothing), a reason is required, an ExperienceEvent records who, when and
why, a deleted experience is never retrieved and leaves the lists unless asked for, and deleting
it again answers with it as it is. Restoring gives back the status it had."""
from django.db import transaction
from django.db.models import F

from orbs.dmrm.models import Experience, ExperienceEvent
from orbs.errors import InvalidTransition, OrbsError, StaleVersion


def _actor_name(actor) -> str:
    return actor.get_username() if actor else ""


def _locked(experience_id: int, expected_version: int) -> Experience:
    experience = Experience.objects.select_for_update().get(pk=experience_id)
    if experience.version != expected_version:
        raise StaleVersion(f"experience #{experience_id} was changed after you loaded it (you saw version "
                           f"{expected_version}, it is now version {experience.version}, {experience.status}); "
                           "nothing was changed, reload and decide again")
    return experience


def _set_status(experience: Experience, status: str, *, action: str, actor, note: str) -> Experience:
    before = experience.status
    Experience.objects.filter(pk=experience.pk).update(status=status, version=F("version") + 1)
    experience.refresh_from_db()
    ExperienceEvent.objects.create(experience=experience, action=action, actor=actor, actor_name=_actor_name(actor),
                                   before={"status": before}, after={"status": status}, note=note)
    return experience


def experience_delete(*, experience_id: int, expected_version: int, actor, reason: str) -> Experience:
    if not reason.strip():
        raise OrbsError("reason: a reason is required to delete an experience")
    with transaction.atomic():
        current = Experience.objects.select_for_update().get(pk=experience_id)
        if current.status == Experience.Status.DELETED:
            return current
        experience = _locked(experience_id, expected_version)
        return _set_status(experience, Experience.Status.DELETED, action=ExperienceEvent.Action.DELETED, actor=actor,
                           note=reason.strip())


def experience_restore(*, experience_id: int, expected_version: int, actor, note: str = "") -> Experience:
    with transaction.atomic():
        experience = _locked(experience_id, expected_version)
        if experience.status != Experience.Status.DELETED:
            raise InvalidTransition(f"cannot restore experience #{experience_id}: it is {experience.status}, "
                                    "not deleted")
        deleted = experience.events.filter(action=ExperienceEvent.Action.DELETED).order_by("-at", "-id").first()
        previous = (deleted.before.get("status") if deleted else None) or Experience.Status.PENDING
        return _set_status(experience, previous, action=ExperienceEvent.Action.RESTORED, actor=actor,
                           note=note.strip())
