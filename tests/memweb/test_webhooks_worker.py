"""A real worker sends a webhook delivery whose message was lost: its heartbeat's beat finds the
delivery overdue and queues it again, and the worker's pool posts it, signed, to a receiver."""
from datetime import timedelta

import pytest
from django.utils import timezone

from evaluation.vocabulary import EvaluationEvent
from memweb.models import WebhookDelivery
from memweb.webhooks import webhook_create
from tests.support.processes import celery_worker, wait_until, worker_env
from tests.support.webhook_receiver import receiver, verified  # noqa: F401  (receiver is a fixture)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_sends_a_delivery_whose_message_was_lost(receiver):
    webhook, secret = webhook_create(url=receiver.url, events=[EvaluationEvent.RUN_FINISHED])
    # Written without a message, as if the broker had lost it after the commit.
    lost = WebhookDelivery.objects.create(webhook=webhook, event=EvaluationEvent.RUN_FINISHED, payload={"data": {"run_id": 3}},
                                          next_attempt_at=timezone.now() - timedelta(minutes=5))
    with celery_worker(worker_env(MEMWEB_WEBHOOK_ALLOW_HOSTS="127.0.0.1"), hostname="webhook-worker@%h"):
        wait_until(lambda: WebhookDelivery.objects.filter(pk=lost.pk, status=WebhookDelivery.Status.DELIVERED).exists(),
                   timeout=60, message="the worker's beat to resend the lost delivery")
    [request] = receiver.received
    assert verified(request, secret) and request.headers["X-Memweb-Delivery"] == str(lost.uuid)
    assert request.json == {"data": {"run_id": 3}}
