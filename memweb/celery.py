"""The Celery app. Each worker instance (one start of a worker) keeps a heartbeat row that lists
its processes, so the health page can count live workers on brokers that have no broadcast channel
and a claim can be told from one whose worker or pool process died (memweb.services.claims_stale)."""
import logging
import os
import socket
import uuid

from celery import Celery, bootsteps
from celery.signals import celeryd_after_setup, worker_init, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")

logger = logging.getLogger(__name__)
app = Celery("memweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


_instance = ""  # this worker instance's id, chosen when it starts; its forked pool processes inherit it


@worker_init.connect
def _start_a_new_instance(**kwargs):
    # Sent in the worker's main process before its pool forks.
    global _instance
    _instance = uuid.uuid4().hex[:16]


def worker_claimant_here(hostname: str | None) -> str:
    """The name the process running a task claims work under (memweb.services.worker_claimant);
    outside a worker (tasks run eagerly) the task's hostname, as before instances existed."""
    from memweb.services import worker_claimant

    if not _instance:
        return hostname or "celery"
    return worker_claimant(hostname=hostname or socket.gethostname(), instance=_instance, pid=os.getpid())


class HeartbeatStep(bootsteps.StartStopStep):
    # After the pool: its processes are listed from the first beat, before any task can claim work.
    requires = {"celery.worker.components:Timer", "celery.worker.components:Pool"}

    def start(self, worker):
        from django.conf import settings

        from memweb.services import heartbeats_replace

        self.worker, self.hostname = worker, worker.hostname or socket.gethostname()
        heartbeats_replace(instance=_instance, hostname=self.hostname)
        self.beat()
        self.timer = worker.timer.call_repeatedly(settings.WORKER_HEARTBEAT_SECONDS, self.beat)

    def stop(self, worker):
        from memweb.services import heartbeat_forget

        if getattr(self, "timer", None):
            self.timer.cancel()
            heartbeat_forget(instance=_instance)

    def beat(self):
        from memweb.services import heartbeat_record

        heartbeat_record(instance=_instance, hostname=self.hostname, pid=os.getpid(), processes=self.processes())
        self.run_app_beats()

    def processes(self) -> list[int]:
        """The pool's live processes (a prefork pool replaces a killed one under a new pid); other
        pools run tasks in this process, which the heartbeat names anyway."""
        return [pid for pid in self.worker.pool.info.get("processes", []) if pid]

    def run_app_beats(self):
        # Work that must not depend on messages (a run's watchdog lives in countdown messages, which
        # a broker restarted without persistence loses) rides on this timer of the worker instead.
        from memweb.registry import worker_beats

        for beat in worker_beats():
            try:
                beat()
            except Exception:
                logger.warning("worker beat %s failed; the next heartbeat tries again", beat.__qualname__,
                               exc_info=True)


app.steps["worker"].add(HeartbeatStep)


@worker_init.connect
def _poll_the_database_broker_often(**kwargs):
    """kombu's SQLAlchemy transport polls its table, by default once a second while it finds
    nothing, and a worker slot that finished a task finds its next message only at the next poll:
    an evaluation run's hand-offs (a trial's messages, the next trial) each waited up to a second.
    (Its transport options go to SQLAlchemy's create_engine, so the interval is set on the class.)"""
    from django.conf import settings
    from kombu.transport import sqlalchemy

    sqlalchemy.Transport.polling_interval = settings.BROKER_POLL_SECONDS


@worker_init.connect
def _start_embedded_database(**kwargs):
    from memweb.embedded_db import ensure_configured

    ensure_configured()


@worker_init.connect
def _refuse_a_foreign_signing_key(**kwargs):
    """A worker of a deployment signs nothing itself, but one started with another node's settings
    file is a misconfigured node: it stops here, naming SECRET_KEY (memweb.nodes). Celery logs and
    swallows exceptions from signal handlers, so it exits with the message instead."""
    import django
    from django.core.exceptions import ImproperlyConfigured

    from memweb.nodes import node_signing_key_check

    django.setup()
    try:
        node_signing_key_check()
    except ImproperlyConfigured as exc:
        raise SystemExit(f"memweb worker refused to start: {exc}") from None

_pool_processes = 1


@celeryd_after_setup.connect
def _remember_pool_size(sender, instance, **kwargs):
    global _pool_processes
    _pool_processes = instance.concurrency or 1


@worker_process_init.connect
def _forget_the_parents_broker_connections(**kwargs):
    """kombu's SQLAlchemy transport caches its engines class-wide, so a forked pool process inherits
    the parent's pooled broker connections: two processes then talk over one socket and break each
    other's transactions (seen: a worker exiting on "connection in transaction status INERROR").
    Each pool process drops them without closing them (the parent goes on using its own)."""
    from kombu.transport.sqlalchemy import Channel

    for engine, _session in list(Channel._engines.values()):
        engine.dispose(close=False)


@worker_process_init.connect
def _share_the_cores(**kwargs):
    """Each pool process embeds; a library's default of one thread per core in every process
    oversubscribes the cores N-fold. Give each process its share (memweb.embeddings.cores_share)."""
    from memweb.embeddings import cores_share

    cores_share(max(1, (os.cpu_count() or 1) // _pool_processes))


@worker_process_init.connect
def _load_the_embedding_model(**kwargs):
    """Tasks find the model loaded, as web requests do (memweb/gunicorn_conf.py): in the background,
    because Celery gives a starting pool process a few seconds before it counts it as failed."""
    from memweb.embeddings import warm_up_in_background

    return warm_up_in_background(logger, "worker process")  # the thread, for the tests
