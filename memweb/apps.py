from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MemwebConfig(AppConfig):
    name = "memweb"
    verbose_name = "memweb infrastructure"
    # Read by memweb.registry like any app's: webhook retries and jobs whose Celery message was lost,
    # and sign-in/API-key failure counters whose window has ended.
    worker_beats: tuple = ("memweb.webhooks.deliveries_resend_overdue", "memweb.jobs.jobs_resend_stale",
                           "memweb.auth.auth_failures_prune")

    def ready(self):
        import memweb.celery  # noqa: F401 - binds @shared_task to memweb's app in every Django process
        from memweb.roles import roles_sync

        post_migrate.connect(roles_sync, dispatch_uid="memweb.roles_sync")
