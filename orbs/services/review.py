"""The review workflow: approve, reject, edit (a new revision), merge, bulk.

Every action names the Orb by its stable id or any revision's id, and acts on its current
revision (orbs.services.identity). Every action names the version the reviewer saw. The write is
a conditional UPDATE ... WHERE version = expected, so when two reviewers act on the same Orb the
second one gets OrbConflict and nothing of theirs is written. A new revision carries on its Orb's
version count, so a version seen before an edit is stale after it. Each action appends a
ReviewEvent with what changed, before and after.
"""
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from orbs.content import content_normalise
from orbs.errors import InvalidTransition, OrbConflict, OrbsError
from orbs.models import Orb, ReviewEvent, orb_document
from orbs.services.banks import bank_embedder
from orbs.services.history import ORB_REVISION, REVIEW_EVENT, history_append, history_lock
from orbs.services.identity import orb_current

SNAPSHOT_FIELDS = ("status", "version", "revision", "content_hash", "obs", "emotion", "outcome", "context", "review_note")
REVIEWABLE = (Orb.Status.PENDING, Orb.Status.APPROVED, Orb.Status.REJECTED)
HUMAN = "human"


def orb_snapshot(orb: Orb) -> dict:
    return {field: getattr(orb, field) for field in SNAPSHOT_FIELDS}


def _changes(before: dict, after: dict) -> tuple[dict, dict]:
    changed = [field for field in after if before.get(field) != after[field]]
    return {f: before.get(f) for f in changed}, {f: after[f] for f in changed}


def _actor_name(actor) -> str:
    return actor.get_username() if actor else ""


def review_event_record(orb: Orb, *, action: str, actor, before: dict, after: dict, note: str = "") -> ReviewEvent:
    event = ReviewEvent.objects.create(
        orb=orb, action=action, actor=actor, actor_name=_actor_name(actor), before=before, after=after, note=note
    )
    history_append(bank_id=orb.bank_id, rows=[(REVIEW_EVENT, event.pk)])
    return event


def orb_conflict(orb: Orb, expected_version: int) -> OrbConflict:
    last = orb.events.order_by("-at", "-id").first()
    return OrbConflict(orb_id=orb.lineage_id, expected_version=expected_version, current_version=orb.version,
                       current_status=orb.status, actor=last.actor_name if last else "")


def _checked(orb_id: int, expected_version: int, allowed: tuple[str, ...], action: str) -> Orb:
    orb = orb_current(orb_id=orb_id, queryset=Orb.objects.select_related("bank"))
    if orb.version != expected_version:
        raise orb_conflict(orb, expected_version)
    if orb.status not in allowed:
        raise InvalidTransition(f"cannot {action} Orb #{orb.lineage_id}: it is {orb.status}")
    return orb


def orb_update_if_version(orb: Orb, expected_version: int, **changes) -> Orb:
    history_lock(bank_id=orb.bank_id)  # before the row's lock: the order every chain writer keeps
    updated = Orb.objects.filter(pk=orb.pk, version=expected_version).update(
        **changes, version=F("version") + 1
    )
    if not updated:
        orb.refresh_from_db()
        raise orb_conflict(orb, expected_version)
    orb.refresh_from_db()
    return orb


def _decide(*, orb_id, expected_version, actor, status, note, action, allowed) -> Orb:
    with transaction.atomic():
        orb = _checked(orb_id, expected_version, allowed, action)
        before = orb_snapshot(orb)
        orb = orb_update_if_version(orb, expected_version, status=status, reviewer=actor,
                                  reviewed_at=timezone.now(), review_note=note)
        changed_before, changed_after = _changes(before, orb_snapshot(orb))
        review_event_record(orb, action=action, actor=actor, before=changed_before, after=changed_after, note=note)
    return orb


def orb_approve(*, orb_id: int, expected_version: int, actor, note: str = "") -> Orb:
    return _decide(orb_id=orb_id, expected_version=expected_version, actor=actor, status=Orb.Status.APPROVED,
                   note=note, action=ReviewEvent.Action.APPROVED, allowed=(Orb.Status.PENDING, Orb.Status.REJECTED))


def orb_reject(*, orb_id: int, expected_version: int, actor, reason: str) -> Orb:
    if not reason.strip():
        raise OrbsError("a reason is required to reject an Orb")
    return _decide(orb_id=orb_id, expected_version=expected_version, actor=actor, status=Orb.Status.REJECTED,
                   note=reason.strip(), action=ReviewEvent.Action.REJECTED,
                   allowed=(Orb.Status.PENDING, Orb.Status.APPROVED))


