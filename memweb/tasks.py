from celery import shared_task

from memweb.jobs import job_execute
from memweb.services import probe_complete


@shared_task(bind=True)
def complete_probe(self, probe_id: int) -> None:
    probe_complete(probe_id=probe_id, worker=self.request.hostname or "")


@shared_task(bind=True)
def job_run(self, job_id: int) -> None:
    """Every background job (memweb.jobs) runs through this one task."""
    job_execute(job_id=job_id, worker=self.request.hostname or "")
