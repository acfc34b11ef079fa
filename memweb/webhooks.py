"""Webhooks: memweb POSTs what happened to the URLs operators register, signed, retried with backoff.

Events: `episode.ingested`, `orb.pending_review`, `run.finished` (each declared by the app that announces it:
memweb.registry.webhook_events), plus `webhook.test`
from the "send test event" button. The apps above memweb announce them with `webhooks_emit(event,
payload, bank=slug)` beside the write that makes them true: the deliveries are rows of that write's
transaction (an outbox), sent when it commits, so nothing is sent for a write rolled back.

Who receives what: a webhook subscribes to event types and may name one memory bank of its
workspace. With a bank it gets only that bank's events (a run counts as the bank's when it uses it);
without one it gets every event of its workspace, runs without a bank included.

Each request is a POST of the JSON envelope {"id", "event", "created_at", "bank", "data"} with
    X-Memweb-Event       the event type
    X-Memweb-Delivery    the delivery's id: the same on every retry and redelivery, for dedup
    X-Memweb-Timestamp   Unix seconds of this attempt
    X-Memweb-Signature   sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" keyed with the secret>
A 2xx answer delivers it; anything else (redirects are not followed, a timeout, a refused
connection, a receiver on an address memweb may not post to) is retried after BACKOFF[i] until
MAX_ATTEMPTS attempts have failed. Where a webhook may post, and what is kept of a receiver's answer,
is memweb.webhook_targets' business.

A customer erasure (orbs.services.erasure) scrubs the deliveries that carried the customer's data
(`webhook_deliveries_erase`): their payload loses its data, and they are never sent again.
"""
import hashlib
import hmac
import json
import secrets
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import F, Q, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from memweb.models import Webhook, WebhookDelivery, default_workspace_id
from memweb.registry import bank_known, webhook_events
from memweb.services import json_needles
from memweb.webhook_targets import TargetRefused, TargetUnresolved, target_address, target_port, target_post

Status = WebhookDelivery.Status

# Waits after the 1st, 2nd, ... failed attempt; after the last wait one more attempt, then it gives up.
BACKOFF = (timedelta(seconds=10), timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=30))
MAX_ATTEMPTS = len(BACKOFF) + 1
# An attempt "sending" for longer than this died with its worker (the timeout is far shorter).
STALE_CLAIM = timedelta(minutes=2)
# A retry message this late was lost (a broker restarted without persistence): the worker beat resends.
OVERDUE_AFTER = timedelta(seconds=30)
SIGNATURE_PREFIX = "sha256="
DELIVERIES_KEPT = timedelta(days=30)
ERASED = "(erased: this event held an erased customer's data)"
NOT_SENT_ERASED = "not sent: it held an erased customer's data"
NOT_SENT_PAUSED = "not sent: it happened while the webhook was paused, which was resumed without replay"
NEEDLES_PER_QUERY = 50


class DeliveryErased(ValueError):
    """A delivery whose payload a customer erasure scrubbed: it is never sent again."""

    def __init__(self, delivery: WebhookDelivery):
        super().__init__(f"webhook delivery #{delivery.pk} held an erased customer's data; it cannot be sent again")


class WebhookInvalid(ValueError):
    """A webhook that cannot be registered; `field` names the input at fault."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


# --- registering -----------------------------------------------------------------------------------

def webhook_url_check(url: str) -> str:
    """The URL stripped, or WebhookInvalid: only absolute http(s) URLs with a host, no credentials, and a
    host that may be posted to (a name that does not resolve yet is checked again at each delivery)."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise WebhookInvalid("url", f"the URL must start with http:// or https://; got {url!r}")
    if not parts.hostname:
        raise WebhookInvalid("url", f"the URL names no host: {url!r}")
    if parts.username or parts.password:
        raise WebhookInvalid("url", "put no credentials in the URL: receivers check the signature instead")
    try:
        target_address(parts.hostname, target_port(url))
    except ValueError:
        raise WebhookInvalid("url", f"the URL's port is not a number from 0 to 65535: {url!r}") from None
    except TargetUnresolved:
        pass
    except TargetRefused as refused:
        raise WebhookInvalid("url", str(refused)) from None
    return url


def webhook_event_values() -> list[str]:
    """The events a webhook can subscribe to: those the apps declare (memweb.registry.webhook_events)."""
    return [event.value for event in webhook_events()]


def webhook_event_choices() -> list[tuple[str, str]]:
    return [(event.value, event.label) for event in webhook_events()]


