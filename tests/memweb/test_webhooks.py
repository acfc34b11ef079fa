"""Webhooks: signed requests a receiver can verify, retries with backoff, announcements sent only after
a commit, URL checks, and the operators' API. Deliveries are driven by calling delivery_attempt with
the time it should believe, so no test waits for a backoff to pass."""
import json
import re
import socket
import threading
from datetime import timedelta
from http.server import HTTPServer

import pytest
from django.db import transaction
from django.utils import timezone

from evaluation.vocabulary import EvaluationEvent
from memweb.models import ApiKey, Webhook, WebhookDelivery, Workspace
from memweb.webhook_targets import NO_ANSWER
from memweb.webhooks import (
    BACKOFF,
    DELIVERIES_KEPT,
    MAX_ATTEMPTS,
    NOT_SENT_PAUSED,
    STALE_CLAIM,
    WebhookInvalid,
    deliveries_resend_overdue,
    delivery_attempt,
    delivery_redeliver,
    webhook_create,
    webhook_event_values,
    webhook_switch,
    webhook_test_send,
    webhooks_emit,
)
from orbs.services import bank_get_or_create
from orbs.vocabulary import OrbsEvent
from tests.support.processes import ROOT
from tests.support.webhook_receiver import receiver, verified  # noqa: F401  (receiver is a fixture)

Status = WebhookDelivery.Status


@pytest.fixture
def hook(db, receiver):
    """A webhook to the receiver for every event, and its secret."""
    return webhook_create(url=receiver.url, events=webhook_event_values())


def _test_delivery(webhook) -> WebhookDelivery:
    return webhook_test_send(webhook)  # queued on commit, which a `db` test never reaches: tests drive it


# --- what a receiver gets ------------------------------------------------------------------------------

def test_a_receiver_verifies_each_request_with_the_secret(hook, receiver):
    webhook, secret = hook
    delivery = _test_delivery(webhook)
    sent = delivery_attempt(delivery_id=delivery.pk)
    assert sent.status == Status.DELIVERED and sent.last_status_code == 200 and sent.delivered_at is not None
    [request] = receiver.received
    assert request.path == "/hooks/memweb" and request.headers["Content-Type"] == "application/json"
    assert verified(request, secret)
    assert not verified(request, secret + "x")
    tampered = type(request)(request.path, request.headers, request.body.replace(b"test", b"tost"))
    assert not verified(tampered, secret)
    assert request.headers["X-Memweb-Event"] == "webhook.test"
    assert request.headers["X-Memweb-Delivery"] == str(delivery.uuid) == request.json["id"]
    assert request.json["event"] == "webhook.test" and request.json["data"] == {"message": "a test event from memweb"}


README_RECEIVER = re.compile(r"```python\n(# memweb-webhook-receiver.*?)```", re.DOTALL)


@pytest.fixture
def readme_receiver(monkeypatch, settings):
    """The README's receiver, serving on loopback (allowed) with the secret it reads from the environment."""
    settings.MEMWEB_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    monkeypatch.setenv("MEMWEB_WEBHOOK_SECRET", "whsec_readme")
    namespace = {"__name__": "readme"}
    exec(README_RECEIVER.search((ROOT / "README.md").read_text()).group(1), namespace)
    server = HTTPServer(("127.0.0.1", 0), namespace["Receiver"])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


@pytest.mark.django_db
def test_the_readme_receiver_accepts_a_signed_request_and_refuses_a_forged_one(readme_receiver, capsys):
    webhook, _ = webhook_create(url=readme_receiver, events=[EvaluationEvent.RUN_FINISHED])
    Webhook.objects.filter(pk=webhook.pk).update(secret="whsec_readme")
    assert delivery_attempt(delivery_id=_test_delivery(webhook).pk).last_status_code == 204
    assert "webhook.test {'message': 'a test event from memweb'}" in capsys.readouterr().out
    Webhook.objects.filter(pk=webhook.pk).update(secret="whsec_someone_else")
    forged = delivery_attempt(delivery_id=_test_delivery(webhook).pk)
    assert (forged.status, forged.last_status_code) == (Status.PENDING, 401)
    Webhook.objects.filter(pk=webhook.pk).update(secret="whsec_readme")
    an_hour_ago = timezone.now() - timedelta(hours=1)
    replayed = _test_delivery(webhook)
    WebhookDelivery.objects.filter(pk=replayed.pk).update(next_attempt_at=an_hour_ago)
    # Signed correctly, but an hour ago: what a replayed copy of an old request looks like.
    assert delivery_attempt(delivery_id=replayed.pk, now=an_hour_ago).last_status_code == 401


