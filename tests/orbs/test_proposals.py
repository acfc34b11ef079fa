"""An agent may ask to correct or forget an Orb, with a reason; only a reviewer's decision changes it."""
import pytest

from memweb.models import ApiKey
from orbs.errors import OrbsError
from orbs.models import Orb, OrbProposal, ReviewEvent
from orbs.services import orb_current
from orbs.services.erasure import customer_erase
from orbs.services.proposals import proposal_accept, proposal_create, proposal_reject
from orbs.vocabulary import OrbsScope
from tests.orbs.conftest import post

API = "/api/orbs"
LESSON = "My kettle leaks from the bottom after a week."
BETTER = "Offer a replacement kettle before a refund when it leaks within 30 days."


def _headers(user, *scopes) -> dict:
    _, secret = ApiKey.issue(user=user, name="agent", scopes=list(scopes) or None)
    return {"Authorization": f"Bearer {secret}"}


def test_an_accepted_edit_is_a_new_revision_that_keeps_the_orb_served(make_orb, operator_user, reviewer_user):
    orb = make_orb(LESSON)
    proposal = proposal_create(orb=orb, kind="edit", reason="the refund advice is wrong", actor=operator_user,
                               outcome=BETTER)
    assert orb_current(orb_id=orb.lineage_id).outcome == orb.outcome  # nothing changes until a reviewer accepts

    accepted = proposal_accept(proposal_id=proposal.pk, actor=reviewer_user, note="agreed")
    current = orb_current(orb_id=orb.lineage_id)
    assert (accepted.status, accepted.reviewer) == (OrbProposal.Status.ACCEPTED, reviewer_user)
    assert (current.revision, current.outcome, current.status) == (2, BETTER, Orb.Status.APPROVED)
    edited = current.events.get(action=ReviewEvent.Action.EDITED)
    assert "the refund advice is wrong" in edited.note and edited.actor == reviewer_user
    with pytest.raises(OrbsError, match="accepted already"):
        proposal_reject(proposal_id=proposal.pk, actor=reviewer_user, note="changed my mind")


def test_a_deletion_is_applied_on_accept_and_a_rejection_needs_a_note(make_orb, operator_user, reviewer_user):
    kept, forgotten = make_orb(LESSON), make_orb("The courier left my parcel in the rain.")
    keep = proposal_create(orb=kept, kind="delete", reason="outdated", actor=operator_user)
    forget = proposal_create(orb=forgotten, kind="delete", reason="customer asked", actor=operator_user)

    with pytest.raises(OrbsError, match="note"):
        proposal_reject(proposal_id=keep.pk, actor=reviewer_user, note="  ")
    proposal_reject(proposal_id=keep.pk, actor=reviewer_user, note="still true")
    proposal_accept(proposal_id=forget.pk, actor=reviewer_user)

    assert orb_current(orb_id=kept.lineage_id).status == Orb.Status.APPROVED
    assert orb_current(orb_id=forgotten.lineage_id).status == Orb.Status.DELETED
    with pytest.raises(OrbsError, match="deleted"):
        proposal_create(orb=orb_current(orb_id=forgotten.lineage_id), kind="delete", reason="again",
                        actor=operator_user)


def test_a_key_proposes_and_lists_but_cannot_decide(client, make_orb, operator_user):
    orb = make_orb(LESSON)
    writer = _headers(operator_user, OrbsScope.MEMORY_WRITE, OrbsScope.MEMORY_READ)
    url = f"{API}/orbs/{orb.lineage_id}/proposals"

    made = post(client, url, {"kind": "edit", "reason": "wrong advice", "outcome": BETTER}, headers=writer)
    assert made.status_code == 201, made.content
    assert made.json() | {"id": 0, "created_at": ""} == made.json() | {
        "id": 0, "created_at": "", "orb_id": orb.lineage_id, "kind": "edit", "status": "pending", "outcome": BETTER,
        "proposed_by": operator_user.get_username(), "api_key_name": "agent", "reviewer": None}

    refused = [post(client, url, body, headers=writer) for body in (
        {"kind": "edit", "reason": "no text"}, {"kind": "delete", "reason": "   "},
        {"kind": "edit", "reason": "same", "outcome": orb.outcome})]
    assert [answer.status_code for answer in refused] == [422, 422, 422]
    assert all(answer.json()["detail"][0]["msg"] for answer in refused)
    reader = _headers(operator_user, OrbsScope.MEMORY_READ)
    assert post(client, url, {"kind": "delete", "reason": "x"}, headers=reader).status_code == 403
    post(client, url, {"kind": "delete", "reason": "forget it"}, headers=writer)
    repeated = post(client, url, {"kind": "delete", "reason": "forget it, please"}, headers=writer)
    assert repeated.status_code == 409 and "already asks this" in repeated.json()["detail"]

    pending = client.get(f"{API}/proposals", {"status": "pending", "page_size": 1}, headers=writer).json()
    assert (pending["count"], [p["kind"] for p in pending["items"]]) == (2, ["edit"])
    assert client.get(f"{API}/proposals", {"status": "accepted"}, headers=writer).json()["count"] == 0
    # The decision is a reviewer's session's, on the queue page: a key reaches no decide route.
    decided = client.post(f"/orbs/proposals/{pending['items'][0]['id']}/decide/", {"decision": "accept"},
                          headers=writer)
    assert decided.status_code == 302 and "login" in decided["Location"]
    assert OrbProposal.objects.filter(status=OrbProposal.Status.PENDING).count() == 2


def test_the_queue_page_shows_pending_proposals_and_decides_them(client, make_orb, operator_user, reviewer_user):
    orb = make_orb(LESSON)
    proposal = proposal_create(orb=orb, kind="edit", reason="wrong advice", actor=operator_user, outcome=BETTER)
    client.force_login(reviewer_user)

    page = client.get("/orbs/").content.decode()
    assert f'id="proposal-{proposal.pk}"' in page and "wrong advice" in page and BETTER in page

    refused = client.post(f"/orbs/proposals/{proposal.pk}/decide/", {"decision": "reject", "note": ""}, follow=True)
    assert "note" in refused.content.decode() and OrbProposal.objects.get().status == OrbProposal.Status.PENDING
    client.post(f"/orbs/proposals/{proposal.pk}/decide/", {"decision": "accept", "note": "agreed"})
    assert orb_current(orb_id=orb.lineage_id).outcome == BETTER
    assert f'id="proposal-{proposal.pk}"' not in client.get("/orbs/").content.decode()


def test_erasing_a_customer_removes_what_was_proposed_about_their_orbs(bank, make_orb, operator_user):
    orb = make_orb(LESSON, customer_key="cust-77")
    proposal_create(orb=orb, kind="edit", reason="cust-77 asked", actor=operator_user, outcome=BETTER)
    assert OrbProposal.objects.filter(orb__customer_key="cust-77").count() == 1
    customer_erase(bank=bank, customer_key="cust-77", actor=operator_user)
    assert not OrbProposal.objects.exists()
