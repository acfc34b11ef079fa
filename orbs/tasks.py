from celery import shared_task

from orbs.services import episode_reflect


@shared_task
def reflect_episode(ingest_id: int) -> None:
    """Reflect one stored episode into its Orb (idempotent: see episode_reflect)."""
    episode_reflect(ingest_id=ingest_id)
