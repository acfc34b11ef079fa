"""Soft deletion of Orbs and DMRM experiences, and a bank's deletion by archive: never served
again, out of the lists unless asked for, audited with who/when/why, idempotent, restorable."""
import json

import pytest
from django.test import Client
from django.urls import reverse

from orbs.dmrm.models import DMRMSettings, Experience, ExperienceEvent
from orbs.models import BankEvent, Orb, ReviewEvent
from orbs.services import orbs_retrieve
from tests.orbs.conftest import post

API = "/api/orbs"


def delete(client, url, payload=None):
    body = "" if payload is None else json.dumps(payload)
    return client.delete(url, body, content_type="application/json")


@pytest.fixture
def reviewer_agent(reviewer_user):
    """A reviewer's signed-in session: deleting and restoring memories is review, which no API key may do."""
    session = Client()
    session.force_login(reviewer_user)
    return session


# --- Orbs ---------------------------------------------------------------------------------

def test_a_deleted_orb_is_never_retrieved_and_its_deletion_is_audited(reviewer_agent, reviewer_user, bank, make_orb):
    orb = make_orb("My blender arrived with a cracked jug.")
    assert [h.orb.pk for h in orbs_retrieve(bank=bank, query="cracked blender jug", context={}).hits] == [orb.pk]

    response = delete(reviewer_agent, f"{API}/orbs/{orb.pk}", {"expected_version": orb.version,
                                                               "reason": "a customer's private details"})

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "deleted" and response.json()["version"] == orb.version + 1
    assert orbs_retrieve(bank=bank, query="cracked blender jug", context={}).hits == []
    event = ReviewEvent.objects.filter(orb=orb).last()
    # The audit names the reviewer.
    assert (event.action, event.actor, event.actor_name) == ("deleted", reviewer_user, reviewer_user.username)
    assert event.note == "a customer's private details" and event.before == {"status": "approved"}


def test_deleted_orbs_leave_the_list_unless_asked_for(reviewer_agent, make_orb):
    kept, gone = make_orb("Where is my parcel W1?"), make_orb("Please cancel order W2.")
    delete(reviewer_agent, f"{API}/orbs/{gone.pk}", {"expected_version": gone.version, "reason": "duplicate"})

    listed = reviewer_agent.get(f"{API}/orbs").json()["items"]
    deleted = reviewer_agent.get(f"{API}/orbs?status=deleted").json()["items"]

    assert [o["id"] for o in listed] == [kept.pk]
    assert [o["id"] for o in deleted] == [gone.pk]
    assert reviewer_agent.get(f"{API}/orbs/{gone.pk}").json()["history"][-1]["action"] == "deleted"


def test_deleting_twice_answers_the_same_and_records_once(reviewer_agent, make_orb):
    orb = make_orb("The kettle leaks.")
    payload = {"expected_version": orb.version, "reason": "test data"}

    first, second = (delete(reviewer_agent, f"{API}/orbs/{orb.pk}", payload) for _ in range(2))

    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert ReviewEvent.objects.filter(orb=orb, action="deleted").count() == 1


def test_deleting_a_stale_version_is_a_conflict_and_changes_nothing(reviewer_agent, make_orb):
    orb = make_orb("The fridge hums.")

    response = delete(reviewer_agent, f"{API}/orbs/{orb.pk}", {"expected_version": orb.version - 1,
                                                               "reason": "stale"})

    assert response.status_code == 409
    assert response.json()["current_version"] == orb.version
    assert Orb.objects.get(pk=orb.pk).status == Orb.Status.APPROVED


def test_deleting_an_unknown_orb_is_a_404_and_a_reason_is_required(reviewer_agent, make_orb):
    orb = make_orb("The toaster burns bread.")
    assert delete(reviewer_agent, f"{API}/orbs/999999", {"expected_version": 1, "reason": "x"}).status_code == 404
    assert delete(reviewer_agent, f"{API}/orbs/{orb.pk}", {"expected_version": 1, "reason": " "}).status_code == 422


