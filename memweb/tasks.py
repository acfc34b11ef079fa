from celery import shared_task

from memweb.celery import worker_claimant_here
from memweb.jobs import job_execute
from memweb.services import probe_complete
from memweb.webhooks import delivery_attempt


@shared_task(bind=True)
def complete_probe(self, probe_id: int) -> None:
    probe_complete(probe_id=probe_id, worker=self.request.hostname or "")


@shared_task
def deliver_webhook(delivery_id: int) -> None:
    """One attempt at a webhook delivery (a no-op unless it is due: see delivery_attempt)."""
    delivery_attempt(delivery_id=delivery_id)


@shared_task(bind=True)
def job_run(self, job_id: int) -> None:
    """Every background job (memweb.jobs) runs through this one task."""
    job_execute(job_id=job_id, worker=worker_claimant_here(self.request.hostname))
