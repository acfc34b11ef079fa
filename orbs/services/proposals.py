"""Proposals: an agent (an API key with memory:write) asks to correct an Orb's text or to forget it,
and says why. A proposal changes nothing until a reviewer decides it in the review queue: accepting
applies it through the review workflow (a new revision, or a soft delete, in the Orb's history with
the proposal's reason); rejecting keeps the Orb as it is. Only a person decides: the API offers
no route that accepts or rejects a proposal.
"""
from typing import get_args

from django.db import transaction
from django.utils import timezone

from orbs.backends.emotion import EmotionLabel
from orbs.content import content_normalise
from orbs.errors import InvalidTransition, OrbsError
from orbs.models import Orb, OrbProposal
from orbs.services.deletion import actor_name, orb_delete
from orbs.services.identity import orb_current
from orbs.services.review import REVIEWABLE, orb_edit

TEXT_FIELDS = ("obs", "emotion", "outcome")
MAX_TEXT = 20000
MAX_REASON = 2000


def _required_text(value: str, field: str, what: str) -> str:
    value = (value or "").strip()
    if not value:
        raise OrbsError(f"{field}: {what} is required")
    if len(value) > MAX_REASON:
        raise OrbsError(f"{field}: at most {MAX_REASON} characters")
    return value


def _edited_fields(orb: Orb, texts: dict) -> dict:
    """The proposed texts that differ from the Orb's (normalised as an edit compares them)."""
    given = {field: content_normalise(value) for field, value in texts.items() if value is not None}
    for field, value in given.items():
        if not value:
            raise OrbsError(f"{field}: may not be blank; leave it out to keep the Orb's {field}")
        if len(value) > MAX_TEXT:
            raise OrbsError(f"{field}: at most {MAX_TEXT} characters")
    if "emotion" in given and given["emotion"] not in get_args(EmotionLabel):
        raise OrbsError(f"emotion: {given['emotion']!r} is not one of {', '.join(get_args(EmotionLabel))}")
    changed = {field: value for field, value in given.items() if value != content_normalise(getattr(orb, field))}
    if not changed:
        raise OrbsError("an edit proposal needs new text in obs, emotion or outcome that differs from the Orb's")
    return changed


def _refuse_repeated(orb: Orb, *, kind: str, fields: dict) -> None:
    """One pending proposal per change: an agent retrying (or looping) adds nothing to the queue."""
    same = {field: fields.get(field, "") for field in TEXT_FIELDS}
    waiting = OrbProposal.objects.filter(orb__lineage_id=orb.lineage_id, kind=kind,
                                         status=OrbProposal.Status.PENDING, **same).first()
    if waiting is not None:
        raise InvalidTransition(f"proposal #{waiting.pk} already asks this of Orb #{orb.lineage_id} and waits "
                                "for a reviewer")


def proposal_create(*, orb: Orb, kind: str, reason: str, actor, api_key=None, obs: str | None = None,
                    emotion: str | None = None, outcome: str | None = None) -> OrbProposal:
    """Propose to edit (`obs`, `emotion`, `outcome`: the new texts, those left out kept) or delete the
    current revision of `orb`. It waits, pending, for a reviewer."""
    reason = _required_text(reason, "reason", "a reason")
    texts = {"obs": obs, "emotion": emotion, "outcome": outcome}
    if orb.status not in REVIEWABLE:
        raise InvalidTransition(f"cannot propose changes to Orb #{orb.lineage_id}: it is {orb.status}")
    if kind == OrbProposal.Kind.EDIT:
        fields = _edited_fields(orb, texts)
    elif kind == OrbProposal.Kind.DELETE:
        if any(value is not None for value in texts.values()):
            raise OrbsError("a delete proposal carries no obs, emotion or outcome")
        fields = {}
    else:
        raise OrbsError(f"kind: {kind!r} is not one of edit, delete")
    _refuse_repeated(orb, kind=kind, fields=fields)
    return OrbProposal.objects.create(orb=orb, kind=kind, reason=reason, proposed_by=actor,
                                      proposed_by_name=actor_name(actor),
                                      api_key_name=api_key.name if api_key else "", **fields)


def _pending_locked(proposal_id: int) -> OrbProposal:
    proposal = OrbProposal.objects.select_for_update().select_related("orb").get(pk=proposal_id)
    if proposal.status != OrbProposal.Status.PENDING:
        raise InvalidTransition(f"proposal #{proposal.pk} was {proposal.status} already")
    return proposal


def _history_note(proposal: OrbProposal, note: str) -> str:
    """What the Orb's history keeps of an accepted proposal: who asked, why, and the reviewer's note."""
    asked = f"proposal #{proposal.pk} by {proposal.proposed_by_name or 'a removed account'}: {proposal.reason}"
    return f"{asked} (reviewer: {note})" if note else asked


def _apply(proposal: OrbProposal, *, actor, note: str) -> None:
    current = orb_current(orb_id=proposal.orb.lineage_id)
    history_note = _history_note(proposal, note)
    if proposal.kind == OrbProposal.Kind.DELETE:
        orb_delete(orb_id=current.pk, expected_version=current.version, actor=actor, reason=history_note)
        return
    texts = {field: getattr(proposal, field) or None for field in TEXT_FIELDS}
    # The new revision keeps the Orb's standing: an approved Orb stays served, a pending one waits.
    orb_edit(orb_id=current.pk, expected_version=current.version, actor=actor, note=history_note,
             approve=current.status == Orb.Status.APPROVED, **texts)


def _decided(proposal: OrbProposal, *, status: str, actor, note: str) -> OrbProposal:
    proposal.status, proposal.reviewer, proposal.reviewed_at, proposal.review_note = (
        status, actor, timezone.now(), note)
    proposal.save(update_fields=["status", "reviewer", "reviewed_at", "review_note"])
    return proposal


def proposal_accept(*, proposal_id: int, actor, note: str = "") -> OrbProposal:
    """Apply the proposal to the Orb's current revision, or nothing when the Orb refuses it (deleted,
    superseded by a merge, the edit already made): then OrbsError and the proposal stays pending."""
    note = note.strip()
    with transaction.atomic():
        proposal = _pending_locked(proposal_id)
        _apply(proposal, actor=actor, note=note)
        return _decided(proposal, status=OrbProposal.Status.ACCEPTED, actor=actor, note=note)


def proposal_reject(*, proposal_id: int, actor, note: str) -> OrbProposal:
    """Keep the Orb as it is; the note (why) is required."""
    note = _required_text(note, "note", "a note (the reason for rejecting)")
    with transaction.atomic():
        proposal = _pending_locked(proposal_id)
        return _decided(proposal, status=OrbProposal.Status.REJECTED, actor=actor, note=note)


def proposals_listed(*, status: str | None = None, bank_slug: str | None = None, orb_id: int | None = None):
    """Proposals, oldest first, optionally of one status, bank or Orb (its stable id)."""
    proposals = OrbProposal.objects.select_related("orb__bank", "reviewer")
    if status:
        proposals = proposals.filter(status=status)
    if bank_slug:
        proposals = proposals.filter(orb__bank__slug=bank_slug)
    if orb_id is not None:
        proposals = proposals.filter(orb__lineage_id=orb_id)
    return proposals.defer("orb__vector")