def webhook_events_check(events: list[str]) -> list[str]:
    known = webhook_event_values()
    if not events:
        raise WebhookInvalid("events", f"subscribe to at least one event: {', '.join(known)}")
    unknown = [event for event in events if event not in known]
    if unknown:
        raise WebhookInvalid("events", f"unknown event {unknown[0]!r}; known: {', '.join(known)}")
    return sorted(set(events), key=known.index)


def webhook_bank_check(bank: str, *, workspace_id: int) -> str:
    """The slug stripped ("" for every bank), or WebhookInvalid when the workspace has no such bank; another
    workspace's bank answers exactly as a missing one."""
    bank = bank.strip()
    if bank and not bank_known(slug=bank, workspace_id=workspace_id):
        raise WebhookInvalid("bank", f"No memory bank “{bank}” in this workspace: give the slug its page shows "
                                     "(Memory banks), or leave this empty for every bank.")
    return bank


def webhook_create(*, url: str, events: list[str], workspace=None, bank: str = "", description: str = "",
                   user=None) -> tuple[Webhook, str]:
    """Register a webhook of `workspace` (None: the default one), which hears that workspace's events
    only; returns it with its signing secret (show it once: it is never listed)."""
    secret = "whsec_" + secrets.token_urlsafe(32)
    workspace_id = workspace.pk if workspace is not None else default_workspace_id()
    webhook = Webhook.objects.create(workspace_id=workspace_id, url=webhook_url_check(url), events=webhook_events_check(events),
                                     bank=webhook_bank_check(bank, workspace_id=workspace_id),
                                     description=description.strip(), secret=secret, created_by=user)
    return webhook, secret


def webhook_switch(webhook: Webhook, *, active: bool, replay_missed: bool = True) -> Webhook:
    """Pause or resume a webhook. Paused, nothing is sent to it: its waiting deliveries wait, and the
    events it misses are recorded as deliveries that wait too. Resumed, the events it missed are sent
    now (`replay_missed`), or given up unsent; the worker beat sends the retries that came due meanwhile."""
    now = timezone.now()
    with transaction.atomic():
        locked = Webhook.objects.select_for_update().get(pk=webhook.pk)
        if not active and locked.active:
            locked.paused_at = now
        if active and not locked.active:
            _missed_settle(locked, replay=replay_missed, now=now)
            locked.paused_at = None
        locked.active = active
        locked.save(update_fields=["active", "paused_at"])
    return locked


def _missed_settle(webhook: Webhook, *, replay: bool, now: datetime) -> int:
    """The events that happened while `webhook` was paused, never attempted: queued now, or given up."""
    missed = WebhookDelivery.objects.filter(webhook=webhook, status=Status.PENDING, attempts=0,
                                            erased_at__isnull=True)
    if webhook.paused_at is not None:
        missed = missed.filter(created_at__gte=webhook.paused_at)
    ids = list(missed.values_list("pk", flat=True))
    if not replay:
        return WebhookDelivery.objects.filter(pk__in=ids).update(
            status=Status.FAILED, next_attempt_at=None, last_error=NOT_SENT_PAUSED)
    WebhookDelivery.objects.filter(pk__in=ids).update(next_attempt_at=now)
    for delivery_id in ids:
        _queue(delivery_id)
    return len(ids)


# --- announcing --------------------------------------------------------------------------------------

def webhooks_emit(event: str, payload: dict, *, workspace_id: int, bank: str | None = None) -> list[WebhookDelivery]:
    """Announce `event` of workspace `workspace_id` to its subscribers there: a delivery each is
    written in the current transaction and sent once it commits. A rolled-back write leaves no
    delivery; a delivery whose message is lost after the commit (a crash, a broker down) is resent
    by the worker beat. An event no app declares is a ValueError: nobody could subscribe to it."""
    if event not in webhook_event_values():
        raise ValueError(f"unknown webhook event {event!r}; the apps declare: {', '.join(webhook_event_values())}")
    subscribers = _subscribers(event, bank or "").filter(workspace_id=workspace_id)
    deliveries = [_delivery_create(webhook, event, payload, bank or "") for webhook in subscribers]
    for delivery in deliveries:
        if delivery.webhook.active:  # a paused webhook's wait for its resume (webhook_switch)
            _queue(delivery.pk)
    return deliveries


def _subscribers(event: str, bank: str):
    return Webhook.objects.filter(events__contains=[event]).filter(Q(bank="") | Q(bank=bank))