def test_it_retries_with_growing_waits_until_the_receiver_answers_2xx(hook, receiver):
    webhook, secret = hook
    receiver.answer(500, 503)
    delivery = _test_delivery(webhook)
    start = timezone.now()

    first = delivery_attempt(delivery_id=delivery.pk, now=start)
    assert (first.status, first.attempts, first.last_status_code) == (Status.PENDING, 1, 500)
    assert first.next_attempt_at == start + BACKOFF[0] and "answered 500" in first.last_error
    assert delivery_attempt(delivery_id=delivery.pk, now=start + BACKOFF[0] - timedelta(seconds=1)) is None
    assert len(receiver.received) == 1  # not due yet: nothing sent

    second_at = start + BACKOFF[0]
    second = delivery_attempt(delivery_id=delivery.pk, now=second_at)
    assert (second.status, second.attempts, second.next_attempt_at) == (Status.PENDING, 2, second_at + BACKOFF[1])

    third = delivery_attempt(delivery_id=delivery.pk, now=second.next_attempt_at)
    assert (third.status, third.attempts, third.last_error, third.next_attempt_at) == (Status.DELIVERED, 3, "", None)
    assert [attempt["status_code"] for attempt in third.attempt_log] == [500, 503, 200]
    assert delivery_attempt(delivery_id=delivery.pk, now=third.delivered_at + timedelta(days=1)) is None
    assert len(receiver.received) == 3
    assert {request.headers["X-Memweb-Delivery"] for request in receiver.received} == {str(delivery.uuid)}
    # Each attempt is signed at its own time, and each signature checks out.
    assert len({request.headers["X-Memweb-Timestamp"] for request in receiver.received}) == 3
    assert all(verified(request, secret) for request in receiver.received)


def test_it_gives_up_after_the_last_attempt(hook, receiver):
    webhook, _ = hook
    receiver.answer(*[500] * MAX_ATTEMPTS)
    delivery = _test_delivery(webhook)
    at = timezone.now()
    for _ in range(MAX_ATTEMPTS):
        result = delivery_attempt(delivery_id=delivery.pk, now=at)
        at = result.next_attempt_at
    assert (result.status, result.attempts, result.next_attempt_at) == (Status.FAILED, MAX_ATTEMPTS, None)
    assert delivery_attempt(delivery_id=delivery.pk, now=timezone.now() + timedelta(days=1)) is None
    assert len(receiver.received) == MAX_ATTEMPTS

    again = delivery_redeliver(result)
    assert (again.status, again.attempts, again.uuid) == (Status.PENDING, 0, delivery.uuid)
    assert delivery_attempt(delivery_id=delivery.pk).status == Status.DELIVERED
    assert len(WebhookDelivery.objects.get(pk=delivery.pk).attempt_log) == MAX_ATTEMPTS + 1


def test_it_follows_no_redirect(hook, receiver):
    webhook, _ = hook
    receiver.answer(302, headers={"Location": receiver.url + "/elsewhere"})
    result = delivery_attempt(delivery_id=_test_delivery(webhook).pk)
    assert result.status == Status.PENDING and result.last_status_code == 302
    assert result.last_error == f"redirected to {receiver.url}/elsewhere (not followed)"
    assert [request.path for request in receiver.received] == ["/hooks/memweb"]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # free again once closed: nothing listens there


