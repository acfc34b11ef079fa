"""A real worker runs a job whose broker message was lost: its heartbeat's beat finds the job queued
for longer than MEMWEB_JOB_RESEND_SECONDS with no worker claiming it and sends its message again."""
import pytest

from memweb.models import Job, default_workspace_id
from orbs.services import bank_get_or_create
from tests.support.processes import celery_worker, wait_until, worker_env

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_runs_a_job_whose_message_was_lost():
    bank = bank_get_or_create(name="Checked shop")
    # Written without a message, as if the broker had lost it after the commit.
    lost = Job.objects.create(workspace_id=default_workspace_id(), kind="orbs.history_verify", title="Check",
                              payload={"bank_id": bank.pk})
    with celery_worker(worker_env(MEMWEB_JOB_RESEND_SECONDS="1"), hostname="jobs-worker@%h"):
        wait_until(lambda: Job.objects.filter(pk=lost.pk, status__in=Job.FINISHED).exists(),
                   timeout=120, message="the worker's beat to resend the lost job")
    lost.refresh_from_db()
    assert lost.status == Job.Status.SUCCEEDED, lost.error
    assert lost.worker.startswith("jobs-worker@")
