from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MemwebConfig(AppConfig):
    name = "memweb"
    verbose_name = "memweb infrastructure"
    # Read by memweb.registry like any app's: webhook retries and jobs whose Celery message was lost.
    worker_beats: tuple = ("memweb.webhooks.deliveries_resend_overdue", "memweb.jobs.jobs_resend_stale")

    def ready(self):
        import memweb.celery  # noqa: F401 - binds @shared_task to memweb's app in every Django process
        from memweb.roles import roles_sync

        post_migrate.connect(roles_sync, dispatch_uid="memweb.roles_sync")
