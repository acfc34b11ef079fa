"""What the health page and /api/health report: database, broker, workers,
embedding model and LLM roles. Every check reports its failure instead of raising."""
import time

from django.conf import settings
from django.db import connection
from kombu import Connection
from sqlalchemy.pool import NullPool

from memweb.celery import app as celery_app
from memweb.embeddings import DIMENSIONS, EmbeddingModelUnavailable, embedder
from memweb.llm import role_statuses
from memweb.services import workers_live

BROKER_TIMEOUT_SECONDS = 3


def database_status() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            postgres = cursor.fetchone()[0]
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
    except Exception as exc:  # the page must still render when the database is down
        return {"ok": False, "postgres": "", "pgvector": "", "error": str(exc)}
    pgvector = row[0] if row else ""
    error = "" if pgvector else "the pgvector extension is not installed in this database"
    return {"ok": bool(pgvector), "postgres": postgres, "pgvector": pgvector, "error": error}


def broker_status() -> dict:
    """Connect and look at Celery's queue: some transports (SQLAlchemy) connect lazily,
    so only a real operation proves the broker answers."""
    started = time.monotonic()
    broker = Connection(
        settings.CELERY_BROKER_URL,
        connect_timeout=BROKER_TIMEOUT_SECONDS,
        transport_options=_one_off_transport_options(),
    )
    try:
        broker.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=BROKER_TIMEOUT_SECONDS)
        waiting, error = _queue_depth(broker), ""
    except Exception as exc:  # any transport's failure is a status to show, not a crash
        waiting, error = None, str(exc) or exc.__class__.__name__
    finally:
        _close_transport_session(broker)
        broker.release()
    latency_ms = round((time.monotonic() - started) * 1000)
    # as_uri() leaves the password out.
    return {"ok": not error, "url": broker.as_uri(), "latency_ms": latency_ms, "waiting": waiting, "error": error}


def _one_off_transport_options() -> dict:
    """The SQLAlchemy transport pools connections per process; a health check must
    not leave one open behind it (it would outlive a database restart)."""
    options = dict(settings.CELERY_BROKER_TRANSPORT_OPTIONS)
    if settings.CELERY_BROKER_URL.startswith("sqla+"):
        options["poolclass"] = NullPool
    return options


def _close_transport_session(broker: Connection) -> None:
    # kombu's SQLAlchemy channel keeps an ORM session (and its connection) open past
    # release(); close it so the check leaves nothing behind.
    session = getattr(getattr(broker, "_default_channel", None), "_session", None)
    if session is not None:
        session.close()


def _queue_depth(broker: Connection) -> int | None:
    try:
        return broker.default_channel.queue_declare(queue=celery_app.conf.task_default_queue, passive=True).message_count
    except broker.channel_errors:  # reachable, but no worker has declared the queue yet
        return None


def workers_status() -> list[dict]:
    return [
        {"hostname": beat.hostname, "instance": beat.instance, "pid": beat.pid, "processes": beat.processes,
         "started_at": beat.started_at, "seen_at": beat.seen_at}
        for beat in workers_live()
    ]


def embedding_status() -> dict:
    """The model, the library that runs it (and why MiniLM runs on torch, when it does). Known without
    loading the weights; never load them here."""
    try:
        model = embedder()
    except EmbeddingModelUnavailable as exc:
        name = settings.EMBEDDING_MODEL
        return {"model": name, "dimension": DIMENSIONS[name], "loaded": False, "backend": "",
                "backend_note": "", "error": str(exc)}
    return {"model": model.model_name, "dimension": model.dimension, "loaded": "_model" in model.__dict__,
            "backend": model.backend, "backend_note": model.backend_note, "error": ""}


def health_report() -> dict:
    return {
        "database": database_status(),
        "broker": broker_status(),
        "workers": workers_status(),
        "embedding": embedding_status(),
        "llm_roles": role_statuses(),
    }


def liveness() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:  # a liveness probe answers "down", it does not crash
        return False