@pytest.fixture
def banner_port():
    """A loopback port that speaks first and not HTTP (as an SSH or database server would), then hangs up."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


def test_a_closed_port_and_a_non_http_answer_read_the_same(db, settings, banner_port):
    settings.MEMWEB_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    errors = []
    for port in (_closed_port(), banner_port):
        webhook, _ = webhook_create(url=f"http://127.0.0.1:{port}/hook", events=[EvaluationEvent.RUN_FINISHED])
        result = delivery_attempt(delivery_id=_test_delivery(webhook).pk)
        assert result.status == Status.PENDING and result.last_status_code is None
        errors.append(result.last_error)
    # Telling them apart would make the delivery log a port scanner.
    assert errors == [NO_ANSWER, NO_ANSWER]


def test_it_keeps_only_a_short_escaped_excerpt_of_a_refusal(hook, receiver, client, operator_user):
    webhook, _ = hook
    receiver.answer(401, body=b'<script>alert(1)</script>\r\nSet-Cookie: x\r\n' + b"secret internal page " * 50)
    result = delivery_attempt(delivery_id=_test_delivery(webhook).pk)
    assert result.last_status_code == 401
    assert result.last_error == ("answered 401: <script>alert(1)</script>\\r\\nSet-Cookie: x\\r\\n"
                                 "secret internal page secret internal p")
    client.force_login(operator_user)
    page = client.get("/webhooks/").content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page


def test_it_sends_nothing_to_a_webhook_switched_off(hook, receiver):
    webhook, _ = hook
    delivery = _test_delivery(webhook)
    Webhook.objects.filter(pk=webhook.pk).update(active=False)
    assert delivery_attempt(delivery_id=delivery.pk) is None and receiver.received == []


def test_the_worker_beat_resends_lost_messages_and_forgets_old_deliveries(hook, receiver,
                                                                        django_capture_on_commit_callbacks):
    webhook, _ = hook
    now = timezone.now()
    made = {name: _test_delivery(webhook) for name in ("lost", "waiting", "orphaned", "sending", "old", "recent")}
    for name, fields in {
        "lost": {"next_attempt_at": now - timedelta(minutes=5)},
        "waiting": {"next_attempt_at": now + timedelta(minutes=5)},
        "orphaned": {"status": Status.SENDING, "claimed_at": now - STALE_CLAIM - timedelta(seconds=1)},
        "sending": {"status": Status.SENDING, "claimed_at": now},
        "old": {"status": Status.DELIVERED, "created_at": now - DELIVERIES_KEPT - timedelta(days=1)},
        "recent": {"status": Status.FAILED, "next_attempt_at": None},
    }.items():
        WebhookDelivery.objects.filter(pk=made[name].pk).update(**fields)
    with django_capture_on_commit_callbacks(execute=True):
        assert deliveries_resend_overdue() == 2
    after = {name: WebhookDelivery.objects.filter(pk=delivery.pk).first() for name, delivery in made.items()}
    assert after["old"] is None
    assert {name: d.status for name, d in after.items() if d} == {
        "lost": Status.DELIVERED, "waiting": Status.PENDING, "orphaned": Status.DELIVERED, "sending": Status.SENDING,
        "recent": Status.FAILED}
    assert sorted(r.headers["X-Memweb-Delivery"] for r in receiver.received) == sorted(
        str(made[name].uuid) for name in ("lost", "orphaned"))


def test_a_paused_webhook_keeps_the_events_it_misses_and_resumes_with_them(hook, receiver,
                                                                          django_capture_on_commit_callbacks):
    webhook, _ = hook
    waiting = _test_delivery(webhook)
    webhook_switch(webhook, active=False)
    with django_capture_on_commit_callbacks(execute=True):
        [missed] = webhooks_emit(EvaluationEvent.RUN_FINISHED, {"run_id": 1}, workspace_id=webhook.workspace_id)
    assert delivery_attempt(delivery_id=missed.pk) is None and receiver.received == []  # nothing sent while paused
    WebhookDelivery.objects.filter(pk=waiting.pk).update(next_attempt_at=timezone.now() - timedelta(minutes=5))
    with django_capture_on_commit_callbacks(execute=True):
        webhook_switch(webhook, active=True)  # the missed event is queued at once
        deliveries_resend_overdue()  # the waiting one came due meanwhile
    assert WebhookDelivery.objects.get(pk=missed.pk).status == Status.DELIVERED
    assert WebhookDelivery.objects.get(pk=waiting.pk).status == Status.DELIVERED
    assert sorted(r.headers["X-Memweb-Event"] for r in receiver.received) == ["run.finished", "webhook.test"]


def test_a_webhook_resumed_without_replay_gives_up_what_it_missed(hook, receiver, django_capture_on_commit_callbacks):
    webhook, _ = hook
    webhook_switch(webhook, active=False)
    [missed] = webhooks_emit(EvaluationEvent.RUN_FINISHED, {"run_id": 1}, workspace_id=webhook.workspace_id)
    with django_capture_on_commit_callbacks(execute=True):
        resumed = webhook_switch(webhook, active=True, replay_missed=False)
    assert resumed.active and resumed.paused_at is None
    given_up = WebhookDelivery.objects.get(pk=missed.pk)
    assert (given_up.status, given_up.last_error) == (Status.FAILED, NOT_SENT_PAUSED) and receiver.received == []
    [after] = webhooks_emit(EvaluationEvent.RUN_FINISHED, {"run_id": 2}, workspace_id=webhook.workspace_id)
    assert delivery_attempt(delivery_id=after.pk).status == Status.DELIVERED  # what comes after the resume is sent


# --- who gets an event, and only after a commit --------------------------------------------------------

@pytest.fixture
def banks(db):
    return [bank_get_or_create(name=name) for name in ("shop", "other")]


def test_an_event_reaches_its_subscribers_when_the_write_commits(receiver, banks, django_capture_on_commit_callbacks):
    everything, secret = webhook_create(url=receiver.url, events=[EvaluationEvent.RUN_FINISHED])
    shop_only, _ = webhook_create(url=receiver.url + "?shop", events=[EvaluationEvent.RUN_FINISHED], bank="shop")
    webhook_create(url=receiver.url + "?other", events=[EvaluationEvent.RUN_FINISHED], bank="other")
    webhook_create(url=receiver.url + "?orbs", events=[OrbsEvent.ORB_PENDING_REVIEW])
    with django_capture_on_commit_callbacks(execute=True):
        webhooks_emit(EvaluationEvent.RUN_FINISHED, {"run_id": 7}, bank="shop", workspace_id=everything.workspace_id)
        assert receiver.received == []  # nothing sent before the commit
    assert set(WebhookDelivery.objects.values_list("webhook_id", flat=True)) == {everything.pk, shop_only.pk}
    assert sorted(request.path for request in receiver.received) == ["/hooks/memweb", "/hooks/memweb?shop"]
    body = receiver.received[0].json
    assert (body["event"], body["bank"], body["data"]) == ("run.finished", "shop", {"run_id": 7})
    assert verified(next(r for r in receiver.received if r.path == "/hooks/memweb"), secret)


def test_an_event_of_no_bank_reaches_only_webhooks_of_every_bank(receiver, banks, django_capture_on_commit_callbacks):
    everything, _ = webhook_create(url=receiver.url, events=[EvaluationEvent.RUN_FINISHED])
    webhook_create(url=receiver.url, events=[EvaluationEvent.RUN_FINISHED], bank="shop")
    with django_capture_on_commit_callbacks(execute=True):
        webhooks_emit(EvaluationEvent.RUN_FINISHED, {"run_id": 8}, workspace_id=everything.workspace_id)
    assert list(WebhookDelivery.objects.values_list("webhook_id", flat=True)) == [everything.pk]


@pytest.mark.django_db
def test_a_rolled_back_write_announces_nothing(receiver, django_capture_on_commit_callbacks):
    webhook, _ = webhook_create(url=receiver.url, events=[EvaluationEvent.RUN_FINISHED])
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            webhooks_emit(EvaluationEvent.RUN_FINISHED, {"run_id": 9}, workspace_id=webhook.workspace_id)
            raise RuntimeError("the write failed")
    assert callbacks == [] and not WebhookDelivery.objects.exists() and receiver.received == []


# --- registering ---------------------------------------------------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize(("url", "says"), [
    ("ftp://example.com/hook", "must start with http:// or https://"),
    ("file:///etc/passwd", "must start with http:// or https://"),
    ("example.com/hook", "must start with http:// or https://"),
    ("http:///hook", "names no host"),
    ("https://user:pw@example.com/hook", "no credentials"),
])
def test_it_refuses_a_url_it_must_not_post_to(url, says):
    with pytest.raises(WebhookInvalid, match=says) as refused:
        webhook_create(url=url, events=[EvaluationEvent.RUN_FINISHED])
    assert refused.value.field == "url" and not Webhook.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "kind"), [
    ("http://127.0.0.1:8000/api/", "loopback"),
    ("http://localhost:5432/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://2130706433/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::ffff:7f00:1]/", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://10.0.0.5/", "private"),
    ("http://0xc0a80001/", "private"),
    ("https://172.16.3.4/", "private"),
    ("http://[fd00::1]/", "private"),
    ("http://0.0.0.0:8000/", "unspecified"),
    ("http://0/", "unspecified"),
    ("http://224.0.0.1/", "multicast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://100.64.0.1/", "non-public"),
])
def test_it_refuses_an_internal_address_in_any_spelling(url, kind):
    with pytest.raises(WebhookInvalid, match=f"is a {kind} address .*MEMWEB_WEBHOOK_ALLOW_HOSTS") as refused:
        webhook_create(url=url, events=[EvaluationEvent.RUN_FINISHED])
    assert refused.value.field == "url" and not Webhook.objects.exists()


@pytest.mark.django_db
def test_the_allow_setting_admits_the_receivers_it_names(settings):
    settings.MEMWEB_WEBHOOK_ALLOW_HOSTS = ["localhost", "10.1.0.0/16"]
    assert webhook_create(url="http://localhost:9000/hook", events=[EvaluationEvent.RUN_FINISHED])[0].pk
    assert webhook_create(url="http://10.1.2.3/hook", events=[EvaluationEvent.RUN_FINISHED])[0].pk
    with pytest.raises(WebhookInvalid, match="is a private address"):
        webhook_create(url="http://10.2.0.1/hook", events=[EvaluationEvent.RUN_FINISHED])
    with pytest.raises(WebhookInvalid, match="is a loopback address"):  # the name is allowed, not its address
        webhook_create(url="http://127.0.0.1:9000/hook", events=[EvaluationEvent.RUN_FINISHED])


def test_it_checks_the_address_again_at_each_delivery(hook, receiver, settings):
    """A webhook registered while its receiver was allowed (or a name that resolved elsewhere then) is
    refused at delivery, without connecting, once the address is not allowed."""
    webhook, _ = hook
    spelled = Webhook.objects.create(url=receiver.url.replace("127.0.0.1", "0x7f000001"), events=webhook_event_values(),
                                     secret="whsec_x", workspace_id=webhook.workspace_id)
    settings.MEMWEB_WEBHOOK_ALLOW_HOSTS = []
    for target in (webhook, spelled):
        result = delivery_attempt(delivery_id=_test_delivery(target).pk)
        assert result.status == Status.PENDING and result.last_status_code is None
        assert result.last_error.startswith("not sent: the host") and "is a loopback address" in result.last_error
    assert receiver.received == []


def test_a_delivery_connects_to_the_address_it_checked(hook, receiver, settings, monkeypatch):
    """A resolver that answers an allowed address, then another (DNS rebinding), cannot move the request:
    it goes to the address that was checked, with the URL's host name in its Host header."""
    settings.MEMWEB_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    real_getaddrinfo = socket.getaddrinfo
    answers = iter(["127.0.0.1"])

    def rebinding(host, port, *args, **kwargs):  # stands in for a DNS server that rebinds the name
        if host != "rebind.test":
            return real_getaddrinfo(host, port, *args, **kwargs)
        return real_getaddrinfo(next(answers, "127.0.0.2"), port, *args, **kwargs)

    port = int(receiver.url.split(":")[2].split("/")[0])
    webhook = Webhook.objects.create(url=f"http://rebind.test:{port}/hooks/memweb", events=webhook_event_values(),
                                     secret="whsec_x", workspace_id=hook[0].workspace_id)
    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    result = delivery_attempt(delivery_id=_test_delivery(webhook).pk)
    assert result.status == Status.DELIVERED, result.last_error
    [request] = receiver.received
    assert request.headers["Host"] == f"rebind.test:{port}"
    again = delivery_attempt(delivery_id=_test_delivery(webhook).pk)  # now the name means 127.0.0.2: refused
    assert "is a loopback address (127.0.0.2)" in again.last_error and len(receiver.received) == 1


