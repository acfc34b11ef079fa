"""Launching a run: validate everything first, then write the run, its bank and its trials in one
transaction and queue its start when that transaction commits."""
from dataclasses import dataclass
from typing import Literal

import pydantic
from django.db import transaction

from evaluation.configs import AgentConfig, CustomerConfig
from evaluation.models import Domain, Split, Task, TaskSet
from evaluation.runs.models import EvaluationRun, MemoryMode, Trial
from evaluation.runs.services.dispatch import work_send
from evaluation.services import BUILTIN_SET
from memweb.llm import role_config
from orbs.dmrm.services import dmrm_memory_copy, dmrm_settings_get
from orbs.models import MemoryBank
from orbs.services import bank_export, bank_get_or_create, bank_import, bank_resolve

MAX_TRIALS = 100
MAX_CONCURRENCY = 32
MAX_TURNS = 50
BANK_NAME_CHARS = 100


class DMRMParams(pydantic.BaseModel):
    """DMRM's parameters for the run's bank (the DMRM settings page documents each)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    alpha: float = pydantic.Field(default=0.5, ge=0.0, le=1.0, description="Learning rate α of the Q update")
    gamma: float = pydantic.Field(default=0.9, ge=0.0, le=1.0, description="Discount γ")
    c_max: int = pydantic.Field(default=512, ge=16, le=8000, description="Token budget C_max")
    n_success: int = pydantic.Field(default=2, ge=1, le=100,
                                    description="Successful trajectories before the source memory is suppressed")
    suppression_mode: Literal["disable", "down_weight"] = "disable"
    source_weight: float = pydantic.Field(default=0.5, ge=0.0, le=1.0, description="Down-weight factor")


class RunSpec(pydantic.BaseModel):
    """Everything a launch needs; the API takes it as its body, the launch form builds it."""

    model_config = pydantic.ConfigDict(extra="forbid")

    name: str = pydantic.Field(min_length=1, max_length=200)
    task_set: str = pydantic.Field(default="", max_length=100, description="Task set name; the built-in set when empty")
    domain: str = ""
    split: str = ""
    task_ids: list[str] = pydantic.Field(default_factory=list, description="External task ids; empty = all selected")
    agent: AgentConfig = pydantic.Field(default_factory=AgentConfig)
    customer: CustomerConfig = pydantic.Field(default_factory=CustomerConfig)
    memory_mode: Literal["none", "memorb", "dmrm", "both"] = "none"
    memory_k: int = pydantic.Field(default=5, ge=1, le=50)
    dmrm: DMRMParams | None = pydantic.Field(
        default=None, description="DMRM runs: the bank's parameters; empty keeps the copied bank's (or the defaults)")
    approved_only: bool = True
    same_customer_only: bool = False
    per_turn: bool = True
    bank_source: str = pydantic.Field(default="", max_length=200, description="Bank to copy; a fresh bank when empty")
    trials: int = pydantic.Field(default=10, ge=1, le=MAX_TRIALS)
    pass_k: int | None = pydantic.Field(default=None, ge=1, description="Largest k of Pass^k to report")
    seed: int = pydantic.Field(default=0, ge=0, le=2**31 - 1)
    max_turns: int = pydantic.Field(default=12, ge=1, le=MAX_TURNS)
    concurrency: int = pydantic.Field(default=4, ge=1, le=MAX_CONCURRENCY)
    review_gate: Literal["auto", "wait"] = "auto"
    feedback_enabled: bool = False


class RunLaunchError(ValueError):
    """Launch refused; `problems` lists (field, message) pairs, nothing was written."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems))


_BOUND_WORDS = {"greater_than_equal": ("at least", "ge"), "less_than_equal": ("at most", "le")}


def _pydantic_problem(error: dict) -> tuple[str, str]:
    field = ".".join(str(part) for part in error["loc"]) or "(body)"
    bound = _BOUND_WORDS.get(error["type"])
    if bound:
        return field, f"must be {bound[0]} {error['ctx'][bound[1]]}, got {error['input']!r}"
    return field, error["msg"]


def run_spec_parse(data: dict | RunSpec) -> RunSpec:
    if isinstance(data, RunSpec):
        return data
    try:
        return RunSpec.model_validate(data)
    except pydantic.ValidationError as exc:
        raise RunLaunchError([_pydantic_problem(e) for e in exc.errors(include_url=False)]) from None


@dataclass
class _Checked:
    task_set: TaskSet | None
    task_pks: list[int]
    bank_source: MemoryBank | None


def _task_set(spec: RunSpec, problems: list) -> TaskSet | None:
    name = spec.task_set or BUILTIN_SET
    found = TaskSet.objects.filter(name=name).first()
    if found is None:
        hint = "; load the built-in tasks on the Tasks page first" if name == BUILTIN_SET else ""
        problems.append(("task_set", f"no task set {name!r}{hint}"))
    return found


def _selection(spec: RunSpec, task_set: TaskSet | None, problems: list) -> list[int]:
    bad = [(field, f"must be one of {', '.join(choices)}, got {value!r}")
           for field, value, choices in (("domain", spec.domain, Domain.values), ("split", spec.split, Split.values))
           if value and value not in choices]
    problems.extend(bad)
    if task_set is None or bad:
        return []
    tasks = Task.objects.filter(task_set=task_set)
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


