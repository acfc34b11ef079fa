from celery import shared_task

from memweb.celery import worker_claimant_here
from orbs.services import episode_reflect


@shared_task(bind=True)
def reflect_episode(self, ingest_id: int) -> None:
    """Reflect one stored episode into its Orb (idempotent: see episode_reflect)."""
    episode_reflect(ingest_id=ingest_id, worker=worker_claimant_here(self.request.hostname))
