"""Load every app's demo data. Each app with a `demo` module (or the module its AppConfig names
as `demo_module`) exposing `load_demo(stdout)` contributes; every loader must be idempotent."""
from importlib import import_module
from importlib.util import find_spec

from django.apps import apps
from django.core.management import BaseCommand


class Command(BaseCommand):
    help = "Load the demo data of every app (idempotent: safe to run again)."

    def handle(self, *args, **options):
        for config in apps.get_app_configs():
            module_name = getattr(config, "demo_module", f"{config.name}.demo")
            if find_spec(module_name) is None:
                continue
            import_module(module_name).load_demo(stdout=self.stdout)