def _delivery_create(webhook: Webhook, event: str, data: dict, bank: str) -> WebhookDelivery:
    delivery = WebhookDelivery(webhook=webhook, event=event, next_attempt_at=timezone.now())
    delivery.payload = {"id": str(delivery.uuid), "event": event, "created_at": delivery.created_at.isoformat(),
                        "bank": bank or None, "data": data}
    delivery.save()
    return delivery


def _queue(delivery_id: int, countdown: float | None = None) -> None:
    from memweb.tasks import deliver_webhook

    # robust: a broker that cannot take the message must not fail the write that committed; the worker
    # beat resends the delivery.
    transaction.on_commit(lambda: deliver_webhook.apply_async(args=[delivery_id], countdown=countdown),
                          robust=True)


def webhook_test_send(webhook: Webhook) -> WebhookDelivery:
    """A `webhook.test` delivery to this webhook only, whatever it subscribes to."""
    delivery = _delivery_create(webhook, Webhook.TEST_EVENT, {"message": "a test event from memweb"},
                                webhook.bank)
    _queue(delivery.pk)
    return delivery


def delivery_redeliver(delivery: WebhookDelivery) -> WebhookDelivery:
    """Send a finished delivery again, under the same id, with a fresh round of retries; DeliveryErased
    for one that a customer erasure scrubbed."""
    if delivery.erased_at is not None:
        raise DeliveryErased(delivery)
    WebhookDelivery.objects.filter(pk=delivery.pk, erased_at__isnull=True).exclude(status=Status.SENDING).update(
        status=Status.PENDING, attempts=0, next_attempt_at=timezone.now(), delivered_at=None)
    _queue(delivery.pk)
    delivery.refresh_from_db()
    return delivery


# --- delivering --------------------------------------------------------------------------------------

