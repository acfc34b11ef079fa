"""Task sets in the database: each environment's built-in set (the shop's 130), JSONL export,
validated all-or-nothing import, task versions (a change of a task's gradable content makes a new
one) and the fingerprint of a selection. A task set's tasks share one environment, which validates,
hashes and plays them (evaluation.environments)."""
import hashlib
import json
import re
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q, QuerySet

from evaluation.environments import DEFAULT_ENVIRONMENT, Environment, UnknownEnvironment, environment, environments
from evaluation.models import Task, TaskSet, TaskVersion
from memweb.jsonl import LineRefused, line_object, line_value, numbered_lines, text_size_problem
from memweb.models import default_workspace_id
from memweb.problem_report import ProblemReport, problem_report
from memweb.services import unstorable_problem

BUILTIN_SET = "shop-130"  # the shop environment's builtin_set_name
MAX_IMPORT_LINES = 5000
MAX_IMPORT_BYTES = 5 * 1024 * 1024


def task_summary(spec: dict) -> str:
    """One line for lists: the customer's intents in order, and whether they lack the order number."""
    kinds = " → ".join(intent["kind"].replace("_", " ") for intent in spec["intents"])
    return kinds + (" (no order number)" if "order_id" in spec.get("unknown", ()) else "")


def tasks_fingerprint(*, task_pks: list[int]) -> str:
    """A hash of the tasks' content (ids and specs, gold included): a re-import that edits a task
    in place changes it, so two runs that pinned different fingerprints were not scored alike."""
    content = sorted(Task.objects.filter(pk__in=task_pks).values_list("external_id", "spec"))
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _task_fields(spec: dict) -> dict:
    return {"domain": spec["domain"], "split": spec["split"], "difficulty": spec["difficulty"],
            "error_kinds": spec["error_kinds"], "summary": task_summary(spec)[:300], "spec": spec}


def task_create(*, task_set: TaskSet, spec: dict, provenance: dict | None = None,
                environment_name: str = DEFAULT_ENVIRONMENT) -> Task:
    """A new task of `environment_name` at version 1; `provenance` names the run episode a copied task
    came from."""
    return tasks_create(task_set=task_set, specs=[spec], provenance=provenance, environment_name=environment_name)[0]


def tasks_create(*, task_set: TaskSet, specs: list[dict], provenance: dict | None = None,
                 environment_name: str = DEFAULT_ENVIRONMENT) -> list[Task]:
    """New tasks at version 1, written in two statements whatever their number (a set of a hundred
    tasks is loaded for every workspace, and by many tests)."""
    world = environment(environment_name)
    tasks = Task.objects.bulk_create([
        Task(task_set=task_set, external_id=spec["id"], content_hash=world.content_hash(spec),
             environment=environment_name, provenance=provenance or {}, **_task_fields(spec)) for spec in specs])
    TaskVersion.objects.bulk_create([TaskVersion(task=task, number=1, content_hash=task.content_hash, spec=task.spec)
                                     for task in tasks])
    return tasks


def task_spec_update(*, task: Task, spec: dict) -> bool:
    """Replace a task's spec (an edit or a re-import). When its gradable content changed, the task gets
    a new version and the old version's spec stays in TaskVersion; a change of labels only (split,
    difficulty...) or identical content keeps the version. Returns whether a version was made."""
    content_hash = environment(task.environment).content_hash(spec)
    new_version = content_hash != task.content_hash
    if new_version:
        task.version, task.content_hash = task.version + 1, content_hash
        TaskVersion.objects.create(task=task, number=task.version, content_hash=content_hash, spec=spec)
    fields = _task_fields(spec)
    for name, value in fields.items():
        setattr(task, name, value)
    task.save(update_fields=[*fields, "version", "content_hash"])
    return new_version


@transaction.atomic
def taskset_builtin_load(*, workspace=None, environment_name: str = DEFAULT_ENVIRONMENT) -> TaskSet:
    """Create or refresh `workspace`'s copy (None: the default workspace's) of the environment's
    built-in task set (idempotent; tasks are updated in place, never deleted, because episodes point
    at them)."""
    world = environment(environment_name)
    task_set, _ = TaskSet.objects.get_or_create(
        name=world.builtin_set_name, workspace_id=_workspace_id(workspace),
        defaults={"description": world.builtin_set_description, "is_builtin": True})
    existing = {t.external_id: t for t in task_set.tasks.all()}
    specs = world.builtin_tasks()
    tasks_create(task_set=task_set, specs=[spec for spec in specs if spec["id"] not in existing],
                 environment_name=world.name)
    for spec in specs:
        found = existing.get(spec["id"])
        if found is not None and found.spec != spec:
            task_spec_update(task=found, spec=spec)
    return task_set


