"""Public benchmarks in memweb, for any environment that is a BenchmarkEnvironment (τ²-bench retail,
ECom-Bench): importing a user's checkout into a task set with its provenance, and replaying lists of
tool calls on a task for anyone to check (`manage.py env_replay`).

An import reads and validates everything before it writes anything; its writes (the shared world,
the task set, its tasks and their versions) run in one transaction, so a refused or failed import
leaves nothing behind. It runs as a memweb job (kind "evaluation.benchmark_import") from the
dashboard and the API, or in-process from `manage.py benchmark_import`.
"""
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction
from django.urls import reverse

from evaluation.environments import UnknownEnvironment, environment, environment_names
from evaluation.environments.benchmark import (
    BenchmarkEnvironment,
    BenchmarkFolderError,
    BenchmarkSource,
    Replay,
    world_forget,
    world_key,
)
from evaluation.environments.benchmark import gold_solution as gold_solution
from evaluation.models import Task, TaskSet
from evaluation.services.benchmark_worlds import world_store
from evaluation.services.task_sets import task_create, task_spec_update
from memweb.jobs import JobFailed, job_start

JOB_KIND = "evaluation.benchmark_import"
PROGRESS_EVERY = 10  # tasks validated between two progress reports
PROBLEMS_SHOWN = 5

Progress = Callable[..., None]  # progress(done, total=None, message="")


class BenchmarkImportError(ValueError):
    """An import refused before anything was written; the message says why."""


def benchmark_names() -> list[str]:
    found = []
    for name in environment_names():
        try:
            if isinstance(environment(name), BenchmarkEnvironment):
                found.append(name)
        except Exception:  # noqa: BLE001 (a third-party package that fails to load is no benchmark here)
            continue
    return found


def benchmark_environment(name: str) -> BenchmarkEnvironment:
    """The benchmark environment registered as `name`; BenchmarkImportError names the ones there are."""
    try:
        world = environment(name)
    except UnknownEnvironment:
        world = None
    if not isinstance(world, BenchmarkEnvironment):
        raise BenchmarkImportError(f"{name!r} is not a benchmark environment; known: "
                                   f"{', '.join(benchmark_names()) or 'none'}")
    return world


@dataclass
class BenchmarkImport:
    task_set: TaskSet
    created: int = 0
    updated: int = 0
    new_versions: int = 0
    splits: dict[str, int] = field(default_factory=dict)


def _no_progress(done: int, total: int | None = None, message: str = "") -> None:
    return None


def benchmark_import(*, benchmark: str, path: str, workspace, task_set_name: str = "",
                     progress: Progress = _no_progress) -> BenchmarkImport:
    """Import the benchmark's tasks from `path` (a checkout, or the JSON form) into `workspace`'s
    task set `task_set_name` (default: the benchmark's name). Tasks already in the set are updated
    in place, with a new version when their gradable content changed; none is deleted."""
    world = benchmark_environment(benchmark)
    progress(0, None, f"Reading {path}")
    try:
        source = world.read_source(Path(path))
    except BenchmarkFolderError as exc:
        raise BenchmarkImportError(str(exc)) from None
    name = (task_set_name or source.benchmark).strip()
    _set_problem(name, world.name, workspace)
    try:
        with transaction.atomic():
            key = world_store(benchmark_name=source.benchmark, world=source.world)
            specs = _validated(world, source, progress)
            task_set, _ = TaskSet.objects.get_or_create(name=name, workspace=workspace, defaults={
                "description": f"{world.label}: {len(specs)} tasks imported from {source.source}."})
            task_set.provenance = _provenance(source, key)
            task_set.save(update_fields=["provenance"])
            return _upsert_all(task_set, specs, world.name, progress)
    except BaseException:
        world_forget(world_key(source.world))  # its row was rolled back: no process may keep playing it
        raise


def _set_problem(name: str, environment_name: str, workspace) -> None:
    max_length = TaskSet._meta.get_field("name").max_length
    if not name or len(name) > max_length:
        raise BenchmarkImportError(f"give the task set a name of 1 to {max_length} characters")
    found = TaskSet.objects.filter(name=name, workspace=workspace).first()
    if found is None:
        return
    if found.is_builtin:
        raise BenchmarkImportError(f"task set {name!r} is built in and cannot be changed by an import; "
                                   "choose another name")
    held = set(found.tasks.exclude(environment=environment_name).values_list("environment", flat=True))
    if held:
        raise BenchmarkImportError(f"task set {name!r} holds {', '.join(sorted(held))} tasks; "
                                   f"import {environment_name} tasks into another set")


def _validated(world: BenchmarkEnvironment, source: BenchmarkSource, progress: Progress) -> list[dict]:
    """Every task through the environment's validator (gold replay included); any problem refuses the import."""
    specs, problems, total = [], [], len(source.tasks)
    for done, raw in enumerate(source.tasks, start=1):
        spec, found = world.spec_errors(raw)
        problems += [f"task {raw.get('id')}: {problem}" for problem in found]
        if spec is not None:
            specs.append(spec)
        if done % PROGRESS_EVERY == 0 or done == total:
            progress(done, total, f"Validated {done} of {total} tasks")
    if problems:
        more = f" (and {len(problems) - PROBLEMS_SHOWN} more)" if len(problems) > PROBLEMS_SHOWN else ""
        raise BenchmarkImportError("; ".join(problems[:PROBLEMS_SHOWN]) + more)
    if not specs:
        raise BenchmarkImportError("the benchmark holds no tasks")
    return specs