def webhook_signature(*, secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return SIGNATURE_PREFIX + digest


def _claim(delivery_id: int, now: datetime) -> bool:
    """Take the delivery when it is due: a message delivered twice sends once."""
    return bool(WebhookDelivery.objects.filter(
        pk=delivery_id, status=Status.PENDING, next_attempt_at__lte=now, webhook__active=True, erased_at__isnull=True,
    ).update(status=Status.SENDING, claimed_at=now, attempts=F("attempts") + 1))


def _request(delivery: WebhookDelivery, now: datetime) -> tuple[bytes, dict]:
    body = json.dumps(delivery.payload, separators=(",", ":"), ensure_ascii=False).encode()
    timestamp = int(now.timestamp())
    return body, {
        "Content-Type": "application/json",
        "User-Agent": "memweb-webhooks/1",
        "X-Memweb-Event": delivery.event,
        "X-Memweb-Delivery": str(delivery.uuid),
        "X-Memweb-Timestamp": str(timestamp),
        "X-Memweb-Signature": webhook_signature(secret=delivery.webhook.secret, timestamp=timestamp, body=body),
    }


def delivery_attempt(*, delivery_id: int, now: datetime | None = None) -> WebhookDelivery | None:
    """One attempt, if the delivery is due at `now`; the result is logged on the delivery and a
    failure schedules the next attempt (or gives up after MAX_ATTEMPTS). None when not due."""
    now = now or timezone.now()
    if not _claim(delivery_id, now):
        return None
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    status_code, error = target_post(delivery.webhook.url, *_request(delivery, now))
    delivery.attempt_log = [*delivery.attempt_log, {"at": now.isoformat(), "status_code": status_code,
                                                    "error": error}]
    delivery.last_status_code, delivery.last_error, delivery.claimed_at = status_code, error, None
    if not error:
        delivery.status, delivery.delivered_at, delivery.next_attempt_at = Status.DELIVERED, now, None
    elif delivery.attempts >= MAX_ATTEMPTS:
        delivery.status, delivery.next_attempt_at = Status.FAILED, None
    else:
        delivery.status, delivery.next_attempt_at = Status.PENDING, now + BACKOFF[delivery.attempts - 1]
    delivery.save(update_fields=["attempt_log", "last_status_code", "last_error", "claimed_at", "status",
                                 "delivered_at", "next_attempt_at"])
    if delivery.status == Status.PENDING:
        _queue(delivery.pk, countdown=(delivery.next_attempt_at - now).total_seconds())
    return delivery


def deliveries_resend_overdue() -> int:
    """Worker beat: queue again the deliveries whose message was lost (overdue) or whose sender died
    mid-attempt (claimed long ago). Each becomes due now, so one lost message is resent once.
    Finished deliveries older than DELIVERIES_KEPT are forgotten here too."""
    now = timezone.now()
    WebhookDelivery.objects.filter(status__in=(Status.DELIVERED, Status.FAILED),
                                   created_at__lt=now - DELIVERIES_KEPT).delete()
    overdue = WebhookDelivery.objects.filter(
        Q(status=Status.PENDING, next_attempt_at__lt=now - OVERDUE_AFTER)
        | Q(status=Status.SENDING, claimed_at__lt=now - STALE_CLAIM), webhook__active=True)
    with transaction.atomic():
        # Locked, so a late message claiming one of them meanwhile waits for this reset, then claims it
        # (and this beat's message finds it taken); skip_locked leaves them to one beat of many workers.
        ids = list(overdue.select_for_update(skip_locked=True, of=("self",)).values_list("pk", flat=True))
        WebhookDelivery.objects.filter(pk__in=ids).update(status=Status.PENDING, next_attempt_at=now,
                                                          claimed_at=None)
        for delivery_id in ids:
            _queue(delivery_id)
    return len(ids)


# --- erasing -----------------------------------------------------------------------------------------

def _erased_matches(deliveries, *, orb_ids: list[int], episode_ids: list[int], needles: list[str]) -> set[int]:
    ids = set(deliveries.filter(Q(payload__data__orb_id__in=orb_ids) | Q(payload__data__episode_id__in=episode_ids))
              .values_list("pk", flat=True)) if orb_ids or episode_ids else set()
    as_text = deliveries.annotate(payload_text=Cast("payload", TextField()))
    for start in range(0, len(needles), NEEDLES_PER_QUERY):
        match = Q()
        for needle in needles[start:start + NEEDLES_PER_QUERY]:
            match |= Q(payload_text__contains=needle)
        ids.update(as_text.filter(match).values_list("pk", flat=True))
    return ids


def _scrubbed(delivery: WebhookDelivery, now: datetime) -> None:
    """Keep what says that an event was sent, when and how it went; drop what it said, and what a
    receiver's answer may have echoed of it. A delivery still waiting is given up."""
    delivery.payload = {**{key: delivery.payload.get(key) for key in ("id", "event", "created_at", "bank")},
                        "data": {"erased": ERASED}}
    delivery.attempt_log = [{**attempt, "error": ERASED if attempt.get("error") else ""}
                            for attempt in delivery.attempt_log]
    delivery.last_error = ERASED if delivery.last_error else ""
    if delivery.status in (Status.PENDING, Status.SENDING):
        delivery.status, delivery.next_attempt_at, delivery.last_error = Status.FAILED, None, NOT_SENT_ERASED
    delivery.erased_at = now


def webhook_deliveries_erase(*, workspace_id: int, orb_ids: list[int] = (), episode_ids: list[int] = (),
                             values: list[str] = (), texts: list[str] = ()) -> int:
    """Scrub the workspace's deliveries about any of `orb_ids` or `episode_ids`, or holding any of
    `values` as a whole JSON string (a customer key) or any of `texts` anywhere; how many were scrubbed.
    Deliveries scrubbed before are left as they are."""
    deliveries = WebhookDelivery.objects.filter(webhook__workspace_id=workspace_id, erased_at__isnull=True)
    ids = _erased_matches(deliveries, orb_ids=list(orb_ids), episode_ids=list(episode_ids),
                          needles=json_needles(values=values, texts=texts))
    now = timezone.now()
    with transaction.atomic():
        for delivery in WebhookDelivery.objects.filter(pk__in=ids).select_for_update().order_by("pk"):
            _scrubbed(delivery, now)
            delivery.save(update_fields=["payload", "attempt_log", "last_error", "status", "next_attempt_at",
                                         "erased_at"])
    return len(ids)


# --- reading -----------------------------------------------------------------------------------------

def webhooks_list(*, workspace):
    return Webhook.objects.select_related("created_by").of(workspace)


def deliveries_of(*, workspace, webhook_id: int | None = None):
    """The workspace's deliveries (one webhook's, given its id), newest first."""
    deliveries = WebhookDelivery.objects.select_related("webhook").of(workspace)
    return deliveries if webhook_id is None else deliveries.filter(webhook_id=webhook_id)


def deliveries_recent(*, workspace, webhook_id: int | None = None, limit: int = 50) -> list[WebhookDelivery]:
    return list(deliveries_of(workspace=workspace, webhook_id=webhook_id)[:limit])
