"""Worker heartbeats and probe tasks: the infrastructure state the health page shows."""
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from memweb.models import TaskProbe, WorkerHeartbeat


def heartbeat_record(*, hostname: str, pid: int) -> None:
    # Runs on the worker's timer thread, outside any request cycle.
    close_old_connections()
    now = timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        hostname=hostname, defaults={"pid": pid, "seen_at": now}, create_defaults={"pid": pid, "seen_at": now, "started_at": now}
    )


def heartbeat_forget(*, hostname: str) -> None:
    close_old_connections()
    WorkerHeartbeat.objects.filter(hostname=hostname).delete()


def workers_live() -> list[WorkerHeartbeat]:
    """Workers whose heartbeat is younger than three beats."""
    cutoff = timezone.now() - timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)
    return list(WorkerHeartbeat.objects.filter(seen_at__gte=cutoff).order_by("hostname"))


def probe_queue() -> TaskProbe:
    from memweb.tasks import complete_probe

    probe = TaskProbe.objects.create(token=secrets.token_hex(16))
    complete_probe.delay_on_commit(probe.pk)
    return probe


def probe_complete(*, probe_id: int, worker: str) -> None:
    TaskProbe.objects.filter(pk=probe_id, done_at__isnull=True).update(done_at=timezone.now(), worker=worker)
