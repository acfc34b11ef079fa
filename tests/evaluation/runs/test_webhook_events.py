"""The runs' webhook event: `run.finished`, once, when a run completes, fails or is cancelled."""
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import protocol, run_cancel, run_drive
from evaluation.vocabulary import EvaluationEvent
from memweb.models import WebhookDelivery
from memweb.webhooks import webhook_create
from orbs.services import bank_get_or_create
from tests.evaluation.runs.conftest import TASK_IDS
from tests.support.webhook_receiver import receiver, verified  # noqa: F401  (receiver is a fixture)

Status = EvaluationRun.Status


def _finished(receiver) -> list[dict]:
    return [r.json["data"] for r in receiver.received if r.headers["X-Memweb-Event"] == "run.finished"]


def test_a_completed_run_is_announced_to_its_banks_webhooks(launch, receiver, django_capture_on_commit_callbacks):
    run = launch(trials=1, task_ids=TASK_IDS[:1])
    _, secret = webhook_create(url=receiver.url, events=[EvaluationEvent.RUN_FINISHED], bank=run.bank.slug)
    webhook_create(url=receiver.url + "?other", events=[EvaluationEvent.RUN_FINISHED],
                   bank=bank_get_or_create(name="another-bank").slug)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_drive(run=run)
    assert run.status == Status.COMPLETED
    [request] = [r for r in receiver.received if r.headers["X-Memweb-Event"] == "run.finished"]
    assert verified(request, secret) and request.path == "/hooks/memweb" and request.json["bank"] == run.bank.slug
    data = request.json["data"]
    assert (data["run_id"], data["status"], data["bank"], data["memory_mode"]) == (run.pk, "completed",
                                                                                 run.bank.slug, "memorb")
    assert (data["episodes_total"], data["episodes_finished"], data["successes"]) == (1, 1, run.successes)
    assert data["metrics"] == run.metrics and data["finished_at"] == run.finished_at.isoformat()


def test_a_cancelled_or_failed_run_is_announced_once(launch, operator_user, receiver,
                                                     django_capture_on_commit_callbacks):
    webhook_create(url=receiver.url, events=[EvaluationEvent.RUN_FINISHED])
    cancelled, failed = launch(trials=1), launch(trials=1)
    with django_capture_on_commit_callbacks(execute=True):
        run_cancel(run=cancelled, user=operator_user)
        protocol.run_fail(run_id=failed.pk, message="the agent endpoint refused every call")
        protocol.run_fail(run_id=cancelled.pk, message="too late: it was cancelled")  # no second ending
    announced = {data["run_id"]: data for data in _finished(receiver)}
    assert announced.keys() == {cancelled.pk, failed.pk} and WebhookDelivery.objects.count() == 2
    assert (announced[cancelled.pk]["status"], announced[cancelled.pk]["status_message"]) == (
        "cancelled", f"cancelled by {operator_user.username}")
    assert announced[cancelled.pk]["created_by"] == operator_user.username
    assert (announced[failed.pk]["status"], announced[failed.pk]["status_message"]) == (
        "failed", "the agent endpoint refused every call")