def test_an_operator_may_not_delete_an_orb(agent, make_orb):
    orb = make_orb("The mixer is loud.")
    assert delete(agent, f"{API}/orbs/{orb.pk}", {"expected_version": orb.version, "reason": "x"}).status_code == 403


def test_a_restored_orb_gets_its_status_back_and_is_served_again(reviewer_agent, bank, make_orb):
    orb = make_orb("My blender arrived with a cracked jug.")
    deleted = delete(reviewer_agent, f"{API}/orbs/{orb.pk}", {"expected_version": orb.version,
                                                              "reason": "by mistake"}).json()

    restored = post(reviewer_agent, f"{API}/orbs/{orb.pk}/restore", {"expected_version": deleted["version"]})
    again = post(reviewer_agent, f"{API}/orbs/{orb.pk}/restore", {"expected_version": restored.json()["version"]})

    assert restored.status_code == 200 and restored.json()["status"] == "approved"
    assert [h.orb.pk for h in orbs_retrieve(bank=bank, query="cracked blender jug", context={}).hits] == [orb.pk]
    assert again.status_code == 409  # it is not deleted any more
    assert ReviewEvent.objects.filter(orb=orb).last().action == "restored"


def test_a_deleted_orb_takes_no_review_action(reviewer_agent, make_orb):
    orb = make_orb("The iron is cold.", approve=False)
    deleted = delete(reviewer_agent, f"{API}/orbs/{orb.pk}", {"expected_version": orb.version, "reason": "spam"})

    approve = post(reviewer_agent, f"{API}/orbs/{orb.pk}/approve", {"expected_version": deleted.json()["version"]})

    assert approve.status_code == 409 and "deleted" in approve.json()["detail"]


# --- DMRM experiences ----------------------------------------------------------------------

GOAL = "return the jacket from order W7"


@pytest.fixture
def experience(agent, bank):
    # Served at once, so deletion is what takes it out (the review gate: tests/orbs/dmrm/test_review_gate.py).
    DMRMSettings.objects.create(bank=bank, min_similarity=-1.0, review_api_writes=False)
    written = post(agent, f"{API}/experiences/banks/{bank.slug}/transitions", {"transitions": [
        {"trajectory_id": "t1", "step": 0, "goal": GOAL, "observation": "s0", "action": "look up the order",
         "reward": 1.0, "done": True, "success": True}]})
    assert written.status_code == 201, written.content
    return Experience.objects.get(pk=written.json()["entries"][0]["id"])


def _retrieved_ids(agent, bank) -> list[int]:
    trace = post(agent, f"{API}/experiences/banks/{bank.slug}/retrieve", {"goal": GOAL, "observation": "s0"})
    return [hit["experience_id"] for hit in trace.json()["trace"]]


def test_a_deleted_experience_is_never_retrieved_audited_and_restorable(agent, reviewer_agent, reviewer_user, bank,
                                                                       experience):
    url = f"{API}/experiences/banks/{bank.slug}/experiences/{experience.pk}"
    assert _retrieved_ids(agent, bank) == [experience.pk]

    first = delete(reviewer_agent, url, {"expected_version": experience.version, "reason": "leaks an address"})
    second = delete(reviewer_agent, url, {"expected_version": experience.version, "reason": "leaks an address"})

    assert first.status_code == second.status_code == 200 and first.json() == second.json()
    assert first.json()["status"] == "deleted"
    assert _retrieved_ids(agent, bank) == []
    assert reviewer_agent.get(f"{API}/experiences/banks/{bank.slug}/experiences").json()["items"] == []
    listed = reviewer_agent.get(f"{API}/experiences/banks/{bank.slug}/experiences?status=deleted").json()["items"]
    assert [e["id"] for e in listed] == [experience.pk]
    event = ExperienceEvent.objects.get(experience=experience)
    assert (event.action, event.actor, event.note) == ("deleted", reviewer_user, "leaks an address")

    restored = post(reviewer_agent, f"{url}/restore", {"expected_version": first.json()["version"]})
    assert restored.status_code == 200 and restored.json()["status"] == "pending"
    assert _retrieved_ids(agent, bank) == [experience.pk]


