"""Deleting without losing the audit trail: an Orb is soft-deleted (status deleted, never served,
out of the lists unless asked for, restorable) and a bank is archived (hidden, refusing new
memories and retrievals, its pages and the runs that used it intact, restorable).

Both are idempotent: deleting what is deleted answers with it as it is. A per-customer erasure,
which does remove content, is orbs.services.erasure.
"""
from django.db import transaction
from django.utils import timezone

from orbs.errors import BankArchived, InvalidTransition, OrbsError
from orbs.models import BankEvent, MemoryBank, Orb, ReviewEvent
from orbs.services.history import history_lock
from orbs.services.review import orb_conflict, orb_update_if_version, review_event_record


def actor_name(actor) -> str:
    """The acting user's name (an API key acts as its user), kept with the audit row."""
    return actor.get_username() if actor else ""


def _reason(reason: str, what: str) -> str:
    if not reason.strip():
        raise OrbsError(f"reason: a reason is required to delete {what}")
    return reason.strip()


def _locked(orb_id: int) -> Orb:
    """The Orb, its row locked after its bank's history (the order every chain writer keeps)."""
    history_lock(bank_id=Orb.objects.values_list("bank_id", flat=True).get(pk=orb_id))
    return Orb.objects.select_for_update().select_related("bank").get(pk=orb_id)


def orb_delete(*, orb_id: int, expected_version: int, actor, reason: str) -> Orb:
    """Soft-delete an Orb: it keeps its content and history but is never retrieved again. An Orb
    already deleted is returned as it is (whatever version the caller names)."""
    reason = _reason(reason, "an Orb")
    with transaction.atomic():
        orb = _locked(orb_id)
        if orb.status == Orb.Status.DELETED:
            return orb
        if orb.version != expected_version:
            raise orb_conflict(orb, expected_version)
        before = orb.status
        orb = orb_update_if_version(orb, expected_version, status=Orb.Status.DELETED)
        review_event_record(orb, action=ReviewEvent.Action.DELETED, actor=actor, before={"status": before},
               after={"status": orb.status}, note=reason)
    return orb


def _status_before_deletion(orb: Orb) -> str:
    deleted = orb.events.filter(action=ReviewEvent.Action.DELETED).order_by("-at", "-id").first()
    return (deleted.before.get("status") if deleted else None) or Orb.Status.PENDING


def orb_restore(*, orb_id: int, expected_version: int, actor, note: str = "") -> Orb:
    """Undo a soft delete: the Orb gets back the status it had when it was deleted."""
    with transaction.atomic():
        orb = _locked(orb_id)
        if orb.version != expected_version:
            raise orb_conflict(orb, expected_version)
        if orb.status != Orb.Status.DELETED:
            raise InvalidTransition(f"cannot restore Orb #{orb.pk}: it is {orb.status}, not deleted")
        orb = orb_update_if_version(orb, expected_version, status=_status_before_deletion(orb))
        review_event_record(orb, action=ReviewEvent.Action.RESTORED, actor=actor, before={"status": Orb.Status.DELETED},
               after={"status": orb.status}, note=note.strip())
    return orb


def bank_event(bank: MemoryBank, *, action: str, actor, note: str = "", **fields) -> BankEvent:
    return BankEvent.objects.create(bank=bank, bank_name=bank.name, action=action, actor=actor,
                                    actor_name=actor_name(actor), note=note, **fields)


def bank_archive(*, bank: MemoryBank, actor, reason: str = "") -> MemoryBank:
    """Delete a bank by archiving it; archiving an archived bank changes nothing."""
    with transaction.atomic():
        if MemoryBank.objects.filter(pk=bank.pk, archived_at__isnull=True).update(archived_at=timezone.now()):
            bank_event(bank, action=BankEvent.Action.ARCHIVED, actor=actor, note=reason.strip())
    bank.refresh_from_db()
    return bank


def bank_restore(*, bank: MemoryBank, actor, note: str = "") -> MemoryBank:
    """Bring an archived bank back; restoring a bank in use changes nothing."""
    with transaction.atomic():
        if MemoryBank.objects.filter(pk=bank.pk, archived_at__isnull=False).update(archived_at=None):
            bank_event(bank, action=BankEvent.Action.RESTORED, actor=actor, note=note.strip())
    bank.refresh_from_db()
    return bank


def bank_open_check(bank: MemoryBank) -> None:
    """BankArchived unless the bank may take memories and serve retrievals."""
    if bank.is_archived:
        raise BankArchived(bank.slug)


def bank_events(*, bank: MemoryBank):
    return BankEvent.objects.filter(bank=bank)