@pytest.mark.django_db
def test_it_refuses_unknown_or_no_events():
    with pytest.raises(WebhookInvalid, match="unknown event 'run.started'"):
        webhook_create(url="https://example.com/hook", events=["run.finished", "run.started"])
    with pytest.raises(WebhookInvalid, match="subscribe to at least one event"):
        webhook_create(url="https://example.com/hook", events=[])


# --- the API -------------------------------------------------------------------------------------------

def _bearer(user) -> dict:
    return {"Authorization": f"Bearer {ApiKey.issue(user=user, name='hooks')[1]}"}


def _post(client, url, payload, headers):
    return client.post(url, json.dumps(payload), content_type="application/json", headers=headers)


def test_operators_register_webhooks_and_see_the_secret_once(client, operator_user, receiver, banks):
    headers = _bearer(operator_user)
    created = _post(client, "/api/webhooks/", {"url": receiver.url, "events": ["run.finished", "orb.pending_review"],
                                               "bank": "shop", "description": "ops channel"}, headers)
    assert created.status_code == 201, created.content
    answer = created.json()
    assert answer["secret"] == Webhook.objects.get().secret and answer["secret"].startswith("whsec_")
    assert (answer["events"], answer["bank"], answer["created_by"]) == (
        ["orb.pending_review", "run.finished"], "shop", operator_user.username)
    listed = client.get("/api/webhooks/", headers=headers).json()
    assert [row["id"] for row in listed] == [answer["id"]] and "secret" not in listed[0]

    tested = client.post(f"/api/webhooks/{answer['id']}/test", headers=headers)
    assert tested.status_code == 202 and tested.json()["event"] == "webhook.test"
    delivery_attempt(delivery_id=tested.json()["id"])
    deliveries = client.get("/api/webhooks/deliveries", {"webhook": answer["id"]}, headers=headers).json()["items"]
    assert [(d["status"], d["attempts"], d["attempt_log"][0]["status_code"]) for d in deliveries] == [
        ("delivered", 1, 200)]
    again = client.post(f"/api/webhooks/deliveries/{deliveries[0]['id']}/redeliver", headers=headers)
    assert again.status_code == 202 and (again.json()["status"], again.json()["uuid"]) == ("pending",
                                                                                         deliveries[0]["uuid"])

    paused = client.patch(f"/api/webhooks/{answer['id']}", json.dumps({"active": False}),
                          content_type="application/json", headers=headers)
    assert paused.status_code == 200 and paused.json()["active"] is False and not Webhook.objects.get().active
    assert client.delete(f"/api/webhooks/{answer['id']}", headers=headers).status_code == 204
    assert not Webhook.objects.exists() and not WebhookDelivery.objects.exists()
    assert client.delete(f"/api/webhooks/{answer['id']}", headers=headers).json() == {
        "detail": f"No webhook #{answer['id']}"}


