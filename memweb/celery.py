"""The Celery app. Workers also keep a heartbeat row so the health page can
count live workers on brokers that have no broadcast channel."""
import os
import socket

from celery import Celery, bootsteps

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")

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


app.steps["worker"].add(HeartbeatStep)
