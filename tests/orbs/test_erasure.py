"""A customer's erasure leaves nothing they said anywhere in the database: every text, JSON and
bytea column of every table is scanned for a marker only their data carried. Webhook deliveries
that carried it are scrubbed and never sent again."""
import json

import pytest
from django.db import connection

from memweb.jobs import job_execute
from memweb.models import Job, WebhookDelivery
from memweb.webhooks import NOT_SENT_ERASED, delivery_attempt, webhook_create, webhook_event_values
from orbs.dialogues.services import dialogue_from_trajectory
from orbs.models import BankEvent, Orb
from orbs.services import bank_policy_update, bank_resolve
from orbs.services.erasure import customer_key_sha256
from tests.orbs.conftest import post, success_trajectory
from tests.support.jobs import WorkerDied, job_worker_dies_at
from tests.support.webhook_receiver import receiver  # noqa: F401  (a fixture)

API = "/api/orbs"
ALICE, BOB = "alice-7q2x", "bob-3k9w"
MARKS = {ALICE: "zebraquartz4417", BOB: "walrusopal9023"}
TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb", "bytea")


def columns_holding(needle: str) -> list[str]:
    """`schema.table.column` of every text-like column of every table where some value contains `needle`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.table_schema, c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
            "WHERE t.table_type = 'BASE TABLE' AND c.table_schema NOT IN ('pg_catalog', 'information_schema') "
            "AND c.data_type = ANY(%s)", [list(TEXT_TYPES)])
        columns = cursor.fetchall()
        found = []
        for schema, table, column, data_type in columns:
            name = ".".join(connection.ops.quote_name(part) for part in (schema, table, column))
            value = f"encode({name}, 'escape')" if data_type == "bytea" else f"{name}::text"
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(schema)}.{connection.ops.quote_name(table)} "
                           f"WHERE {value} LIKE %s", [f"%{needle}%"])
            if cursor.fetchone()[0]:
                found.append(f"{schema}.{table}.{column}")
        return found


def _customer_data(agent, bank_slug: str, customer: str, n: int) -> None:
    """Everything a customer leaves behind: an episode reflected at once and one queued, a remembered
    lesson, a retrieval of their own, a raw dialogue, DMRM steps and a DMRM retrieval; every Orbs write
    sent with an Idempotency-Key, so the answers are stored for replay."""
    mark = MARKS[customer]
    said = f"My espresso machine {mark} leaks from the steam wand, order W{n}."
    headers = {"HTTP_IDEMPOTENCY_KEY": f"key-{n}-1"}
    reflected = post(agent, f"{API}/banks/{bank_slug}/episodes?sync=true",
                     {"trajectory": success_trajectory(said, customer_key=customer)}, **headers)
    assert reflected.status_code == 201, reflected.content
    queued = post(agent, f"{API}/banks/{bank_slug}/episodes",
                  {"trajectory": success_trajectory(f"Second ticket {mark}: still leaking.", customer_key=customer)},
                  HTTP_IDEMPOTENCY_KEY=f"key-{n}-2")
    assert queued.status_code == 202, queued.content
    remembered = post(agent, f"{API}/banks/{bank_slug}/remember",
                      {"text": f"Call {mark} back in the mornings only.", "customer_key": customer},
                      HTTP_IDEMPOTENCY_KEY=f"key-{n}-3")
    assert remembered.status_code == 201, remembered.content
    retrieved = post(agent, f"{API}/banks/{bank_slug}/retrieve",
                     {"query": f"steam wand {mark} leaking", "customer_key": customer},
                     HTTP_IDEMPOTENCY_KEY=f"key-{n}-4")
    assert retrieved.status_code == 200 and retrieved.json()["hits"], retrieved.content
    dialogue_from_trajectory(bank=bank_resolve(bank_slug), dialogue_ref=f"ticket:{customer}",
                             trajectory=success_trajectory(said, customer_key=customer))
    steps = [{"trajectory_id": f"dmrm-{n}", "step": i, "goal": said, "observation": f"turn {i}",
              "action": f"get_order(W{n})" if i == 0 else f"refund {mark}", "reward": float(i),
              "next_observation": "" if i else "turn 1", "done": i == 1, "success": True if i else None,
              "customer_key": customer} for i in (0, 1)]
    written = post(agent, f"/api/orbs/experiences/banks/{bank_slug}/transitions", {"transitions": steps})
    assert written.status_code == 201, written.content
    asked = post(agent, f"/api/orbs/experiences/banks/{bank_slug}/retrieve",
                 {"goal": f"steam wand {mark}", "observation": "turn 0", "customer_key": customer})
    assert asked.status_code == 200, asked.content


@pytest.fixture
def two_customers(agent, receiver):
    """Two customers' data in a bank, a copy of Alice's in another, and a webhook hearing every event of
    every bank: the first bank's deliveries are sent, the copy's Orb awaiting review is not yet."""
    created = post(agent, f"{API}/banks", {"name": "Coffee shop", "customer_scope": "per_customer"})
    assert created.status_code == 201, created.content
    slug = created.json()["slug"]
    webhook_create(url=receiver.url, events=webhook_event_values(), workspace=bank_resolve(slug).workspace)
    # A reviewer's choice (no key may make it): the customers' lessons are served at once.
    bank_policy_update(bank=bank_resolve(slug), auto_approve="always")
    for n, customer in enumerate((ALICE, BOB)):
        _customer_data(agent, slug, customer, n)
    for delivery in WebhookDelivery.objects.all():
        assert delivery_attempt(delivery_id=delivery.pk).status == WebhookDelivery.Status.DELIVERED
    # A copy elsewhere (another team's bank) of something Alice said.
    other = post(agent, f"{API}/banks", {"name": "Coffee shop copy"}).json()["slug"]
    post(agent, f"{API}/banks/{other}/remember", {"text": f"Alice {MARKS[ALICE]} is allergic to oat milk.",
                                                   "customer_key": ALICE})
    return slug


@pytest.fixture
def erase(agent, django_capture_on_commit_callbacks):
    """POST an erasure: 202 with the job, which runs when the request commits; answers the job as its
    status URL shows it once finished."""
    def erase(slug: str, body: dict, **headers) -> dict:
        with django_capture_on_commit_callbacks(execute=True):
            accepted = post(agent, f"{API}/banks/{slug}/erasures", body, **headers)
        assert accepted.status_code == 202, accepted.content
        assert accepted["Location"] == accepted.json()["status_url"]
        return agent.get(accepted["Location"]).json()
    return erase


def _export(agent, slug: str) -> str:
    response = agent.get(f"{API}/banks/{slug}/export")
    return b"".join(response.streaming_content).decode()


def test_erasure_leaves_no_trace_of_the_customer_anywhere(agent, operator_user, two_customers, erase):
    slug = two_customers
    assert MARKS[ALICE] in _export(agent, slug)
    before = columns_holding(MARKS[ALICE])
    # The scan sees the places an erasure has to reach.
    assert {"public.orbs_orb.obs", "public.orbs_episoderecord.trajectory", "public.orbs_retrievallog.query",
            "public.orbs_dialogue.text", "public.memweb_idempotentrequest.body",
            "public.memweb_webhookdelivery.payload", "public.orbs_experience.goal",
            "public.orbs_dmrmretrievallog.goal"} <= set(before)

    job = erase(slug, {"customer_key": ALICE, "reason": "request #41", "every_bank": True},
                HTTP_IDEMPOTENCY_KEY="erase-1")

    assert job["status"] == "succeeded", job
    assert columns_holding(MARKS[ALICE]) == []
    assert columns_holding(ALICE) == []  # the key itself is kept only as a hash
    assert MARKS[ALICE] not in _export(agent, slug)
    assert MARKS[BOB] in _export(agent, slug)
    assert {"public.orbs_orb.obs", "public.orbs_episoderecord.trajectory", "public.orbs_retrievallog.query",
            "public.orbs_dialogue.text", "public.memweb_idempotentrequest.body", "public.orbs_experience.goal",
            "public.orbs_dmrmretrievallog.goal"} <= set(columns_holding(MARKS[BOB]))
    body = job["result"]
    assert body["customer_key_sha256"] == customer_key_sha256(ALICE)
    assert body["counts"] | {"idempotent_answers": 0} == {"orbs": 3, "episodes": 2, "retrievals": 1,
                                                          "dialogues": 1, "idempotent_answers": 0,
                                                          "evaluation_episodes": 0, "webhook_deliveries": 2,
                                                          "experiences": 2, "experience_trajectories": 1,
                                                          "dmrm_retrievals": 1}
    assert body["counts"]["idempotent_answers"] >= 3
    records = BankEvent.objects.filter(action=BankEvent.Action.CUSTOMER_ERASED).order_by("id")
    assert [(r.bank_name, r.actor, r.note) for r in records] == [
        ("Coffee shop", operator_user, "request #41"), ("Coffee shop copy", operator_user, "request #41")]
    assert records[1].counts["orbs"] == 1
    assert Orb.objects.filter(customer_key=BOB).count() == 2


def test_erasure_scrubs_webhook_deliveries_and_refuses_to_send_them_again(agent, two_customers, erase, receiver):
    alices_orbs = set(Orb.objects.filter(customer_key=ALICE).values_list("pk", flat=True))
    about_alice = {d.pk for d in WebhookDelivery.objects.all()
                   if d.payload["data"].get("orb_id") in alices_orbs or MARKS[ALICE] in json.dumps(d.payload)}
    assert len(about_alice) == 2  # her reflected episode's `episode.ingested`, the copy's `orb.pending_review`
    sent = len(receiver.received)

    erase(two_customers, {"customer_key": ALICE, "every_bank": True})

    erased = WebhookDelivery.objects.filter(erased_at__isnull=False)
    assert set(erased.values_list("pk", flat=True)) == about_alice
    for delivery in erased:
        assert set(delivery.payload["data"]) == {"erased"}
        refused = post(agent, f"/api/webhooks/deliveries/{delivery.pk}/redeliver", {})
        assert refused.status_code == 409 and "erased customer" in refused.json()["detail"]
    waiting = erased.get(event="orb.pending_review")  # the copy's Orb: never sent, now never will be
    assert (waiting.status, waiting.last_error) == (WebhookDelivery.Status.FAILED, NOT_SENT_ERASED)
    assert delivery_attempt(delivery_id=waiting.pk) is None and len(receiver.received) == sent
    bobs = WebhookDelivery.objects.filter(erased_at__isnull=True)
    assert bobs.count() == 1 and all(d.status == WebhookDelivery.Status.DELIVERED for d in bobs)
    assert post(agent, f"/api/webhooks/deliveries/{bobs[0].pk}/redeliver", {}).status_code == 202


def test_erasure_is_scoped_to_the_bank_unless_every_bank_is_asked(two_customers, erase):
    job = erase(two_customers, {"customer_key": ALICE})

    assert job["result"]["banks"] == ["Coffee shop"]
    assert Orb.objects.filter(customer_key=ALICE).count() == 1  # the copy in the other bank


def test_erasing_again_finds_nothing_and_is_recorded(agent, two_customers, erase):
    erase(two_customers, {"customer_key": ALICE})

    again = erase(two_customers, {"customer_key": ALICE})

    assert set(again["result"]["counts"].values()) == {0}
    events = agent.get(f"{API}/banks/{two_customers}/events").json()
    assert [e["action"] for e in events] == ["customer_erased", "customer_erased"]
    assert json.dumps(events).find(ALICE) == -1


def test_erasure_needs_a_customer_an_operator_and_a_known_bank(agent, reviewer_user, client, two_customers):
    blank = post(agent, f"{API}/banks/{two_customers}/erasures", {"customer_key": "  "})
    assert blank.status_code == 422 and "name the customer whose data is to be erased" in blank.json()["detail"][0]["msg"]
    assert not Job.objects.exists()  # refused before any job
    assert post(agent, f"{API}/banks/no-such-bank/erasures", {"customer_key": ALICE}).status_code == 404
    client.force_login(reviewer_user)
    client.defaults.pop("HTTP_AUTHORIZATION", None)
    assert post(client, f"{API}/banks/{two_customers}/erasures", {"customer_key": ALICE}).status_code == 403


def test_it_reports_the_erasure_bank_by_bank_and_keeps_the_key_out_of_the_job(agent, two_customers, erase):
    job = erase(two_customers, {"customer_key": ALICE, "every_bank": True})

    assert (job["kind"], job["done"], job["total"]) == ("orbs.customer_erasure", 2, 2)
    assert job["result"]["banks"] == ["Coffee shop", "Coffee shop copy"]
    stored = Job.objects.get(pk=job["id"])
    assert ALICE not in json.dumps([stored.title, stored.payload, stored.result, stored.message]) and stored.upload == ""


def test_it_erases_the_rest_when_the_job_is_redelivered_and_records_no_bank_twice(
        agent, two_customers, monkeypatch, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():  # queued; the worker below runs it
        accepted = post(agent, f"{API}/banks/{two_customers}/erasures", {"customer_key": ALICE, "every_bank": True})
    job_id = accepted.json()["id"]
    job_worker_dies_at(monkeypatch, done=1)  # after the first bank
    with pytest.raises(WorkerDied):
        job_execute(job_id=job_id)
    assert BankEvent.objects.filter(job_id=job_id).count() == 1
    assert Orb.objects.filter(customer_key=ALICE).count() == 1  # the copy's, not yet erased
    monkeypatch.undo()

    job_execute(job_id=job_id)  # the message re-delivered to another worker

    job = agent.get(accepted["Location"]).json()
    assert job["status"] == "succeeded" and job["result"]["banks"] == ["Coffee shop", "Coffee shop copy"]
    assert job["result"]["counts"]["orbs"] == 3
    assert BankEvent.objects.filter(customer_key_sha256=customer_key_sha256(ALICE)).count() == 2
    assert not Orb.objects.filter(customer_key=ALICE).exists()
