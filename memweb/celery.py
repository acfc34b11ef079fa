"""The Celery app. Workers also keep a heartbeat row so the health page can
count live workers on brokers that have no broadcast channel."""
import logging
import os
import socket

from celery import Celery, bootsteps
from celery.signals import celeryd_after_setup, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")

logger = logging.getLogger(__name__)
app = Celery("memweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class HeartbeatStep(bootsteps.StartStopStep):
    requires = {"celery.worker.components:Timer"}

    def start(self, worker):
        from django.conf import settings

        self.hostname = worker.hostname or socket.gethostname()
        self.beat()
        self.timer = worker.timer.call_repeatedly(settings.WORKER_HEARTBEAT_SECONDS, self.beat)

    def stop(self, worker):
        from memweb.services import heartbeat_forget

        if getattr(self, "timer", None):
            self.timer.cancel()
            heartbeat_forget(hostname=self.hostname)

    def beat(self):
        from memweb.services import heartbeat_record

        heartbeat_record(hostname=self.hostname, pid=os.getpid())
        self.watch_runs()

    def watch_runs(self):
        # A run's watchdog lives in countdown messages, which a broker restarted without persistence
        # loses; this beat (a timer of the worker, not a message) re-arms the overdue ones.
        from evaluation.runs.services import runs_watch_overdue

        try:
            runs_watch_overdue()
        except Exception:
            logger.warning("re-arming overdue run watchdogs failed; the next beat tries again", exc_info=True)


app.steps["worker"].add(HeartbeatStep)

_pool_processes = 1


@celeryd_after_setup.connect
def _remember_pool_size(sender, instance, **kwargs):
    global _pool_processes
    _pool_processes = instance.concurrency or 1


@worker_process_init.connect
def _share_the_cores(**kwargs):
    """Each pool process embeds with torch, which by default runs one thread per core in every
    process: N processes then oversubscribe the cores N-fold and play episodes several times
    slower (bench/dashboard_under_load.py measured 4-7x). Give each process its share."""
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // _pool_processes))
