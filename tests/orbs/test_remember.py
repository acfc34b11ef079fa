"""Remembering a lesson given as text: an Orb without a trajectory, through the same review gate."""

from django.test import Client
from django.urls import reverse

from orbs.models import Orb, ReviewEvent
from orbs.schemas import REMEMBERED_MAX_CHARS
from orbs.services import bank_get_or_create, orb_remember
from tests.orbs.conftest import post

API = "/api/orbs"
LESSON = "Delivered orders cannot be cancelled: open a return with return_order instead."


def remember(agent, bank, **payload):
    return post(agent, f"{API}/banks/{bank.slug}/remember", {"text": LESSON} | payload)


def retrieved_ids(agent, bank, query: str) -> list[int]:
    response = post(agent, f"{API}/banks/{bank.slug}/retrieve", {"query": query})
    return [hit["orb"]["id"] for hit in response.json()["hits"]]


def test_it_waits_for_review_before_agents_retrieve_it(agent, bank, reviewer_user, operator_user):
    response = remember(agent, bank, context={"sku": "DW-450"}, domain="appliances", source_label="ticket-7")
    assert response.status_code == 201
    orb = response.json()
    assert (orb["status"], orb["source"], orb["outcome"]) == ("pending", "remembered", LESSON)
    assert (orb["emotion"], orb["context"], orb["source_label"]) == ("neutral", {"sku": "DW-450"}, "ticket-7")
    queue = agent.get(f"{API}/orbs", {"bank": bank.slug, "status": "pending", "source": "remembered"}).json()
    assert [item["id"] for item in queue["items"]] == [orb["id"]]
    assert ReviewEvent.objects.get(orb_id=orb["id"]).actor == operator_user
    question = "the customer wants to cancel an order that was already delivered"
    assert retrieved_ids(agent, bank, question) == []
    reviewer = Client()
    reviewer.force_login(reviewer_user)
    approved = post(reviewer, f"{API}/orbs/{orb['id']}/approve", {"expected_version": orb["version"]})
    assert approved.status_code == 200
    assert retrieved_ids(agent, bank, question) == [orb["id"]]


def test_it_keeps_one_orb_for_the_same_lesson(agent, bank):
    first = remember(agent, bank)
    again = remember(agent, bank, text=f"  {LESSON}\n")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"] and Orb.objects.count() == 1


def test_it_names_a_blank_or_overlong_text(agent, bank):
    for text in ("   ", "x" * (REMEMBERED_MAX_CHARS + 1)):
        response = remember(agent, bank, text=text)
        assert response.status_code == 422
        assert [error["loc"][-1] for error in response.json()["detail"]] == ["text"]
    assert not Orb.objects.exists()


def test_it_needs_the_customer_in_a_per_customer_bank(agent, db):
    scoped = bank_get_or_create(name="Per customer", customer_scope="per_customer")
    refused = remember(agent, scoped)
    assert refused.status_code == 422 and refused.json()["detail"][0]["msg"].startswith("customer_key:")
    assert not Orb.objects.exists()
    alice, bob = remember(agent, scoped, customer_key="alice"), remember(agent, scoped, customer_key="bob")
    assert (alice.status_code, bob.status_code) == (201, 201) and alice.json()["id"] != bob.json()["id"]


def test_it_follows_the_banks_auto_approval(db):
    always = bank_get_or_create(name="Always", auto_approve="always")
    by_rule = bank_get_or_create(name="By rule", auto_approve="by_rule", auto_approve_min_reward=0.0)
    assert orb_remember(bank=always, text=LESSON).orb.status == Orb.Status.APPROVED
    # The rule judges an episode's reward; a remembered lesson has none, so a reviewer decides.
    assert orb_remember(bank=by_rule, text=LESSON).orb.status == Orb.Status.PENDING


def test_it_flags_a_lesson_close_to_one_the_bank_holds(db):
    bank = bank_get_or_create(name="Strict", auto_approve="always", near_duplicate_threshold=0.9)
    kept = orb_remember(bank=bank, text=LESSON).orb
    close = orb_remember(bank=bank, text=LESSON.replace("Delivered orders", "Orders already delivered"))
    assert close.near_duplicate_of == kept and close.orb.status == Orb.Status.PENDING


def test_it_is_written_by_agents_not_reviewers(client, reviewer_user, bank):
    client.force_login(reviewer_user)
    assert remember(client, bank).status_code == 403
    assert not Orb.objects.exists()


def test_it_shows_a_reviewer_the_lesson_and_where_it_came_from(client, reviewer_user, bank):
    orb = orb_remember(bank=bank, text=LESSON, source_label="ticket-7").orb
    client.force_login(reviewer_user)
    for page in ("orbs:detail", "orbs:provenance", "orbs:edit"):
        response = client.get(reverse(page, args=[orb.pk]))
        assert response.status_code == 200, page
    queue = client.get(reverse("orbs:queue"), {"source": "remembered"}).content.decode()
    assert LESSON[:40] in queue
