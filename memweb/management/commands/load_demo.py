"""Load every app's demo data. Each app with a `demo` module (or the module its AppConfig names
as `demo_module`) exposing `load_demo(stdout)` contributes; every loader must be idempotent."""
from importlib import import_module
from importlib.util import find_spec

from django.apps import apps
from django.core.management import BaseCommand

from memweb.demo_loading import demo_loading_end, demo_loading_start, demo_loading_step


class Command(BaseCommand):
    help = "Load the demo data of every app (idempotent: safe to run again)."

    def handle(self, *args, **options):
        loaders = _demo_loaders()
        demo_loading_start(parts_total=len(loaders))
        try:
            for done, (label, module_name) in enumerate(loaders):
                demo_loading_step(parts_done=done, part=label)
                import_module(module_name).load_demo(stdout=self.stdout)
        finally:  # an interrupted load says nothing more: the next start resumes it
            demo_loading_end()


def _demo_loaders() -> list[tuple[str, str]]:
    """(app label, demo module) of every app that has a demo, in app order."""
    modules = [(config.verbose_name, getattr(config, "demo_module", f"{config.name}.demo"))
               for config in apps.get_app_configs()]
    return [(label, module) for label, module in modules if find_spec(module) is not None]
