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


def worker_liveness_window() -> timedelta:
    """How long a worker counts as alive after its last heartbeat: three beats, so one late beat
    is not taken for a death."""
    return timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)


def workers_live() -> list[WorkerHeartbeat]:
    """Workers whose heartbeat is younger than the liveness window."""
    cutoff = timezone.now() - worker_liveness_window()
    return list(WorkerHeartbeat.objects.filter(seen_at__gte=cutoff).order_by("hostname"))


def workers_live_hostnames() -> list[str]:
    return [beat.hostname for beat in workers_live()]


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
    """How a text appears inside a stored JSON answer: escaped as the API's renderer writes it
    (non-ASCII as \\u escapes) and, for answers written another way, with its characters as they are."""
    return {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}


def idempotent_answers_forget(*, values: Iterable[str] = (), texts: Iterable[str] = ()) -> int:
    """Delete the stored idempotent answers (memweb.idempotency) that hold any of `values` as a whole
    JSON string (e.g. a customer key) or any of `texts` anywhere; how many were deleted. A retry of
    a forgotten request runs again, which is what a key past its expiry does too."""
    needles = {f'"{form}"' for value in values for form in _json_forms(value)}
    needles |= {form for text in texts for form in _json_forms(text) if form}
    deleted = 0
    ordered = sorted(needles)
    for start in range(0, len(ordered), IDEMPOTENT_NEEDLES_PER_QUERY):
        match = Q()
        for needle in ordered[start:start + IDEMPOTENT_NEEDLES_PER_QUERY]:
            match |= Q(body__contains=needle)
        deleted += IdempotentRequest.objects.filter(match).delete()[0]
    return deleted
