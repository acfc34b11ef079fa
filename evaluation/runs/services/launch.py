"""Launching a run: validate everything first, then write the run, its bank and its trials in one
transaction and queue its start when that transaction commits. A run that starts from a copy of a
bank is written `preparing` and a background job copies the bank, then queues its start."""
from dataclasses import dataclass

from django.core.exceptions import ObjectDoesNotExist
from django.db import transaction
from django.utils import timezone

from evaluation.configs import AgentBackend, CustomerBackend
from evaluation.memory_layers.registry import memory_layer
from evaluation.models import Split, Task, TaskSet
from evaluation.runs.models import EvaluationRun, Trial
from evaluation.runs.services.dispatch import work_send
from evaluation.runs.services.memory import run_bank_copy, run_memory_prepare
from evaluation.runs.services.pins import run_pins_record
from evaluation.runs.services.spec import (
    LLM_CONTEXT_TOKENS,
    SPEC_VERSION,
    RunLaunchError,
    RunSpec,
    run_spec_parse,
    run_spec_stored,
)
from evaluation.runs.services.splits import episodes_planned, split_problems, task_splits_assign
from evaluation.services import BUILTIN_SET, tasks_fingerprint
from evaluation.vocabulary import EvaluationLLMRole
from memweb.jobs import JobContext, JobFailed, job_start
from memweb.llm import role_config
from memweb.models import Job, Workspace, default_workspace_id
from orbs.services import bank_resolve

PREPARE_JOB = "evaluation.run_prepare"


@dataclass
class _Checked:
    task_set: TaskSet | None
    task_pks: list[int]
    bank_source: object | None  # an orbs MemoryBank
    task_splits: dict[str, str]  # held-out runs: task external id -> train or test


def _task_set(spec: RunSpec, workspace, problems: list) -> TaskSet | None:
    name = spec.task_set or BUILTIN_SET
    found = TaskSet.objects.of(workspace).filter(name=name).first()
    if found is None:
        hint = "; load the built-in tasks on the Tasks page first" if name == BUILTIN_SET else ""
        problems.append(("task_set", f"no task set {name!r}{hint}"))
    return found


def _selection(spec: RunSpec, task_set: TaskSet | None, problems: list) -> list[int]:
    if spec.split and spec.split not in Split.values:
        problems.append(("split", f"must be one of {', '.join(Split.values)}, got {spec.split!r}"))
        return []
    if task_set is None:
        return []
    tasks = Task.objects.filter(task_set=task_set)
    domains = sorted(set(tasks.values_list("domain", flat=True)))  # each environment names its own
    if spec.domain and spec.domain not in domains:
        problems.append(("domain", f"must be one of the task set's domains ({', '.join(domains)}), got "
                                   f"{spec.domain!r}"))
        return []
    tasks = tasks.filter(domain=spec.domain) if spec.domain else tasks
    tasks = tasks.filter(split=spec.split) if spec.split else tasks
    if spec.task_ids:
        wanted = set(spec.task_ids)
        tasks = tasks.filter(external_id__in=wanted)
        unknown = wanted - set(tasks.values_list("external_id", flat=True))
        if unknown:
            problems.append(("task_ids", f"not in the selection of task set {task_set.name!r}: "
                                         f"{', '.join(sorted(unknown))}"))
    pks = list(tasks.order_by("external_id").values_list("pk", flat=True))
    if not pks and not spec.task_ids:
        problems.append(("task_ids", f"the task selection is empty (task set {task_set.name!r}, "
                                     f"domain {spec.domain or 'any'}, split {spec.split or 'any'})"))
    return pks


def _memory(spec: RunSpec, workspace, problems: list):
    """The layer's own problems with the spec, and the bank it starts from."""
    layer_problems = memory_layer(spec.memory_mode).launch_problems(spec)
    problems.extend(layer_problems)
    if not spec.bank_source or any(field == "bank_source" for field, _ in layer_problems):
        return None
    try:
        return bank_resolve(spec.bank_source, workspace=workspace)
    except ObjectDoesNotExist:
        problems.append(("bank_source", f"no memory bank {spec.bank_source!r}"))
        return None


def _backends(spec: RunSpec, problems: list) -> None:
    for field, backend, role in (("agent.backend", spec.agent.backend, EvaluationLLMRole.ACTOR),
                                 ("customer.backend", spec.customer.backend, EvaluationLLMRole.USER_SIMULATOR)):
        if backend == AgentBackend.LLM and role_config(role).is_offline:
            problems.append((field, f"the {role} role has no LLM endpoint configured "
                                    f"(MEMWEB_LLM_{role.upper()}_BASE_URL); use the offline backend or configure one"))