def test_deleting_an_experience_checks_version_and_existence(reviewer_agent, bank, experience):
    url = f"{API}/experiences/banks/{bank.slug}/experiences"
    stale = delete(reviewer_agent, f"{url}/{experience.pk}", {"expected_version": 7, "reason": "x"})
    assert stale.status_code == 409 and "version 1" in stale.json()["detail"]
    assert delete(reviewer_agent, f"{url}/999999", {"expected_version": 1, "reason": "x"}).status_code == 404
    assert Experience.objects.get(pk=experience.pk).status == Experience.Status.PENDING


# --- banks ------------------------------------------------------------------------------

def test_a_deleted_bank_is_archived_hidden_and_refuses_memories_and_retrievals(agent, operator_user, bank, make_orb):
    orb = make_orb("My order W3 never came.")

    response = delete(agent, f"{API}/banks/{bank.slug}", {"reason": "the pilot ended"})

    assert response.status_code == 200 and response.json()["archived_at"]
    assert delete(agent, f"{API}/banks/{bank.slug}", {}).json() == response.json()  # idempotent
    assert [b["slug"] for b in agent.get(f"{API}/banks").json()] == []
    assert [b["slug"] for b in agent.get(f"{API}/banks?archived=true").json()] == [bank.slug]
    # Its pages and Orbs stay readable: runs that used it keep their links.
    assert agent.get(f"{API}/banks/{bank.slug}").status_code == 200
    assert agent.get(f"{API}/orbs/{orb.pk}").status_code == 200
    refused = post(agent, f"{API}/banks/{bank.slug}/retrieve", {"query": "order never came"})
    assert refused.status_code == 409 and "archived" in refused.json()["detail"]
    assert post(agent, f"{API}/banks/{bank.slug}/remember", {"text": "Check the courier first."}).status_code == 409
    events = agent.get(f"{API}/banks/{bank.slug}/events").json()
    assert [(e["action"], e["actor"], e["note"]) for e in events] == [
        ("archived", operator_user.username, "the pilot ended")]


def test_a_restored_bank_serves_again(agent, bank, make_orb):
    orb = make_orb("My order W3 never came.")
    delete(agent, f"{API}/banks/{bank.slug}")

    restored = post(agent, f"{API}/banks/{bank.slug}/restore", {})

    assert restored.status_code == 200 and restored.json()["archived_at"] is None
    hits = post(agent, f"{API}/banks/{bank.slug}/retrieve", {"query": "order never came"}).json()["hits"]
    assert [h["orb"]["id"] for h in hits] == [orb.pk]
    assert list(BankEvent.objects.filter(bank=bank).values_list("action", flat=True)) == ["restored", "archived"]


def test_deleting_an_unknown_bank_is_a_404_and_reviewers_may_not(reviewer_agent, agent, bank):
    assert delete(agent, f"{API}/banks/no-such-bank", {}).status_code == 404
    assert delete(reviewer_agent, f"{API}/banks/{bank.slug}", {}).status_code == 403


def test_a_reviewer_deletes_and_restores_an_experience_from_the_browser_page(client, reviewer_user, experience):
    client.force_login(reviewer_user)
    url = reverse("orbs:experience_review", args=[experience.pk])

    client.post(url, {"decision": "deleted", "version": experience.version, "note": "quotes a phone number"})

    assert Experience.objects.get(pk=experience.pk).status == Experience.Status.DELETED
    assert client.get(reverse("orbs:experience_list")).context["total"] == 0
    assert client.get(reverse("orbs:experience_list") + "?status=deleted").context["total"] == 1
    client.post(url, {"decision": "restored", "version": experience.version + 1, "note": ""})
    assert Experience.objects.get(pk=experience.pk).status == Experience.Status.PENDING
    assert [e.action for e in ExperienceEvent.objects.filter(experience=experience)] == ["deleted", "restored"]
