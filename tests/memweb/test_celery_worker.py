"""A real worker process and a real broker run a task to completion.

Redis (production's broker, running on 127.0.0.1:6379 here) and the default
that needs no extra service (kombu's SQLAlchemy transport on PostgreSQL)."""
import pytest
from celery.signals import worker_process_init
from kombu import Connection
from kombu.transport.sqlalchemy import Channel
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from memweb.celery import app as celery_app
from memweb.models import TaskProbe, WorkerHeartbeat
from tests.support.processes import celery_worker, database_url_for_tests, wait_until, worker_env

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _sqla_broker_url() -> str:
    return "sqla+" + database_url_for_tests().replace("postgresql://", "postgresql+psycopg://", 1)


BROKERS = {
    "default-sqlalchemy-on-postgres": _sqla_broker_url,
    "redis": lambda: "redis://127.0.0.1:6379/15",
}


@pytest.fixture(params=sorted(BROKERS))
def broker_url(request):
    return BROKERS[request.param]()


def _queue_probe(broker_url: str) -> TaskProbe:
    probe = TaskProbe.objects.create(token=f"probe-{broker_url[:5]}")
    # NullPool: the publisher's SQLAlchemy engine must not keep a connection to the test database open.
    with Connection(broker_url, transport_options={"poolclass": NullPool}) as conn:
        celery_app.send_task("memweb.tasks.complete_probe", args=[probe.pk], connection=conn)
    return probe


def test_it_runs_a_queued_task_on_a_real_worker(broker_url):
    probe = _queue_probe(broker_url)  # queued before the worker exists: the broker keeps it
    env = worker_env(None if broker_url.startswith("sqla+") else broker_url)
    with celery_worker(env, hostname="probe-worker@%h"):
        wait_until(lambda: TaskProbe.objects.filter(pk=probe.pk, done_at__isnull=False).exists(),
                   timeout=60, message="the worker to complete the probe task")
        probe.refresh_from_db()
        assert probe.worker.startswith("probe-worker@")
        assert WorkerHeartbeat.objects.filter(hostname__startswith="probe-worker@").exists()


def test_it_forgets_the_heartbeat_when_the_worker_stops():
    with celery_worker(worker_env(), hostname="brief-worker@%h"):
        wait_until(lambda: WorkerHeartbeat.objects.filter(hostname__startswith="brief-worker@").exists(),
                   timeout=60, message="the worker's first heartbeat")
    assert not WorkerHeartbeat.objects.filter(hostname__startswith="brief-worker@").exists()


def test_a_pool_process_drops_the_broker_connections_it_inherited():
    """kombu caches broker engines class-wide; a forked pool process must not reuse the parent's pooled
    connections (two processes on one socket broke a worker's transactions in the killed-worker test)."""
    engine = create_engine(_sqla_broker_url().removeprefix("sqla+"))
    inherited = engine.connect()  # a pooled connection, as the parent holds one
    Channel._engines["inherited-from-the-parent"] = (engine, None)
    try:
        pool_before = engine.pool
        worker_process_init.send(sender=None)
        assert engine.pool is not pool_before  # the child starts from an empty pool of its own
        assert not inherited.connection.dbapi_connection.closed  # the parent's socket is left open
    finally:
        del Channel._engines["inherited-from-the-parent"]
        inherited.close()
        engine.dispose()


def test_a_worker_loads_the_embedding_model_as_it_starts():
    """A task finds the model loaded (issue 31): no task pays the model's cold start."""
    with celery_worker(worker_env(MEMWEB_EMBEDDING_WARMUP="true"), hostname="warm-worker@%h") as worker:
        wait_until(lambda: any("as a worker process started" in line for line in worker.output_lines),
                   timeout=180, message="the pool process to load the embedding model")
        loaded = next(line for line in worker.output_lines if "as a worker process started" in line)
    assert "memweb: embedding model all-MiniLM-L6-v2 (" in loaded and " loaded in " in loaded, loaded