def run_launch_check(spec: RunSpec, workspace) -> _Checked:
    """The spec's task set, tasks and starting bank, looked up in `workspace` only; RunLaunchError
    naming each bad field."""
    problems: list[tuple[str, str]] = spec.preset_conflicts() + spec.withholding_conflicts()
    problems.extend(_pass_k_problems(spec.pass_k, spec.trials))
    task_set = _task_set(spec, workspace, problems)
    task_pks = _selection(spec, task_set, problems)
    task_splits = task_splits_assign(spec=spec, tasks=Task.objects.filter(pk__in=task_pks))
    problems.extend(split_problems(spec=spec, splits=task_splits))
    bank_source = _memory(spec, workspace, problems)
    _backends(spec, problems)
    if problems:
        raise RunLaunchError(problems)
    return _Checked(task_set, task_pks, bank_source, task_splits)


def _pass_k_problems(pass_k, trials) -> list[tuple[str, str]]:
    if pass_k is None or pass_k <= trials:
        return []
    return [("pass_k", f"Pass^k with k={pass_k} needs at least {pass_k} trials; the run has {trials}")]


def _typed_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _pass_k_against_typed_trials(data: dict, faulty: set[str]) -> list[tuple[str, str]]:
    """Pass^k against the trials as typed when those are at fault: the default that stands in for
    them in the checks is not what the operator asked for, so it is never quoted."""
    if "pass_k" in faulty or not (_typed_int(data.get("trials")) and _typed_int(data.get("pass_k"))):
        return []
    return _pass_k_problems(data["pass_k"], data["trials"])


def _parsed_for_checks(data: dict | RunSpec) -> tuple[RunSpec | None, list[tuple[str, str]]]:
    """The spec and its own problems. With problems, the spec is parsed again without the fields at
    fault (their defaults stand in) so the database checks still run on the rest and a launch names
    every problem in one answer, not in rounds."""
    try:
        return run_spec_parse(data), []
    except RunLaunchError as exc:
        problems = exc.problems
    faulty = {field.split(".")[0] for field, _ in problems}
    if "trials" in faulty:  # Pass^k is checked against the typed trials here, not against their default
        problems = problems + _pass_k_against_typed_trials(data, faulty)
        faulty.add("pass_k")
    rest = {name: value for name, value in data.items() if name not in faulty}
    rest.setdefault("name", "checked")  # a missing or bad name is reported already; the checks do not read it
    try:
        return run_spec_parse(rest), problems
    except RunLaunchError:
        return None, problems


def run_launch_validate(*, spec: RunSpec | dict, workspace) -> tuple[RunSpec, _Checked]:
    """Every problem of a launch in `workspace` at once, as one RunLaunchError; nothing is written."""
    parsed, problems = _parsed_for_checks(spec)
    checked = None
    if parsed is not None:
        try:
            checked = run_launch_check(parsed, workspace)
        except RunLaunchError as exc:
            problems = problems + exc.problems
    if problems:
        raise RunLaunchError(problems)
    return parsed, checked


def _scripted(spec: RunSpec) -> bool:
    return spec.agent.backend == AgentBackend.SCRIPTED or spec.customer.backend == CustomerBackend.AGENDA


def _in_force(spec: RunSpec) -> RunSpec:
    """The spec as the run keeps it, with what launch decides filled in: an LLM agent gets the paper's 4k
    context window unless the spec names one, with memory or without, so that memory is the only
    difference between the arms; a train-then-test run its number of training trials."""
    agent = spec.agent
    if agent.backend == AgentBackend.LLM and agent.context_tokens is None:
        agent = agent.model_copy(update={"context_tokens": LLM_CONTEXT_TOKENS})
    train_trials = spec.train_trials_resolved() or None
    return spec.model_copy(update={"agent": agent, "train_trials": train_trials})