@pytest.mark.django_db
@pytest.mark.parametrize(("payload", "loc", "says"), [
    ({"url": "ftp://example.com/x", "events": ["run.finished"]}, ["body", "payload", "url"], "http:// or https://"),
    ({"url": "https://example.com/x", "events": ["run.started"]}, ["body", "payload", "events"], "unknown event"),
    ({"url": "http://0x7f000001:8000/", "events": ["run.finished"]}, ["body", "payload", "url"],
     "is a loopback address (127.0.0.1)"),
    ({"url": "https://example.com/x", "events": []}, ["body", "payload", "events"], "at least 1 item"),
    ({"url": "https://example.com/x", "events": ["run.finished"], "secret": "mine"}, ["body", "payload", "secret"],
     "Extra inputs are not permitted"),
])
def test_the_api_names_the_field_it_refuses(client, operator_user, payload, loc, says):
    refused = _post(client, "/api/webhooks/", payload, _bearer(operator_user))
    assert refused.status_code == 422
    [problem] = refused.json()["detail"]
    assert problem["loc"] == loc and says in problem["msg"], problem


def test_a_bank_of_another_workspace_is_refused_as_a_missing_one(client, operator_user, banks):
    elsewhere = Workspace.objects.create(slug="support", name="Support team")
    bank_get_or_create(name="Support memories", workspace=elsewhere)
    answers = [_post(client, "/api/webhooks/", {"url": "https://example.com/x", "events": ["run.finished"], "bank": slug},
                     _bearer(operator_user)) for slug in ("support-memories", "no-such-bank")]
    assert [answer.status_code for answer in answers] == [422, 422] and not Webhook.objects.exists()
    assert [answer.json()["detail"][0]["msg"].replace("no-such-bank", "support-memories") for answer in answers] == [
        "No memory bank “support-memories” in this workspace: give the slug its page shows (Memory banks), "
        "or leave this empty for every bank."] * 2
    assert answers[0].json()["detail"][0]["loc"] == ["body", "payload", "bank"]
    client.force_login(operator_user)
    page = client.post("/webhooks/new/", {"url": "https://example.com/x", "events": ["run.finished"],
                                          "bank": "support-memories"})
    assert page.status_code == 400 and "No memory bank “support-memories” in this workspace" in page.content.decode()