def _provenance(source: BenchmarkSource, key: str) -> dict:
    return {"benchmark": source.benchmark, "source": source.source, "layout": source.layout, "commit": source.commit,
            "files": source.files, "licence": source.licence, "world": key}


def _upsert_all(task_set: TaskSet, specs: list[dict], environment_name: str, progress: Progress) -> BenchmarkImport:
    report = BenchmarkImport(task_set=task_set)
    existing = {task.external_id: task for task in task_set.tasks.select_for_update()}
    for done, spec in enumerate(specs, start=1):
        found = existing.get(spec["id"])
        if found is None:
            task_create(task_set=task_set, spec=spec, environment_name=environment_name,
                        provenance={"benchmark": environment_name, "task": spec["id"]})
            report.created += 1
        else:
            report.new_versions += task_spec_update(task=found, spec=spec)
            report.updated += 1
        report.splits[spec["split"]] = report.splits.get(spec["split"], 0) + 1
        if done % PROGRESS_EVERY == 0 or done == len(specs):
            progress(len(specs) + done, 2 * len(specs), f"Stored {done} of {len(specs)} tasks")
    return report


def _is_folder(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long for the file system, a folder it may not search
        return False


def benchmark_import_start(*, benchmark: str, path: str, task_set_name: str = "", workspace, user=None):
    """Check what is cheap to check (the benchmark, the folder, the task set's name), then queue the
    import as a job; BenchmarkImportError says what is wrong."""
    for field_name, value in (("benchmark", benchmark), ("path", path), ("task_set", task_set_name)):
        if "\x00" in value:  # PostgreSQL stores no NUL character
            raise BenchmarkImportError(f"{field_name}: contains a NUL character")
    world = benchmark_environment(benchmark)
    if not path.strip() or not _is_folder(Path(path)):
        raise BenchmarkImportError(f"{path or 'the folder'}: no such folder on the server")
    _set_problem((task_set_name or world.benchmark).strip(), world.name, workspace)
    return job_start(kind=JOB_KIND, title=f"Import of {benchmark} from {path}", workspace=workspace, user=user,
                     payload={"benchmark": benchmark, "path": path, "task_set": task_set_name})


def benchmark_import_job(context, *, benchmark: str, path: str, task_set: str = "") -> dict:
    """The job (memweb.jobs): the import, its progress on the job's card."""
    try:
        report = benchmark_import(benchmark=benchmark, path=path, workspace=context.workspace,
                                  task_set_name=task_set, progress=context.progress)
    except BenchmarkImportError as exc:
        raise JobFailed(str(exc)) from None
    return {"task_set": report.task_set.name, "task_set_id": report.task_set.pk, "created": report.created,
            "updated": report.updated, "new_versions": report.new_versions, "splits": report.splits,
            "url": f"{reverse('evaluation:task_list')}?task_set={report.task_set.pk}"}


# ---- replay --------------------------------------------------------------------------------------

def replay_task(*, benchmark: str, task_id: str, workspace=None, task_set_name: str = "",
                source: BenchmarkSource | None = None) -> dict:
    """The spec of task `task_id`: from `source` when given (a folder read for the occasion, its
    world stored), else from the imported tasks (the named set, or any set of `workspace`)."""
    world = benchmark_environment(benchmark)
    if source is not None:
        found = next((spec for spec in source.tasks if spec["id"] == task_id), None)
        if found is None:
            raise BenchmarkImportError(f"{benchmark} has no task {task_id!r} in that folder")
        return found
    tasks = Task.objects.filter(environment=world.name, external_id=task_id).order_by("task_set__name")
    if workspace is not None:
        tasks = tasks.filter(task_set__workspace=workspace)
    if task_set_name:
        tasks = tasks.filter(task_set__name=task_set_name)
    task = tasks.first()
    if task is None:
        raise BenchmarkImportError(f"no imported {benchmark} task {task_id!r}; import the benchmark first "
                                   f"(manage.py benchmark_import {benchmark} --from PATH) or pass --from PATH")
    return task.spec


def source_for_replay(*, benchmark: str, path: str) -> BenchmarkSource:
    """The benchmark read from a folder, its world stored so its tasks can be played."""
    try:
        source = benchmark_environment(benchmark).read_source(Path(path))
    except BenchmarkFolderError as exc:
        raise BenchmarkImportError(str(exc)) from None
    world_store(benchmark_name=source.benchmark, world=source.world)
    return source


def calls_problem(calls) -> str:
    """Why a list of tool calls cannot be replayed ("" when it can)."""
    if not isinstance(calls, list):
        return "the actions must be a JSON list of {name, arguments} objects"
    for number, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) \
                or not isinstance(call.get("arguments", {}), dict):
            return f"action {number} must be an object with a name (string) and arguments (object)"
    return ""


def replay(*, benchmark: str, spec: dict, calls: list[dict], replies: list[str]) -> Replay:
    return benchmark_environment(benchmark).replay(task=spec, calls=calls, replies=tuple(replies))
