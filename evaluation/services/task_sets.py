"""Task sets in the database: the built-in 130, JSONL export, validated all-or-nothing import, and
the fingerprint that pins what a run was scored against."""
import hashlib
import json
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q, QuerySet

from evaluation.models import Task, TaskSet
from evaluation.shop.task_specs import tasks_generate
from evaluation.shop.validate import spec_errors
from memweb.models import default_workspace_id
from memweb.services import unstorable_problem
from memweb.workspaces import in_workspace

BUILTIN_SET = "shop-130"
BUILTIN_DESCRIPTION = "The built-in shop tasks: 53 household appliances and 77 clothing, generated over the seeded shop."
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


@transaction.atomic
def taskset_builtin_load(*, workspace=None) -> TaskSet:
    """Create or refresh `workspace`'s copy (None: the default workspace's) of the built-in task set
    (idempotent; tasks are updated in place, never deleted, because episodes point at them)."""
    task_set, _ = TaskSet.objects.get_or_create(
        name=BUILTIN_SET, workspace_id=_workspace_id(workspace),
        defaults={"description": BUILTIN_DESCRIPTION, "is_builtin": True})
    existing = {t.external_id: t for t in task_set.tasks.all()}
    for spec in tasks_generate():
        found = existing.get(spec["id"])
        if found is None:
            Task.objects.create(task_set=task_set, external_id=spec["id"], **_task_fields(spec))
        elif found.spec != spec:
            for name, value in _task_fields(spec).items():
                setattr(found, name, value)
            found.save(update_fields=list(_task_fields(spec)))
    return task_set


def _workspace_id(workspace) -> int:
    return workspace.pk if workspace is not None else default_workspace_id()


def tasks_filtered(*, workspace, task_set: TaskSet | None = None, domain: str = "", split: str = "",
                   difficulty: str = "", error_kind: str = "", q: str = "") -> QuerySet:
    """The tasks of `workspace`'s task sets matching every given filter."""
    tasks = in_workspace(Task.objects.select_related("task_set"), workspace)
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
    total_lines: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)

    @property
    def ok(self) -> bool:
        return not self.errors


def tasks_import_jsonl(*, text: str, task_set_name: str, description: str = "", workspace=None) -> ImportReport:
    """Validate every line (JSON, structure, solvability, unique ids) and import only when all pass.

    Lines go into the named set of `workspace` (None: the default one), which is created when
    missing; tasks with an id already in the set are updated. The built-in set is never written by
    an import."""
    name = task_set_name.strip()
    report = ImportReport(task_set_name=name)
    # Editors on Windows start UTF-8 files with a byte-order mark; it is not part of line 1's JSON.
    specs = _checked_lines(text.removeprefix("\ufeff"), name, report)
    if report.errors:
        return report
    with transaction.atomic():
        task_set, _ = TaskSet.objects.get_or_create(name=name, workspace_id=_workspace_id(workspace),
                                                    defaults={"description": description})
        existing = {t.external_id: t for t in task_set.tasks.select_for_update()}
        for spec in specs:
            _upsert(task_set, existing.get(spec["id"]), spec, report)
    return report


def _checked_lines(text: str, name: str, report: ImportReport) -> list[dict]:
    problem = _file_problem(text, name)
    if problem:
        report.errors.append((0, problem))
        return []
    specs, first_line = [], {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        report.total_lines += 1
        spec, problems = _line_spec(line)
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
    if len(text.encode()) > MAX_IMPORT_BYTES:
        return f"the file is larger than {MAX_IMPORT_BYTES // (1024 * 1024)} MB"
    if text.count("\n") > MAX_IMPORT_LINES:
        return f"the file has more than {MAX_IMPORT_LINES} lines"
    return ""


def _line_spec(line: str) -> tuple[dict | None, list[str]]:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, [f"not valid JSON ({exc.msg} at column {exc.colno})"]
    if not isinstance(raw, dict):
        return None, [f"a task must be a JSON object, got {type(raw).__name__}"]
    unstorable = unstorable_problem(raw)
    if unstorable:
        return None, ["{}: {}".format(*unstorable)]
    spec, problems = spec_errors(raw)
    return spec, problems


def _upsert(task_set: TaskSet, found: Task | None, spec: dict, report: ImportReport) -> None:
    fields = _task_fields(spec)
    if found is None:
        Task.objects.create(task_set=task_set, external_id=spec["id"], **fields)
        report.created += 1
        return
    for name, value in fields.items():
        setattr(found, name, value)
    found.save(update_fields=list(fields))
    report.updated += 1
