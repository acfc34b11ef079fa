"""How far `manage.py load_demo` is, for the notice every page shows while it runs. The loader runs
in another process than the web server (memweb.management.commands.serve), so the progress is a
database row (memweb.models.DemoLoad), written per app demo and deleted when loading ends."""
from memweb.models import DemoLoad


def demo_loading_start(*, parts_total: int) -> None:
    DemoLoad.objects.all().delete()
    DemoLoad.objects.create(parts_total=parts_total, part="")


def demo_loading_step(*, parts_done: int, part: str) -> None:
    DemoLoad.objects.update(parts_done=parts_done, part=part)


def demo_loading_end() -> None:
    DemoLoad.objects.all().delete()


def demo_loading_now() -> DemoLoad | None:
    return DemoLoad.objects.first()


def demo_loading_context(request) -> dict:
    """`demo_loading` for base.html: the progress while the demo loads, for signed-in users."""
    user = getattr(request, "user", None)
    return {"demo_loading": demo_loading_now() if user is not None and user.is_authenticated else None}
