"""The review workflow: decisions, revisions, merges, bulk actions, and two reviewers at once."""
import numpy as np
import pytest

from orbs.errors import InvalidTransition, OrbConflict, OrbsError
from orbs.models import Orb, ReviewEvent, content_hash_of
from orbs.services import (
    orb_approve,
    orb_edit,
    orb_from_episode,
    orb_merge,
    orb_reject,
    orbs_bulk_review,
    orbs_retrieve,
)
from tests.orbs.conftest import success_trajectory


@pytest.fixture
def pending(make_orb):
    return make_orb("The coffee maker I bought stopped heating after a week.", approve=False)


def test_it_approves_and_audits_who_and_when(pending, reviewer_user):
    orb = orb_approve(orb_id=pending.pk, expected_version=1, actor=reviewer_user, note="clear lesson")
    assert (orb.status, orb.version, orb.reviewer, orb.review_note) == ("approved", 2, reviewer_user, "clear lesson")
    event = orb.events.get(action=ReviewEvent.Action.APPROVED)
    assert event.actor == reviewer_user and event.actor_name == reviewer_user.username
    assert event.before == {"status": "pending", "version": 1, "review_note": ""}
    assert event.after == {"status": "approved", "version": 2, "review_note": "clear lesson"}


def test_it_needs_a_reason_to_reject(pending, reviewer_user):
    with pytest.raises(OrbsError, match="reason is required"):
        orb_reject(orb_id=pending.pk, expected_version=1, actor=reviewer_user, reason="  ")
    orb = orb_reject(orb_id=pending.pk, expected_version=1, actor=reviewer_user, reason="Blames the customer.")
    assert (orb.status, orb.review_note) == ("rejected", "Blames the customer.")


def test_it_keeps_the_second_reviewers_stale_decision_from_overwriting(pending, user_for_role):
    first, second = user_for_role("reviewer"), user_for_role("reviewer")
    seen_by_second = Orb.objects.get(pk=pending.pk)
    orb_approve(orb_id=pending.pk, expected_version=1, actor=first)
    with pytest.raises(OrbConflict) as conflict:
        orb_reject(orb_id=seen_by_second.pk, expected_version=seen_by_second.version, actor=second, reason="no")
    assert f"changed by {first.username}" in str(conflict.value)
    assert "Nothing was overwritten" in str(conflict.value)
    orb = Orb.objects.get(pk=pending.pk)
    assert (orb.status, orb.reviewer, orb.version) == ("approved", first, 2)
    assert not orb.events.filter(actor=second).exists()


def test_it_edits_into_a_new_revision_and_keeps_the_history(pending, reviewer_user):
    old_vector = np.asarray(pending.vector)
    new = orb_edit(orb_id=pending.pk, expected_version=1, actor=reviewer_user,
                   outcome="Next time: call `create_warranty_claim` with the order id before offering a refund.",
                   note="more specific")
    old = Orb.objects.get(pk=pending.pk)
    assert old.status == Orb.Status.SUPERSEDED and old.version == 2
    assert new.supersedes == old and new.status == Orb.Status.APPROVED and new.reviewer == reviewer_user
    assert new.content_hash == content_hash_of(obs=old.obs, emotion=old.emotion, outcome=new.outcome)
    assert new.content_hash != old.content_hash
    assert not np.allclose(np.asarray(new.vector), old_vector)  # re-embedded
    assert new.reflector_backend == "human" and new.episode == old.episode
    assert list(old.events.values_list("action", flat=True)) == ["created", "superseded"]
    edited = new.events.get()
    assert edited.action == ReviewEvent.Action.EDITED
    assert edited.before["outcome"] == old.outcome and edited.before["revision_of"] == old.pk
    assert edited.after["outcome"] == new.outcome
    with pytest.raises(InvalidTransition):
        orb_approve(orb_id=old.pk, expected_version=old.version, actor=reviewer_user)


def test_it_serves_the_new_revision_not_the_superseded_one(bank, make_orb, reviewer_user):
    orb = make_orb("My kettle leaks from the bottom.")
    new = orb_edit(orb_id=orb.pk, expected_version=orb.version, actor=reviewer_user,
                   outcome="Offer a replacement kettle.")
    hits = orbs_retrieve(bank=bank, query="leaking kettle", context={}).hits
    assert [hit.orb.pk for hit in hits] == [new.pk]


def test_it_edits_only_the_context_in_place(pending, reviewer_user):
    orb = orb_edit(orb_id=pending.pk, expected_version=1, actor=reviewer_user, context={"reward": 1.0, "sku": "CM-9"})
    assert orb.pk == pending.pk and orb.version == 2 and orb.content_hash == pending.content_hash
    assert orb.context == {"reward": 1.0, "sku": "CM-9"}
    with pytest.raises(OrbsError, match="changes nothing"):
        orb_edit(orb_id=orb.pk, expected_version=2, actor=reviewer_user, context={"reward": 1.0, "sku": "CM-9"})


def test_it_merges_a_near_duplicate_into_the_orb_to_keep(bank, reviewer_user):
    keep = orb_from_episode(bank=bank, trajectory=success_trajectory("Can I swap my jeans for a size 34?")).orb
    dup = orb_from_episode(bank=bank, trajectory=success_trajectory("Can I swap my jeans for size 34?")).orb
    assert dup.near_duplicate_of == keep
    kept = orb_merge(orb_id=dup.pk, expected_version=dup.version, into_id=keep.pk, actor=reviewer_user)
    dup.refresh_from_db()
    assert kept == keep
    assert (dup.status, dup.merged_into) == (Orb.Status.SUPERSEDED, keep)
    assert keep.events.filter(action="merged", after={"absorbed": dup.pk}).exists()
    with pytest.raises(OrbsError):
        orb_merge(orb_id=keep.pk, expected_version=keep.version, into_id=keep.pk, actor=reviewer_user)


def test_it_applies_a_bulk_decision_to_all_or_none(make_orb, reviewer_user):
    a = make_orb("The blender is too loud.", approve=False)
    b = make_orb("My sweater shrank in the wash.", approve=False)
    c = make_orb("The toaster burns every slice.", approve=False)
    orb_approve(orb_id=c.pk, expected_version=1, actor=reviewer_user)  # c is now at version 2
    with pytest.raises(OrbConflict):
        orbs_bulk_review(action="reject", items=[(a.pk, 1), (b.pk, 1), (c.pk, 1)], actor=reviewer_user, reason="dup")
    assert set(Orb.objects.filter(pk__in=[a.pk, b.pk]).values_list("status", flat=True)) == {"pending"}
    done = orbs_bulk_review(action="approve", items=[(a.pk, 1), (b.pk, 1)], actor=reviewer_user)
    assert [orb.status for orb in done] == ["approved", "approved"]