def _memory(spec: RunSpec, problems: list) -> MemoryBank | None:
    if spec.dmrm is not None and spec.memory_mode not in (MemoryMode.DMRM, MemoryMode.BOTH):
        problems.append(("dmrm", "DMRM parameters are only used when memory_mode is dmrm or both"))
    if not spec.bank_source:
        return None
    if spec.memory_mode == MemoryMode.NONE:
        problems.append(("bank_source", "a bank is only used when the run has memory (memory_mode is not none)"))
        return None
    try:
        return bank_resolve(spec.bank_source)
    except MemoryBank.DoesNotExist:
        problems.append(("bank_source", f"no memory bank {spec.bank_source!r}"))
        return None


def _backends(spec: RunSpec, problems: list) -> None:
    for field, backend, role in (("agent.backend", spec.agent.backend, "actor"),
                                 ("customer.backend", spec.customer.backend, "user_simulator")):
        if backend == "llm" and role_config(role).is_offline:
            problems.append((field, f"the {role} role has no LLM endpoint configured "
                                    f"(MEMWEB_LLM_{role.upper()}_BASE_URL); use the offline backend or configure one"))


def run_launch_check(spec: RunSpec) -> _Checked:
    problems: list[tuple[str, str]] = []
    if spec.pass_k is not None and spec.pass_k > spec.trials:
        problems.append(("pass_k", f"Pass^k with k={spec.pass_k} needs at least {spec.pass_k} trials; "
                                   f"the run has {spec.trials}"))
    task_set = _task_set(spec, problems)
    task_pks = _selection(spec, task_set, problems)
    bank_source = _memory(spec, problems)
    _backends(spec, problems)
    if problems:
        raise RunLaunchError(problems)
    return _Checked(task_set, task_pks, bank_source)


def _run_bank(run: EvaluationRun, source: MemoryBank | None) -> MemoryBank:
    """A bank of the run's own: fresh, or a copy of `source` through its export (Orbs, vectors,
    history) plus its DMRM memory."""
    name = f"run #{run.pk} · {run.name}"[:BANK_NAME_CHARS]
    if source is None:
        return bank_get_or_create(name=name, description=f"Memory of evaluation run #{run.pk}.",
                                  retrieval_k=run.memory_k, approved_only=False)
    report = bank_import(lines=bank_export(bank=source), name=name)
    if not report.ok:
        first = report.errors[0]
        raise RunLaunchError([("bank_source", f"copying bank {source.name!r} failed at line {first['line']}, "
                                              f"{first['field']}: {first['message']}")])
    bank = MemoryBank.objects.get(name=name)
    dmrm_memory_copy(source=source, target=bank)
    return bank


def _dmrm_configure(run: EvaluationRun, spec: RunSpec) -> dict:
    """Apply the run's DMRM parameters to its bank; the parameters in force, to keep on the run.
    The run's "approved only" then also gates the copied source memory."""
    settings = dmrm_settings_get(bank=run.bank)
    for name, value in (spec.dmrm.model_dump() if spec.dmrm else {}).items():
        setattr(settings, name, value)
    settings.save()
    MemoryBank.objects.filter(pk=run.bank_id).update(approved_only=spec.approved_only)
    return {name: getattr(settings, name) for name in DMRMParams.model_fields}


def _scripted(spec: RunSpec) -> bool:
    return spec.agent.backend == "scripted" or spec.customer.backend == "agenda"


def run_launch(*, spec: RunSpec | dict, user=None, executor: str = EvaluationRun.Executor.CELERY) -> EvaluationRun:
    """Validate, create the run with its bank and trials in one transaction, and queue its start.
    Raises RunLaunchError naming each bad field; nothing is written then."""
    spec = run_spec_parse(spec)
    checked = run_launch_check(spec)
    with transaction.atomic():
        run = EvaluationRun.objects.create(
            name=spec.name, task_set=checked.task_set, task_domain=spec.domain, task_split=spec.split,
            task_ids=spec.task_ids, task_pks=checked.task_pks, agent_config=spec.agent.model_dump(),
            customer_config=spec.customer.model_dump(), memory_mode=spec.memory_mode, memory_k=spec.memory_k,
            memory_approved_only=spec.approved_only, memory_same_customer_only=spec.same_customer_only,
            memory_per_turn=spec.per_turn, bank_copied_from=checked.bank_source.name if checked.bank_source else "",
            trials=spec.trials, pass_k=spec.pass_k, seed=spec.seed, max_turns=spec.max_turns,
            concurrency=spec.concurrency, review_gate=spec.review_gate, feedback_enabled=spec.feedback_enabled,
            episodes_total=len(checked.task_pks) * spec.trials, scripted=_scripted(spec),
            agent_backend=spec.agent.backend, created_by=user, executor=executor)
        if spec.memory_mode != MemoryMode.NONE:
            run.bank = _run_bank(run, checked.bank_source)
            if run.uses_dmrm:
                run.dmrm_config = _dmrm_configure(run, spec)
            run.save(update_fields=["bank", "dmrm_config"])
        Trial.objects.bulk_create([Trial(run=run, number=n) for n in range(1, spec.trials + 1)])
        work_send("start", run_id=run.pk)
    return run