def _edited_text(stored: str, given: str | None) -> str:
    """The given text, normalised; the stored text when the two differ only invisibly (a browser's
    \r\n line breaks, trailing spaces, another Unicode form), so such an edit changes nothing."""
    if given is None:
        return stored
    given = content_normalise(given)
    return stored if given == content_normalise(stored) else given


def _revision_fields(orb: Orb, *, obs, emotion, outcome, context) -> dict:
    fields = {
        "obs": _edited_text(orb.obs, obs),
        "emotion": _edited_text(orb.emotion, emotion),
        "outcome": _edited_text(orb.outcome, outcome),
        "context": orb.context if context is None else context,
    }
    if all(fields[name] == getattr(orb, name) for name in fields):
        raise OrbsError("the edit changes nothing: obs, emotion, outcome and context are all as they were")
    return fields


def _edit_in_place(orb: Orb, expected_version: int, *, actor, context: dict, vector, note: str) -> Orb:
    """A context-only edit keeps the Orb's id (the hash covers obs, emotion and outcome),
    so it is the same Orb at a new version, re-embedded."""
    before = orb_snapshot(orb)
    orb = orb_update_if_version(orb, expected_version, context=context, vector=vector)
    changed_before, changed_after = _changes(before, orb_snapshot(orb))
    review_event_record(orb, action=ReviewEvent.Action.EDITED, actor=actor, before=changed_before, after=changed_after, note=note)
    return orb


def _revision_hash(old: Orb, fields: dict) -> str:
    """The edited Orb's id, in its bank's identity (a per-customer bank's includes the customer)."""
    return old.bank.orb_hash(obs=fields["obs"], emotion=fields["emotion"], outcome=fields["outcome"],
                             customer_key=old.customer_key)


def _new_revision(old: Orb, fields: dict, *, actor, vector, note: str, approve: bool) -> Orb:
    """The next revision of `old`'s Orb, at `old`'s version after it was superseded."""
    decision = {"status": Orb.Status.APPROVED, "reviewer": actor, "reviewed_at": timezone.now()} if approve else {}
    new = Orb.objects.create(
        bank=old.bank, **fields, content_hash=_revision_hash(old, fields),
        lineage_id=old.lineage_id, revision=old.revision + 1, version=old.version,
        timestamp=old.timestamp, customer_key=old.customer_key, domain=old.domain, source=old.source,
        source_label=old.source_label, episode_ref=old.episode_ref, episode=old.episode, supersedes=old,
        vector=vector, embedding_model=old.embedding_model, review_note=note,
        emotion_backend=HUMAN if fields["emotion"] != old.emotion else old.emotion_backend,
        reflector_backend=HUMAN if fields["outcome"] != old.outcome else old.reflector_backend,
        **decision,
    )
    history_append(bank_id=new.bank_id, rows=[(ORB_REVISION, new.pk)])
    return new


def _supersede(old: Orb, expected_version: int, fields: dict, *, actor, vector, note: str, approve: bool) -> Orb:
    new_hash = _revision_hash(old, fields)
    clash = Orb.objects.filter(bank=old.bank, content_hash=new_hash).exclude(pk=old.pk).first()
    if clash is not None:
        raise OrbsError(f"Orb #{clash.lineage_id} (revision {clash.revision}) in this bank already has exactly this "
                        "content")
    before = orb_snapshot(old)
    old = orb_update_if_version(old, expected_version, status=Orb.Status.SUPERSEDED)
    new = _new_revision(old, fields, actor=actor, vector=vector, note=note, approve=approve)
    review_event_record(old, action=ReviewEvent.Action.SUPERSEDED, actor=actor, before={"status": before["status"]},
           after={"status": old.status, "superseded_by": new.pk}, note=note)
    changed_before, changed_after = _changes(before, orb_snapshot(new))
    review_event_record(new, action=ReviewEvent.Action.EDITED, actor=actor, before={**changed_before, "revision_of": old.pk},
           after=changed_after, note=note)
    return new


def orb_edit(*, orb_id: int, expected_version: int, actor, obs: str | None = None, emotion: str | None = None,
             outcome: str | None = None, context: dict | None = None, note: str = "", approve: bool = True) -> Orb:
    """A new revision with its own hash and vector, under the same stable id; the old one becomes
    superseded. Text is compared after normalisation (orbs.content), so an edit whose text differs
    only invisibly changes only what else it changes: a context-only edit updates the current
    revision in place. Returns the Orb as it stands after the edit (its current revision)."""
    current = orb_current(orb_id=orb_id, queryset=Orb.objects.select_related("bank"))
    fields = _revision_fields(current, obs=obs, emotion=emotion, outcome=outcome, context=context)
    vector = bank_embedder(current.bank).embed_one(orb_document(**fields))
    with transaction.atomic():
        old = _checked(orb_id, expected_version, REVIEWABLE, "edit")
        if _revision_hash(old, fields) == old.content_hash:
            return _edit_in_place(old, expected_version, actor=actor, context=fields["context"], vector=vector,
                                  note=note)
        return _supersede(old, expected_version, fields, actor=actor, vector=vector, note=note, approve=approve)


