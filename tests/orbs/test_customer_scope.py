"""A bank's customer scope: per-customer banks keep each customer's Orbs to that customer
(identity, duplicates, retrieval); shared banks keep the paper's behaviour."""
import hashlib
import json

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from orbs.errors import FieldRequired
from orbs.models import EpisodeRecord, Orb, RetrievalLog
from orbs.services import bank_get_or_create, bank_policy_update, orb_edit, orb_from_episode, orbs_retrieve
from orbs.services.ingest import recent_reflections
from tests.orbs.conftest import post, success_trajectory

API = "/api/orbs"
LATE_TOWELS = "My order of bath towels is two weeks late, where is it?"


@pytest.fixture
def per_customer(db):
    return bank_get_or_create(name="Per customer", customer_scope="per_customer", auto_approve="always")


def write_episode(agent, bank, customer_key: str, text: str = LATE_TOWELS):
    trajectory = success_trajectory(text, customer_key=customer_key, task_id="same-task")
    return post(agent, f"{API}/banks/{bank.slug}/episodes?sync=true", {"trajectory": trajectory})


def test_it_keeps_identical_episodes_of_two_customers_as_two_orbs(agent, per_customer):
    alice = write_episode(agent, per_customer, "alice")
    bob = write_episode(agent, per_customer, "bob")
    assert alice.status_code == 201 and bob.status_code == 201
    assert bob.json()["created"] is True
    alice_orb, bob_orb = alice.json()["orb"], bob.json()["orb"]
    assert alice_orb["id"] != bob_orb["id"] and alice_orb["content_hash"] != bob_orb["content_hash"]
    assert bob_orb["customer_key"] == "bob"
    # Alice's identical Orb is not Bob's near-duplicate: duplicates are looked for within a customer.
    assert bob_orb["near_duplicate_of_id"] is None and bob_orb["status"] == "approved"
    assert write_episode(agent, per_customer, "bob").status_code == 200


def test_it_serves_a_customer_only_their_own_orbs(agent, per_customer):
    write_episode(agent, per_customer, "alice")
    bob_orb = write_episode(agent, per_customer, "bob").json()["orb"]
    response = post(agent, f"{API}/banks/{per_customer.slug}/retrieve",
                    {"query": "late towels", "customer_key": "bob"})
    assert response.status_code == 200
    assert [hit["orb"]["id"] for hit in response.json()["hits"]] == [bob_orb["id"]]


