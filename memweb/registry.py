"""What the apps contribute to memweb's shared infrastructure, declared on their AppConfig.

memweb sits at the bottom of the stack and imports nothing above it, yet its navigation, home
page, worker heartbeat and role groups need things only the apps know. Each app declares them as
class attributes of its AppConfig and names functions by dotted path, resolved when used:

    nav_items = (("Runs", "evaluation:run_list", ("operator",)),)
    home_counts = (("Runs in progress", "evaluation.runs.services.runs_count_active", ("operator",), url_name),)
    home_charts = (("Success rate by model", "evaluation.runs.services.dashboard.success_by_model", ("operator",)),)
    worker_beats = ("evaluation.runs.services.runs_watch_overdue",)
    trajectory_sources = (("episodes", "evaluation.services.trajectories_of_domain"),)
    role_permissions = {"operator": ("evaluation.view_task", ...)}
    bank_file_parts = ("orbs.dmrm.services.transfer",)
    job_kinds = (("orbs.bank_import", "orbs.services.transfer.bank_import_job"),)
    erasure_hooks = (("evaluation_episodes", "evaluation.services.erasure.episode_memories_scrub"),)
    history_kinds = ("orbs.services.history.REVIEW_EVENT",)
    study_sources = (("Evaluation runs", "evaluation:run_list"),)
    bank_checks = ("orbs.services.banks.bank_slug_known",)

A worker beat is called on every worker heartbeat with no arguments. A trajectory source is
called as `source(domain=..., limit=...)` and returns trajectory dicts (orbs.schemas.TrajectoryIn)
of finished episodes; orbs' DMRM source-memory builder reads its episodes through one.
A bank file part is a module that adds its own lines to a bank's JSONL file (orbs.services.transfer
describes what it provides), so a memory above orbs travels with the bank.
A job kind names the function a background job of that kind runs on a worker (memweb.jobs): it is
called as `function(job_context, **payload)` and returns the job's result.
An erasure hook is called as `hook(bank=..., orb_ids=[...])` inside a customer's erasure
(orbs.services.erasure) and removes the copies of those Orbs' text its app keeps; it returns how
many rows it changed, which the erasure's audit record counts under the hook's name.
A history kind names a table whose rows join their bank's hash chain (orbs.services.history.HistoryKind
describes it), so a memory above orbs has its records chained with the bank's.
A bank check is called as `check(slug=..., workspace_id=...)` and says whether that workspace has a
memory bank of that slug (webhooks name banks by slug).
A study source is a page (label, URL name) from which conversations are added to annotation
campaigns; annotation links to it without knowing the app behind it.
"""
from collections.abc import Callable
from importlib import import_module
from types import ModuleType

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse
from django.utils.module_loading import import_string


def declared(attribute: str) -> list[tuple[str, object]]:
    """(app name, entry) for every entry of `attribute` on every installed app, in app order."""
    return [(config.name, entry) for config in apps.get_app_configs() for entry in getattr(config, attribute, ())]


def declared_tuples(attribute: str, sizes: tuple[int, ...]) -> list[tuple]:
    """The entries of `attribute`, each checked to be a tuple of one of `sizes` items."""
    found = []
    for app, entry in declared(attribute):
        if not isinstance(entry, tuple) or len(entry) not in sizes:
            raise ImproperlyConfigured(
                f"{app}: each entry of {attribute} must be a tuple of {' or '.join(map(str, sizes))} items, got {entry!r}"
            )
        found.append(entry)
    return found


def role_permissions(role: str) -> list[str]:
    """The "app_label.codename" permissions the apps grant to `role`'s group."""
    return [perm for config in apps.get_app_configs() for perm in getattr(config, "role_permissions", {}).get(role, ())]


def worker_beats() -> list[Callable[[], object]]:
    return [import_string(path) for _, path in declared("worker_beats")]


def trajectory_source(name: str) -> Callable[..., list[dict]]:
    """The trajectory source an app registered under `name`."""
    sources = dict(declared_tuples("trajectory_sources", (2,)))
    if name not in sources:
        raise ImproperlyConfigured(f"no installed app provides the trajectory source {name!r}")
    return import_string(sources[name])


def outcome_source(name: str) -> Callable[..., dict[str, list]]:
    """The stored-outcomes source an app registered under `name` (a success matrix by id)."""
    sources = dict(declared_tuples("outcome_sources", (2,)))
    if name not in sources:
        raise ImproperlyConfigured(f"no installed app provides the outcome source {name!r}")
    return import_string(sources[name])


def bank_file_parts() -> list[ModuleType]:
    """The modules that carry a memory of their own in a bank's file, in app order."""
    return [import_module(path) for _, path in declared("bank_file_parts")]


def job_function(kind: str) -> Callable[..., dict]:
    """The function an app registered for background jobs of `kind` (memweb.jobs)."""
    kinds = dict(declared_tuples("job_kinds", (2,)))
    if kind not in kinds:
        raise ImproperlyConfigured(f"no installed app provides the job kind {kind!r}")
    return import_string(kinds[kind])


def erasure_hooks() -> list[tuple[str, Callable[..., int]]]:
    """(name, function) of every erasure hook, in app order."""
    return [(name, import_string(path)) for name, path in declared_tuples("erasure_hooks", (2,))]


def history_kinds() -> list:
    """The chained tables' kinds (orbs.services.history.HistoryKind), in app order."""
    return [import_string(path) for _, path in declared("history_kinds")]


def study_sources() -> list[tuple[str, str]]:
    """(label, URL) of every page that adds conversations to annotation campaigns."""
    return [(label, reverse(url_name)) for label, url_name in declared_tuples("study_sources", (2,))]


def bank_known(*, slug: str, workspace_id: int) -> bool:
    """Whether an app keeping memory banks has one called `slug` in that workspace."""
    return any(import_string(path)(slug=slug, workspace_id=workspace_id) for _, path in declared("bank_checks"))