@pytest.mark.django_db
def test_only_operators_and_admins_manage_webhooks(client, reviewer_user, annotator_user, role_admin_user):
    for person in (reviewer_user, annotator_user):
        refused = _post(client, "/api/webhooks/", {"url": "https://example.com/x", "events": ["run.finished"]},
                        _bearer(person))
        assert refused.status_code == 403 and refused.json()["detail"] == "needs one of the roles: operator"
        assert client.get("/api/webhooks/deliveries", headers=_bearer(person)).status_code == 403
    assert client.get("/api/webhooks/").status_code == 401
    admitted = _post(client, "/api/webhooks/", {"url": "https://example.com/x", "events": ["run.finished"]},
                     _bearer(role_admin_user))
    assert admitted.status_code == 201


# --- the page -------------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_page_shows_the_secret_once_and_the_deliveries(client, operator_user, receiver):
    client.force_login(operator_user)
    shown = client.post("/webhooks/new/", {"url": receiver.url, "events": ["episode.ingested"], "bank": ""})
    secret = Webhook.objects.get().secret
    assert shown.status_code == 200 and secret in shown.content.decode() and shown["Cache-Control"] == "no-store"
    page = client.get("/webhooks/").content.decode()
    assert receiver.url in page and secret not in page and "every bank" in page
    webhook = Webhook.objects.get()
    client.post(f"/webhooks/{webhook.pk}/switch/", {})
    assert "paused" in client.get("/webhooks/").content.decode() and not Webhook.objects.get().active
    client.post(f"/webhooks/{webhook.pk}/switch/", {"active": "on"})
    assert Webhook.objects.get().active
    refused = client.post("/webhooks/new/", {"url": "gopher://x", "events": ["episode.ingested"]})
    assert refused.status_code == 400 and "must start with http:// or https://" in refused.content.decode()


@pytest.mark.django_db
def test_the_deliveries_list_goes_page_by_page(client, operator_user):
    webhook, _ = webhook_create(url="https://hooks.example.com/memweb", events=webhook_event_values())
    sent = [webhook_test_send(webhook).pk for _ in range(5)]
    headers = {"Authorization": f"Bearer {ApiKey.issue(user=operator_user, name='ops')[1]}"}
    pages = [client.get("/api/webhooks/deliveries", {"page": page, "page_size": 2}, headers=headers).json()
             for page in (1, 2, 3)]
    assert [page["count"] for page in pages] == [5, 5, 5]
    assert [d["id"] for page in pages for d in page["items"]] == sorted(sent, reverse=True)  # newest first
    refused = client.get("/api/webhooks/deliveries", {"page": 0}, headers=headers)
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"][-1] == "page"
