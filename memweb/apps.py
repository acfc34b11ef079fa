from django.apps import AppConfig
from django.conf import settings
from django.core import checks
from django.db.models.signals import post_migrate


class MemwebConfig(AppConfig):
    name = "memweb"
    verbose_name = "memweb infrastructure"
    # Read by memweb.registry like any app's: webhook retries and jobs whose Celery message was lost,
    # and sign-in/API-key failure counters whose window has ended.
    worker_beats: tuple = ("memweb.webhooks.deliveries_resend_overdue", "memweb.jobs.jobs_resend_stale",
                           "memweb.auth.auth_failures_prune")
    # The scope of memweb's own API routes (each app declares its own: memweb.registry.api_scopes).
    api_scopes: tuple = ("memweb.vocabulary.MemwebScope",)

    def ready(self):
        import memweb.celery  # noqa: F401 - binds @shared_task to memweb's app in every Django process
        from memweb.llm.config import read_all_roles
        from memweb.registry import llm_roles, registry_check
        from memweb.roles import roles_sync

        post_migrate.connect(roles_sync, dispatch_uid="memweb.roles_sync")
        checks.register(registry_check, "memweb")
        # The roles are the apps' (memweb.registry.llm_roles), known once every app is loaded, so each
        # role's endpoint settings are read from the environment here rather than in settings.py.
        settings.LLM_ROLES = read_all_roles(llm_roles())