def orb_merge(*, orb_id: int, expected_version: int, into_id: int, actor, note: str = "") -> Orb:
    """Fold a near-duplicate into the Orb to keep (the current revision of each); returns the kept Orb.
    Both keep their stable ids: the merged one stays readable, superseded, naming the kept one."""
    with transaction.atomic():
        orb = _checked(orb_id, expected_version, REVIEWABLE, "merge")
        target = _merge_target(orb, into_id)
        if target.status not in (Orb.Status.PENDING, Orb.Status.APPROVED):
            raise InvalidTransition(f"Orb #{target.lineage_id} is {target.status}, so it cannot take a merge")
        before = merge_decision(orb)
        orb = orb_update_if_version(orb, expected_version, status=Orb.Status.SUPERSEDED, merged_into=target,
                                  reviewer=actor, reviewed_at=timezone.now(), review_note=note)
        # The decision it had and the kept Orb's version are what an undo restores and checks.
        review_event_record(orb, action=ReviewEvent.Action.MERGED, actor=actor, before=before,
               after={**merge_decision(orb), "merged_into": target.lineage_id, "target_version": target.version},
               note=note)
        review_event_record(target, action=ReviewEvent.Action.MERGED, actor=actor, before={}, after={"absorbed": orb.lineage_id},
               note=note)
    return target


def merge_decision(orb: Orb) -> dict:
    """The review decision an Orb holds, as a merge records it (and its undo restores it)."""
    return {"status": orb.status, "review_note": orb.review_note, "reviewer_id": orb.reviewer_id,
            "reviewed_at": orb.reviewed_at.isoformat() if orb.reviewed_at else None}


def _merge_target(orb: Orb, into_id: int) -> Orb:
    try:
        target = orb_current(orb_id=into_id)
    except Orb.DoesNotExist:
        target = None
    if target is None or target.bank_id != orb.bank_id or target.lineage_id == orb.lineage_id:
        raise OrbsError(f"Orb #{into_id} cannot take this merge: choose another Orb of bank {orb.bank.name!r}")
    return target


def orbs_bulk_review(*, action: str, items: list[tuple[int, int]], actor, reason: str = "") -> list[Orb]:
    """Approve or reject a selection of (orb id, expected version): all of it, or none of it
    when any Orb is stale or cannot take the action."""
    selection = dict(items)
    with transaction.atomic():
        # The banks' history locks first, then the Orbs' rows: every writer takes them in this order.
        for bank_id in sorted(set(Orb.objects.filter(pk__in=selection).values_list("bank_id", flat=True))):
            history_lock(bank_id=bank_id)
        if action == "approve":
            return [orb_approve(orb_id=i, expected_version=v, actor=actor, note=reason) for i, v in selection.items()]
        if action == "reject":
            return [orb_reject(orb_id=i, expected_version=v, actor=actor, reason=reason) for i, v in selection.items()]
    raise OrbsError(f"unknown bulk action {action!r}; use approve or reject")


def orb_flag(*, orb_id: int, note: str) -> bool:
    """Put an Orb before a reviewer with the reason (a measurement that says it does harm), once:
    a flag never deletes, rejects or stops serving it; only a reviewer decides. False when it was
    flagged already."""
    with transaction.atomic():
        history_lock(bank_id=Orb.objects.values_list("bank_id", flat=True).get(pk=orb_id))
        if not Orb.objects.filter(pk=orb_id, flagged_at__isnull=True).update(flagged_at=timezone.now(),
                                                                            flag_note=note):
            return False
        review_event_record(Orb.objects.get(pk=orb_id), action=ReviewEvent.Action.FLAGGED, actor=None, before={},
               after={"flagged": True}, note=note)
    return True


def orbs_pending_count(*, orb_ids) -> int:
    """How many of these Orbs still wait for a reviewer (`orb_ids`: ids or a values queryset)."""
    return Orb.objects.filter(pk__in=orb_ids, status=Orb.Status.PENDING).count()


def orbs_pending_approve(*, orb_ids, note: str) -> int:
    """Approve, as the system, those of these Orbs still pending; returns how many. An Orb a
    reviewer acted on meanwhile keeps their decision."""
    approved = 0
    for orb in Orb.objects.filter(pk__in=orb_ids, status=Orb.Status.PENDING):
        try:
            orb_approve(orb_id=orb.pk, expected_version=orb.version, actor=None, note=note)
        except OrbsError:
            continue
        approved += 1
    return approved