def test_it_refuses_a_retrieval_without_a_customer_from_a_per_customer_bank(agent, per_customer):
    write_episode(agent, per_customer, "alice")
    response = post(agent, f"{API}/banks/{per_customer.slug}/retrieve", {"query": "late towels"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["msg"].startswith("customer_key:")
    assert not RetrievalLog.objects.exists()


def test_it_reads_across_customers_when_the_bank_allows_it_and_logs_it(agent, per_customer):
    bank_policy_update(bank=per_customer, cross_customer_retrieval=True)
    write_episode(agent, per_customer, "alice")
    write_episode(agent, per_customer, "bob")
    response = post(agent, f"{API}/banks/{per_customer.slug}/retrieve", {"query": "late towels"})
    assert response.status_code == 200
    assert {hit["orb"]["customer_key"] for hit in response.json()["hits"]} == {"alice", "bob"}
    assert RetrievalLog.objects.get().filters["cross_customer"] is True


def test_it_keeps_a_shared_bank_as_it_was(agent, bank):
    alice = write_episode(agent, bank, "alice").json()
    bob = write_episode(agent, bank, "bob")
    assert bob.status_code == 200 and bob.json()["created"] is False
    assert bob.json()["orb"]["id"] == alice["orb"]["id"]
    orb = Orb.objects.get()
    paper_id = hashlib.sha256(f"{orb.obs}{orb.emotion}{orb.outcome}".encode()).hexdigest()
    assert orb.content_hash == paper_id
    assert post(agent, f"{API}/banks/{bank.slug}/retrieve", {"query": "late towels"}).status_code == 200


def test_it_refuses_an_episode_without_a_customer_for_a_per_customer_bank(agent, per_customer):
    response = write_episode(agent, per_customer, "")
    assert response.status_code == 422
    assert response.json()["detail"][0]["msg"].startswith("trajectory.customer_key:")
    assert not EpisodeRecord.objects.exists() and not Orb.objects.exists()
    with pytest.raises(FieldRequired, match="trajectory.customer_key"):
        orb_from_episode(bank=per_customer, trajectory=success_trajectory(LATE_TOWELS, customer_key=""))


def test_it_shows_the_reflector_only_the_customers_own_recent_lessons(per_customer, bank):
    alice = orb_from_episode(bank=per_customer, trajectory=success_trajectory(LATE_TOWELS, customer_key="alice")).orb
    assert recent_reflections(per_customer, "alice") == [alice.outcome]
    assert recent_reflections(per_customer, "bob") == []
    shared = orb_from_episode(bank=bank, trajectory=success_trajectory(LATE_TOWELS, customer_key="alice")).orb
    assert recent_reflections(bank, "bob") == [shared.outcome]


def test_it_creates_a_per_customer_bank_through_the_api(agent, db):
    response = post(agent, f"{API}/banks", {"name": "Scoped", "customer_scope": "per_customer",
                                            "cross_customer_retrieval": True})
    assert response.status_code == 201
    assert (response.json()["customer_scope"], response.json()["cross_customer_retrieval"]) == ("per_customer", True)
    refused = post(agent, f"{API}/banks", {"name": "Shared", "cross_customer_retrieval": True})
    assert refused.status_code == 422 and "cross_customer_retrieval" in json.dumps(refused.json())


def test_it_fixes_the_scope_once_the_bank_holds_orbs(per_customer):
    with pytest.raises(ValidationError, match="cross_customer_retrieval"):
        bank_policy_update(bank=per_customer, customer_scope="shared", cross_customer_retrieval=True)
    per_customer.refresh_from_db()
    orb_from_episode(bank=per_customer, trajectory=success_trajectory(LATE_TOWELS, customer_key="alice"))
    with pytest.raises(ValidationError, match="customer_scope"):
        bank_policy_update(bank=per_customer, customer_scope="shared")


def test_it_keeps_the_customer_in_an_edited_orbs_id(per_customer):
    orb = orb_from_episode(bank=per_customer, trajectory=success_trajectory(LATE_TOWELS, customer_key="alice")).orb
    edited = orb_edit(orb_id=orb.pk, expected_version=orb.version, actor=None, outcome="Track the parcel first.")
    assert edited.content_hash == per_customer.orb_hash(obs=edited.obs, emotion=edited.emotion,
                                                        outcome="Track the parcel first.", customer_key="alice")
    found = orbs_retrieve(bank=per_customer, query="track parcel", context={}, customer_key="alice")
    assert [hit.orb.pk for hit in found.hits] == [edited.pk]


def test_it_shows_and_saves_the_scope_on_the_bank_page(client, operator_user, reviewer_user, bank):
    client.force_login(operator_user)
    saved = client.post(reverse("orbs:bank_policy", args=[bank.slug]), {
        "retrieval_k": 5, "auto_approve": "never", "min_score": 0, "near_duplicate_threshold": 0.95,
        "auto_approve_min_reward": 1, "prompt_token_budget": 600, "approved_only": "on",
        "customer_scope": "per_customer", "cross_customer_retrieval": "on"})
    assert saved.status_code == 302
    bank.refresh_from_db()
    assert (bank.customer_scope, bank.cross_customer_retrieval) == ("per_customer", True)
    client.force_login(reviewer_user)
    page = client.get(reverse("orbs:bank_detail", args=[bank.slug])).content.decode()
    assert "per customer: an Orb belongs to its customer" in page and "reads across customers" in page