def run_launch(*, spec: RunSpec | dict, user=None, workspace=None,
               executor: str = EvaluationRun.Executor.CELERY) -> EvaluationRun:
    """Validate, create the run in `workspace` (None: the default one) with its bank and trials in
    one transaction, and queue its start. A run that starts from a copy of a bank is `preparing`
    instead: a job (run_prepare_job) copies the bank and queues the start, since a big bank takes
    longer than a request. Raises RunLaunchError naming each bad field; nothing is written then."""
    workspace = workspace or Workspace.objects.get(pk=default_workspace_id())
    spec, checked = run_launch_validate(spec=spec, workspace=workspace)
    by_job = checked.bank_source is not None and executor == EvaluationRun.Executor.CELERY
    with transaction.atomic():
        run = _run_create(spec, checked, workspace, user, executor, preparing=by_job)
        Trial.objects.bulk_create([Trial(run=run, number=n) for n in range(1, spec.trials + 1)])
        if by_job:
            job_start(kind=PREPARE_JOB, title=f"Memory of run #{run.pk} {run.name}: a copy of “{checked.bank_source.name}”",
                      payload={"run_id": run.pk, "spec": spec.model_dump(mode="json")}, workspace=workspace, user=user)
        else:
            _prepare(run, spec, checked.bank_source)
    return run


def _run_create(spec: RunSpec, checked: _Checked, workspace, user, executor: str, *, preparing: bool) -> EvaluationRun:
    return EvaluationRun.objects.create(
        workspace=workspace, name=spec.name, task_set=checked.task_set, task_pks=checked.task_pks,
        tasks_fingerprint=tasks_fingerprint(task_pks=checked.task_pks), memory_mode=spec.memory_mode,
        spec=run_spec_stored(_in_force(spec)), spec_version=SPEC_VERSION,
        bank_copied_from=checked.bank_source.name if checked.bank_source else "",
        episodes_total=episodes_planned(spec=spec, task_count=len(checked.task_pks), splits=checked.task_splits),
        task_splits=checked.task_splits, scripted=_scripted(spec), agent_backend=spec.agent.backend,
        created_by=user, executor=executor,
        status=EvaluationRun.Status.PREPARING if preparing else EvaluationRun.Status.QUEUED)


def _prepare(run: EvaluationRun, spec: RunSpec, source) -> None:
    """The run's memory and pins, then its start (both inside the caller's transaction)."""
    run_memory_prepare(run=run, spec=spec, source=source)
    run_pins_record(run=run)
    work_send("start", run_id=run.pk)


# --- the bank copy as a background job (memweb.jobs) ----------------------------------------

def run_preparation_job(*, run: EvaluationRun) -> Job | None:
    """The job that copies (or copied) the run's starting bank, if it had one."""
    return Job.objects.filter(kind=PREPARE_JOB, payload__run_id=run.pk).order_by("-pk").first()


def _refused(run: EvaluationRun, message: str) -> JobFailed:
    EvaluationRun.objects.filter(pk=run.pk, status=EvaluationRun.Status.PREPARING).update(
        status=EvaluationRun.Status.FAILED, status_message=message, finished_at=timezone.now())
    return JobFailed(message)


@transaction.atomic
def _set_up(run: EvaluationRun, spec: RunSpec, source, *, copied) -> None:
    """After the copy: the rest of the memory, the pins and the start, at once. A run cancelled
    meanwhile gets its memory and pins, not its start."""
    run_memory_prepare(run=run, spec=spec, source=source, copied=copied)
    run_pins_record(run=run)
    if EvaluationRun.objects.filter(pk=run.pk, status=EvaluationRun.Status.PREPARING).update(
            status=EvaluationRun.Status.QUEUED):
        work_send("start", run_id=run.pk)


def run_prepare_job(context: JobContext, *, run_id: int, spec: dict) -> dict:
    """The job: copy the starting bank (its own transaction, with progress), then the rest of the
    memory, the pins and the start in one more. A re-delivered job finds the copy made, or the run
    queued already, and does nothing twice; a run cancelled meanwhile gets its memory, not its start."""
    run = EvaluationRun.objects.of(context.workspace).filter(pk=run_id).first()
    if run is None:
        raise JobFailed(f"run #{run_id} no longer exists")
    result = {"url": run.get_absolute_url(), "link_text": f"Open run #{run.pk} {run.name}", "run": run.pk}
    if run.bank_id is not None:
        return result  # prepared by an earlier delivery
    parsed = RunSpec.model_validate(spec)
    try:
        source = bank_resolve(parsed.bank_source, workspace=context.workspace)
        _set_up(run, parsed, source, copied=run_bank_copy(run=run, source=source, progress=context.progress))
    except ObjectDoesNotExist:
        raise _refused(run, f"the bank {parsed.bank_source!r} to copy no longer exists") from None
    except RunLaunchError as exc:
        raise _refused(run, str(exc)) from None
    except Exception as exc:  # the job fails; so must the run, or it would stay "preparing" for ever
        raise _refused(run, f"the copy of bank {parsed.bank_source!r} failed: {type(exc).__name__}: {exc}") from exc
    return result