def environments_with_builtin_sets() -> list[Environment]:
    """The registered environments that ship a built-in task set (imported benchmarks ship none)."""
    return [world for world in environments() if world.builtin_tasks()]


def _workspace_id(workspace) -> int:
    return workspace.pk if workspace is not None else default_workspace_id()


def tasks_filtered(*, workspace, task_set: TaskSet | None = None, domain: str = "", split: str = "",
                   difficulty: str = "", error_kind: str = "", q: str = "") -> QuerySet:
    """The tasks of `workspace`'s task sets matching every given filter."""
    tasks = Task.objects.select_related("task_set").of(workspace)
    if task_set is not None:
        tasks = tasks.filter(task_set=task_set)
    for name, value in (("domain", domain), ("split", split), ("difficulty", difficulty)):
        if value:
            tasks = tasks.filter(**{name: value})
    if error_kind:
        tasks = tasks.filter(error_kinds__contains=[error_kind])
    if q.strip():
        text = q.strip()
        tasks = tasks.filter(Q(external_id__icontains=text) | Q(summary__icontains=text)
                             | Q(spec__persona__name__icontains=text) | Q(spec__customer_id__iexact=text))
    return tasks.order_by("task_set__name", "external_id")


def tasks_export_jsonl(*, task_set: TaskSet) -> str:
    """One task spec per line, in id order; `tasks_import_jsonl` reads it back."""
    lines = [json.dumps(spec, ensure_ascii=False) for spec in
             task_set.tasks.order_by("external_id").values_list("spec", flat=True)]
    return "\n".join(lines) + ("\n" if lines else "")


@dataclass
class ImportReport:
    task_set_name: str
    created: int = 0
    updated: int = 0
    new_versions: int = 0  # updated tasks whose gradable content changed
    total_lines: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)
    ids: dict[int, str] = field(default_factory=dict)  # line number -> the task id it gives, for the report

    @property
    def ok(self) -> bool:
        return not self.errors

    def problem_report(self) -> ProblemReport:
        return problem_report((self._record(line), *_field_reason(reason)) for line, reason in self.errors)

    def _record(self, line: int) -> str:
        if not line:
            return "the file"
        task_id = self.ids.get(line)
        return f"task on line {line}" + (f" (id: {task_id})" if task_id else "")


# A structural problem reads "persona.name: Field required" (the shop's validator, for one); the
# others are sentences about the whole task.
_FIELD_REASON = re.compile(r"([A-Za-z_]\w*(?:\.\w+)*): (.+)", re.DOTALL)


def _field_reason(reason: str) -> tuple[str, str]:
    found = _FIELD_REASON.fullmatch(reason)
    return (found[1], found[2]) if found else ("", reason)


def tasks_import_jsonl(*, text: str, task_set_name: str, description: str = "", workspace=None,
                       environment_name: str = DEFAULT_ENVIRONMENT) -> ImportReport:
    """Validate every line (JSON, structure, solvability by `environment_name`'s validator, unique
    ids) and import only when all pass.

    Lines go into the named set of `workspace` (None: the default one), which is created when
    missing; tasks with an id already in the set are updated, and get a new version when their
    gradable content changed. The built-in set is never written by an import, nor a set of tasks of
    another environment."""
    name = task_set_name.strip()
    report = ImportReport(task_set_name=name)
    world = _import_environment(environment_name, name, workspace, report)
    specs = _checked_lines(text, name, report, world) if world is not None else []
    if report.errors:
        return report
    with transaction.atomic():
        task_set, _ = TaskSet.objects.get_or_create(name=name, workspace_id=_workspace_id(workspace),
                                                    defaults={"description": description})
        existing = {t.external_id: t for t in task_set.tasks.select_for_update()}
        for spec in specs:
            _upsert(task_set, existing.get(spec["id"]), spec, report, world.name)
    return report


