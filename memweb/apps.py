from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MemwebConfig(AppConfig):
    name = "memweb"
    verbose_name = "memweb infrastructure"

    def ready(self):
        from memweb.roles import roles_sync

        post_migrate.connect(roles_sync, dispatch_uid="memweb.roles_sync")
