"""Undoing a merge: the merged Orb gets back the decision it had, the kept Orb stays as it is, both
record it; allowed for UNDO_DAYS days while neither Orb changes, refused (saying why) otherwise."""
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from orbs.errors import InvalidTransition
from orbs.models import Orb, ReviewEvent
from orbs.services import orb_approve, orb_edit, orb_merge, orb_reject
from orbs.services.merge_undo import UNDO_DAYS, merge_undo_state, orb_merge_undo

JEANS = ("Can I swap my jeans for a size 34?", "Can I swap my jeans for size 34?")


@pytest.fixture
def merged(make_orb, reviewer_user, user_for_role):
    """An approved Orb (approved by another reviewer, with a note) merged into a pending near-duplicate."""
    keep = make_orb(JEANS[0], approve=False)
    dup = make_orb(JEANS[1], approve=False)
    first_reviewer = user_for_role("reviewer")
    dup = orb_approve(orb_id=dup.pk, expected_version=dup.version, actor=first_reviewer, note="clear lesson")
    orb_merge(orb_id=dup.pk, expected_version=dup.version, into_id=keep.pk, actor=reviewer_user, note="same ask")
    dup.refresh_from_db()
    return Orb.objects.get(pk=keep.pk), dup, first_reviewer


def test_it_restores_the_merged_orb_as_it_was_and_records_the_undo_on_both(merged, reviewer_user):
    keep, dup, first_reviewer = merged
    decided_at = ReviewEvent.objects.get(orb=dup, action="approved").at

    restored = orb_merge_undo(orb_id=dup.pk, expected_version=dup.version, actor=reviewer_user, note="not the same")

    assert (restored.status, restored.merged_into, restored.reviewer, restored.review_note) == (
        Orb.Status.APPROVED, None, first_reviewer, "clear lesson")
    assert abs(restored.reviewed_at - decided_at) < timedelta(seconds=1)
    kept_now = Orb.objects.get(pk=keep.pk)
    assert (kept_now.status, kept_now.version, kept_now.outcome) == (keep.status, keep.version, keep.outcome)
    undone = ReviewEvent.objects.get(orb=dup, action=ReviewEvent.Action.MERGE_UNDONE)
    assert (undone.actor, undone.note, undone.after["status"]) == (reviewer_user, "not the same", "approved")
    assert undone.before["merged_into"] == keep.pk
    assert keep.events.filter(action=ReviewEvent.Action.MERGE_UNDONE, after={"released": dup.pk}).exists()
    assert merge_undo_state(orb=restored) is None  # nothing left to undo
    with pytest.raises(InvalidTransition, match="was not merged"):
        orb_merge_undo(orb_id=dup.pk, expected_version=restored.version, actor=reviewer_user)


def test_it_is_allowed_until_the_deadline_and_refused_after(merged, reviewer_user):
    _, dup, _ = merged
    state = merge_undo_state(orb=dup)
    assert state.allowed and state.until == state.merge.at + timedelta(days=UNDO_DAYS)
    assert merge_undo_state(orb=dup, now=state.until - timedelta(minutes=1)).allowed

    # The merge as if made just over UNDO_DAYS ago.
    ReviewEvent.objects.filter(pk=state.merge.pk).update(at=timezone.now() - timedelta(days=UNDO_DAYS, minutes=1))

    late = merge_undo_state(orb=dup)
    assert not late.allowed and f"the {UNDO_DAYS} days to undo it ended on" in late.refusal
    with pytest.raises(InvalidTransition, match="cannot be undone"):
        orb_merge_undo(orb_id=dup.pk, expected_version=dup.version, actor=reviewer_user)
    assert Orb.objects.get(pk=dup.pk).status == Orb.Status.SUPERSEDED


@pytest.mark.parametrize("change", ["edit", "approve", "reject"])
def test_it_is_refused_once_the_kept_orb_has_changed(merged, reviewer_user, change):
    keep, dup, _ = merged
    if change == "edit":
        orb_edit(orb_id=keep.pk, expected_version=keep.version, actor=reviewer_user,
                 outcome="Offer the exchange at once.", approve=False)
    elif change == "approve":
        orb_approve(orb_id=keep.pk, expected_version=keep.version, actor=reviewer_user)
    else:
        orb_reject(orb_id=keep.pk, expected_version=keep.version, actor=reviewer_user, reason="vague")

    refused = merge_undo_state(orb=dup)

    assert not refused.allowed and f"Orb #{keep.pk}, the kept one, has changed since the merge" in refused.refusal
    with pytest.raises(InvalidTransition):
        orb_merge_undo(orb_id=dup.pk, expected_version=dup.version, actor=reviewer_user)
    assert Orb.objects.get(pk=dup.pk).merged_into_id == keep.pk


def test_the_kept_orbs_page_offers_the_undo_and_states_the_rule(client, merged, reviewer_user):
    keep, dup, _ = merged
    client.force_login(reviewer_user)

    page = client.get(reverse("orbs:detail", args=[keep.pk])).content.decode()

    assert "Undo this merge" in page and f"can be undone for {UNDO_DAYS} days" in page
    assert reverse("orbs:merge_undo", args=[dup.pk]) in page
    undone = client.post(reverse("orbs:merge_undo", args=[dup.pk]), {"expected_version": dup.version}, follow=True)
    assert undone.redirect_chain[-1][0] == reverse("orbs:detail", args=[dup.pk])
    assert f"Orb #{dup.pk}: merge undone" in undone.content.decode()
    assert Orb.objects.get(pk=dup.pk).status == Orb.Status.APPROVED


def test_a_refused_undo_says_why_on_the_page_and_changes_nothing(client, merged, reviewer_user):
    keep, dup, _ = merged
    orb_approve(orb_id=keep.pk, expected_version=keep.version, actor=reviewer_user)
    client.force_login(reviewer_user)

    page = client.get(reverse("orbs:detail", args=[keep.pk])).content.decode()
    refused = client.post(reverse("orbs:merge_undo", args=[dup.pk]), {"expected_version": dup.version}, follow=True)

    assert "Undo this merge" not in page and "Cannot be undone: Orb #" in page
    assert "has changed since the merge" in refused.content.decode()
    assert Orb.objects.get(pk=dup.pk).status == Orb.Status.SUPERSEDED


def test_only_reviewers_undo(client, merged, operator_user):
    _, dup, _ = merged
    client.force_login(operator_user)
    assert client.post(reverse("orbs:merge_undo", args=[dup.pk]), {"expected_version": dup.version}).status_code == 403