def _import_environment(name: str, task_set_name: str, workspace, report: ImportReport) -> Environment | None:
    """The environment an import validates with, or None with the reason reported."""
    try:
        world = environment(name)
    except UnknownEnvironment as exc:
        report.errors.append((0, f"environment: {exc}"))
        return None
    held = set(Task.objects.filter(task_set__name=task_set_name, task_set__workspace_id=_workspace_id(workspace))
               .exclude(environment=world.name).values_list("environment", flat=True))
    if held:
        report.errors.append((0, f"environment: task set {task_set_name!r} holds {', '.join(sorted(held))} tasks; "
                                 f"import {world.name} tasks into another set"))
        return None
    return world


def _checked_lines(text: str, name: str, report: ImportReport, world: Environment) -> list[dict]:
    problem = _file_problem(text, name)
    if problem:
        report.errors.append((0, problem))
        return []
    specs, first_line = [], {}
    for number, line in numbered_lines(text):
        report.total_lines += 1
        spec, problems = _line_spec(line, world)
        report.ids[number] = _given_id(line)
        if spec is not None and spec["id"] in first_line:
            problems.append(f"duplicate id {spec['id']!r} (first on line {first_line[spec['id']]})")
        report.errors += [(number, reason) for reason in problems]
        if spec is not None and not problems:
            first_line[spec["id"]] = number
            specs.append(spec)
    if not report.total_lines and not report.errors:
        report.errors.append((0, "the file holds no tasks"))
    return specs


def _file_problem(text: str, name: str) -> str:
    if not name:
        return "task set: a name is required"
    if TaskSet.objects.filter(name=name, is_builtin=True).exists():
        return f"task set {name!r} is built in and cannot be changed by an import; choose another name"
    return text_size_problem(text, max_bytes=MAX_IMPORT_BYTES, max_lines=MAX_IMPORT_LINES) or ""


def _given_id(line: str) -> str:
    """The id a line gives, however broken the rest of it is ("" when it gives none)."""
    try:
        raw = line_value(line)
    except LineRefused:  # not JSON, or nested too deep (_line_spec says which)
        return ""
    task_id = raw.get("id") if isinstance(raw, dict) else None
    return str(task_id)[:100] if isinstance(task_id, str | int) else ""


def _line_spec(line: str, world: Environment) -> tuple[dict | None, list[str]]:
    try:
        raw = line_object(line)
    except LineRefused as refused:
        return None, [str(refused)]
    unstorable = unstorable_problem(raw)
    if unstorable:
        return None, ["{}: {}".format(*unstorable)]
    return world.spec_errors(raw)


def _upsert(task_set: TaskSet, found: Task | None, spec: dict, report: ImportReport, environment_name: str) -> None:
    if found is None:
        task_create(task_set=task_set, spec=spec, environment_name=environment_name)
        report.created += 1
        return
    report.new_versions += task_spec_update(task=found, spec=spec)
    report.updated += 1


@dataclass
class TasksCopied:
    task_set: TaskSet
    created: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)


class TaskCopyError(ValueError):
    pass


@transaction.atomic
def tasks_copy_into(*, task_set_name: str, copies: list[tuple[dict, dict, str]], workspace) -> TasksCopied:
    """Each (spec, provenance, environment name) becomes a task of the `workspace`'s set named, which
    is created when new. A task whose id the set holds already is refused (named in `duplicates`),
    never overwritten."""
    task_set = _copy_target(task_set_name, workspace)
    copied = TasksCopied(task_set=task_set)
    held = set(task_set.tasks.values_list("external_id", flat=True))
    for spec, provenance, environment_name in copies:
        if spec["id"] in held:
            copied.duplicates.append(spec["id"])
            continue
        task_create(task_set=task_set, spec=spec, provenance=provenance, environment_name=environment_name)
        held.add(spec["id"])
        copied.created.append(spec["id"])
    return copied


def _copy_target(name: str, workspace) -> TaskSet:
    name = name.strip()
    max_length = TaskSet._meta.get_field("name").max_length
    if not name or len(name) > max_length:
        raise TaskCopyError(f"give the task set a name of 1 to {max_length} characters")
    task_set, _ = TaskSet.objects.get_or_create(name=name, workspace=workspace,
                                                defaults={"description": "Tasks kept from evaluation runs."})
    if task_set.is_builtin:
        raise TaskCopyError(f"{name} is the built-in set and stays as shipped; choose another set")
    return task_set
