from celery import shared_task

from memweb.services import probe_complete


@shared_task(bind=True)
def complete_probe(self, probe_id: int) -> None:
    probe_complete(probe_id=probe_id, worker=self.request.hostname or "")
