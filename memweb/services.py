"""Worker heartbeats and probe tasks: the infrastructure state the health page shows; the
check every input path makes for values PostgreSQL cannot store; forgetting stored idempotent
answers that hold an erased customer's data."""
import json
import math
import secrets
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone

from memweb.models import IdempotentRequest, TaskProbe, WorkerHeartbeat

# An erasure may name hundreds of texts; an OR of this many LIKE tests per statement.
IDEMPOTENT_NEEDLES_PER_QUERY = 50


def worker_claimant(*, hostname: str, instance: str, pid: int) -> str:
    """The name a worker process claims work under: its worker instance (one start of a worker) and
    its own pid. A worker restarted under the same hostname is a new instance, and a pool process
    that replaces a killed one has a new pid: neither is taken for the process that held the claim."""
    return f"{_instance_prefix(hostname, instance)}{pid}"


def _instance_prefix(hostname: str, instance: str) -> str:
    return f"{hostname[:200]}#{instance}/"


def heartbeat_record(*, instance: str, hostname: str, pid: int, processes: list[int]) -> None:
    # Runs on the worker's timer thread, outside any request cycle.
    close_old_connections()
    now = timezone.now()
    fields = {"hostname": hostname, "pid": pid, "processes": processes, "seen_at": now}
    WorkerHeartbeat.objects.update_or_create(instance=instance, defaults=fields,
                                             create_defaults=fields | {"started_at": now})


def heartbeats_replace(*, instance: str, hostname: str) -> int:
    """A worker instance starts: earlier instances under its node name are dead (Celery node names
    are unique among running workers, so this one replaces them, as `make run` restarts a killed
    worker), and so are those silent for a liveness window. Their rows go, so their claims count
    as dead at once, not after a liveness window. Returns how many went."""
    close_old_connections()
    gone = Q(hostname=hostname) | Q(seen_at__lt=timezone.now() - worker_liveness_window())
    return WorkerHeartbeat.objects.filter(gone).exclude(instance=instance).delete()[0]


def heartbeat_forget(*, instance: str) -> None:
    close_old_connections()
    WorkerHeartbeat.objects.filter(instance=instance).delete()


def worker_liveness_window() -> timedelta:
    """How long a worker counts as alive after its last heartbeat: three beats, so one late beat
    is not taken for a death."""
    return timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)


def workers_live() -> list[WorkerHeartbeat]:
    """Workers whose heartbeat is younger than the liveness window."""
    cutoff = timezone.now() - worker_liveness_window()
    return list(WorkerHeartbeat.objects.filter(seen_at__gte=cutoff).order_by("hostname", "started_at"))


def claims_stale(*, field: str = "claimed_by", at: str = "claimed_at", grace: timedelta) -> Q:
    """Rows whose claim (the claimant in `field`, claimed at `at`) no live worker process holds.
    A claim of an instance whose row is gone (a worker started under its name: heartbeats_replace)
    is stale at once; one of an instance that went silent, or of a process its live instance no
    longer lists (a killed pool process), once it is older than `grace`: a late beat is not a death,
    and a pool process started after its instance's last beat is not listed yet."""
    beats = list(WorkerHeartbeat.objects.all())
    cutoff = timezone.now() - worker_liveness_window()
    holders = [worker_claimant(hostname=beat.hostname, instance=beat.instance, pid=pid)
               for beat in beats if beat.seen_at >= cutoff for pid in [beat.pid, *beat.processes]]
    known = Q(pk__in=[])
    for beat in beats:
        known |= Q(**{f"{field}__startswith": _instance_prefix(beat.hostname, beat.instance)})
    return ~Q(**{f"{field}__in": holders}) & (~known | Q(**{f"{at}__lt": timezone.now() - grace}))


def probe_queue() -> TaskProbe:
    from memweb.tasks import complete_probe

    probe = TaskProbe.objects.create(token=secrets.token_hex(16))
    complete_probe.delay_on_commit(probe.pk)
    return probe


def probe_complete(*, probe_id: int, worker: str) -> None:
    TaskProbe.objects.filter(pk=probe_id, done_at__isnull=True).update(done_at=timezone.now(), worker=worker)


# --- decoded JSON that PostgreSQL cannot store ---------------------------------------------------

UNSTORABLE_TEXT = "text must not contain NUL (\\u0000) characters or unpaired surrogates"
NON_FINITE = "must be a finite number (JSON has no NaN or Infinity)"


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _children(value) -> list[tuple[tuple, object]]:
    if isinstance(value, dict):
        return [((key,), key) for key in value] + [((key,), item) for key, item in value.items()]
    if isinstance(value, list):
        return [((index,), item) for index, item in enumerate(value)]
    return []


def unstorable_at(value, where: tuple = ()) -> tuple[tuple, str] | None:
    """(path, reason) of the first value in decoded JSON that PostgreSQL's text and jsonb cannot
    hold, or None. Python's JSON reader lets through a NUL character or a lone surrogate (as \\u
    escapes) and NaN or Infinity; every input path checks before anything is written."""
    if isinstance(value, str):
        return None if _storable(value) else (where, UNSTORABLE_TEXT)
    if isinstance(value, float):
        return None if math.isfinite(value) else (where, NON_FINITE)
    return next((found for step, item in _children(value) if (found := unstorable_at(item, where + step))), None)


def unstorable_problem(value) -> tuple[str, str] | None:
    """unstorable_at as (dotted field name, reason), for import reports."""
    found = unstorable_at(value)
    return None if found is None else (".".join(str(step) for step in found[0]) or "(line)", found[1])


def _json_forms(text: str) -> set[str]:
    """How a text appears inside stored JSON: escaped as the API's renderer writes it (non-ASCII as
    \\u escapes) and, for JSON written another way (PostgreSQL's jsonb), with its characters as they are."""
    return {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}


def json_needles(*, values: Iterable[str] = (), texts: Iterable[str] = ()) -> list[str]:
    """Substrings that find, in stored JSON text, any of `values` as a whole JSON string (e.g. a
    customer key) or any of `texts` anywhere; sorted, so batches of them are repeatable."""
    needles = {f'"{form}"' for value in values for form in _json_forms(value)}
    needles |= {form for text in texts for form in _json_forms(text) if form}
    return sorted(needles)


def idempotent_answers_forget(*, values: Iterable[str] = (), texts: Iterable[str] = ()) -> int:
    """Delete the stored idempotent answers (memweb.idempotency) that hold any of `values` as a whole
    JSON string (e.g. a customer key) or any of `texts` anywhere; how many were deleted. A retry of
    a forgotten request runs again, which is what a key past its expiry does too."""
    deleted = 0
    ordered = json_needles(values=values, texts=texts)
    for start in range(0, len(ordered), IDEMPOTENT_NEEDLES_PER_QUERY):
        match = Q()
        for needle in ordered[start:start + IDEMPOTENT_NEEDLES_PER_QUERY]:
            match |= Q(body__contains=needle)
        deleted += IdempotentRequest.objects.filter(match).delete()[0]
    return deleted
