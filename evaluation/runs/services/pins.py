"""What a run was scored against, pinned at launch, and whether it still is what its tasks and the
reward code say today.

A run pins the version and content hash of each of its tasks (RunTaskPin), the reward code version
(its environment's reward_version, with a hash of its source), the agent's and customer's
configuration (backend, model, a hash of their prompt templates), with feedback on the simulated
user's critic, scorer and reviser the same way, and its starting memory
(orbs.services.bank_snapshot). A run is *stale* when a task it was scored against has a newer
version now, or the reward code a newer version: its scores answer an older question. A re-grade
(regrade.py) scores its stored trajectories again; it is *current* while nothing changed since.
"""
import hashlib

from django.db.models import (
    BooleanField,
    Case,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)

from evaluation.configs import AgentBackend
from evaluation.environments import DEFAULT_ENVIRONMENT, Environment, UnknownEnvironment, environment, environments
from evaluation.environments.content import canonical_json
from evaluation.feedback.models import CalibrationSetting
from evaluation.feedback.prompts import feedback_prompt_hash
from evaluation.feedback.services.critique import CRITIQUE_ROLE
from evaluation.feedback.services.revision import REVISION_ROLE
from evaluation.feedback.services.score import SCORER_ROLE
from evaluation.llm_backends import prompt_template_hash
from evaluation.models import Task, TaskVersion
from evaluation.runs.models import EvaluationRun, RunRegrade, RunTaskPin
from evaluation.vocabulary import EvaluationLLMRole
from memweb.llm import role_config
from orbs.services import bank_snapshot


def run_environment(run: EvaluationRun) -> Environment:
    """The environment the run's tasks are played in (a run's tasks share one)."""
    name = Task.objects.filter(pk__in=run.task_pks).values_list("environment", flat=True).first()
    return environment(name or DEFAULT_ENVIRONMENT)


def _backend_pin(config: dict, role: str, world: Environment) -> dict:
    """An LLM backend's model and prompt-template hash; a scripted one has neither."""
    llm = config.get("backend") == AgentBackend.LLM
    return {"backend": config.get("backend"), "model": role_config(role).model if llm else None,
            "prompt_hash": prompt_template_hash(role, environment_name=world.name) if llm else None,
            "config_hash": hashlib.sha256(canonical_json(config).encode()).hexdigest()}


def _feedback_pin(run: EvaluationRun) -> dict | None:
    """The simulated user's critic, scorer and reviser (feedback runs): backend, model and a hash of
    their prompt templates, since an LLM judge's scores move with its prompts as an agent's do."""
    if not run.run_spec.feedback_enabled:
        return None
    use_llm = CalibrationSetting.current().params().use_llm
    pins = {}
    for part, role in (("critique", CRITIQUE_ROLE), ("scorer", SCORER_ROLE), ("revision", REVISION_ROLE)):
        llm = use_llm and not role_config(role).is_offline
        pins[part] = {"backend": "llm" if llm else "scripted", "model": role_config(role).model if llm else None,
                      "prompt_hash": feedback_prompt_hash(part=part) if llm else None}
    return pins


def run_pins_record(*, run: EvaluationRun) -> None:
    """Pin what the run is scored against (at launch, once its bank is prepared)."""
    tasks = Task.objects.filter(pk__in=run.task_pks).values_list("pk", "version", "content_hash")
    RunTaskPin.objects.bulk_create([RunTaskPin(run=run, task_id=pk, version=version, content_hash=content_hash)
                                    for pk, version, content_hash in tasks])
    world = run_environment(run)
    run.reward_version = world.reward_version
    run.pins = {"agent": _backend_pin(run.run_spec.agent.model_dump(mode="json"), EvaluationLLMRole.ACTOR, world),
                "customer": _backend_pin(run.run_spec.customer.model_dump(mode="json"),
                                         EvaluationLLMRole.USER_SIMULATOR, world),
                "reward": {"version": world.reward_version, "source_hash": world.reward_source_hash()},
                "memory": bank_snapshot(bank=run.bank) if run.bank_id else None, "feedback": _feedback_pin(run)}
    run.save(update_fields=["pins", "reward_version"])


def _task_changes(pairs: list[tuple[RunTaskPin, int | None]]) -> list[dict]:
    """Per (pin, version scored against) whose task has moved on: the versions and what changed (each
    gradable part named as its environment's `content_labels` says)."""
    moved = [(pin, version) for pin, version in pairs if version != pin.task.version]
    specs = dict(((task_id, number), spec) for task_id, number, spec in TaskVersion.objects.filter(
        task_id__in=[pin.task_id for pin, _ in moved]).values_list("task_id", "number", "spec"))
    return [{"task": pin.task.external_id, "task_id": pin.task_id, "pinned": version, "current": pin.task.version,
             "fields": _changed_parts(pin.task, specs.get((pin.task_id, version), {}))}
            for pin, version in sorted(moved, key=lambda item: item[0].task.external_id)]


def _changed_parts(task: Task, pinned_spec: dict) -> list[str]:
    world = environment(task.environment)
    return [world.content_labels[group] for group in world.content_changes(pinned_spec, task.spec)]


def _reward_change(version: int | None, current: int) -> dict | None:
    return {"pinned": version, "current": current} if version is not None and version < current else None


def _staleness(run: EvaluationRun, pairs, reward_version: int | None) -> dict:
    """Unknown (never "stale", `unknown` saying why) while the run's environment is not installed: its
    content and reward cannot be compared, and the run's pages must still open."""
    try:
        current_reward = run_environment(run).reward_version
    except UnknownEnvironment as missing:
        return {"stale": False, "tasks": [], "reward": None, "unknown": str(missing)}
    tasks, reward = _task_changes(pairs), _reward_change(reward_version, current_reward)
    return {"stale": bool(tasks or reward), "tasks": tasks, "reward": reward}


def _pins(run: EvaluationRun) -> list[RunTaskPin]:
    return list(run.task_pins.select_related("task").order_by("task__external_id"))


def run_staleness(*, run: EvaluationRun) -> dict:
    """Whether the run's own scores are stale: `tasks` lists each task with a newer version (task,
    pinned and current version, the `fields` that changed: instruction, gold actions, look-ups,
    outputs), `reward` the reward versions when the reward code moved on. A run without pins
    (launched before them, or imported) is never called stale: `pinned` says so."""
    pins = _pins(run)
    return {**_staleness(run, [(pin, pin.version) for pin in pins], run.reward_version), "pinned": bool(pins)}


def run_regrade_latest(*, run: EvaluationRun) -> RunRegrade | None:
    return run.regrades.order_by("-created_at", "-pk").first()


def run_regrade_current(*, run: EvaluationRun) -> RunRegrade | None:
    """The run's latest re-grade when it scored against the current versions of every task and reward."""
    regrade = run_regrade_latest(run=run)
    if regrade is None:
        return None
    moved = _staleness(run, [(pin, pin.regraded_version) for pin in _pins(run)], regrade.reward_version)
    return None if moved["stale"] else regrade


def change_summary(staleness: dict) -> str:
    """One line for people: "shop-app-001 v1 → v2 (gold actions); reward code v1 → v2"."""
    parts = [f"{change['task']} v{change['pinned']} → v{change['current']} ({', '.join(change['fields']) or 'content'})"
             for change in staleness["tasks"]]
    if staleness["reward"]:
        parts.append(f"reward code v{staleness['reward']['pinned']} → v{staleness['reward']['current']}")
    return "; ".join(parts)


def runs_staleness_annotate(runs: QuerySet) -> QuerySet:
    """Each run with `stale` (its own scores are against an older task or reward version) and
    `regraded` (a re-grade against every current version exists), for lists."""
    task_moved = RunTaskPin.objects.filter(run=OuterRef("pk")).exclude(version=F("task__version"))
    regrade_moved = RunTaskPin.objects.filter(run=OuterRef("pk")).exclude(regraded_version=F("task__version"))
    regrade_now = RunRegrade.objects.filter(run=OuterRef("pk"), reward_version=OuterRef("current_reward_version"))
    return runs.annotate(current_reward_version=_current_reward_version()).annotate(
        # Unpinned runs (reward_version null) are not stale: the null test keeps the OR from being NULL.
        stale=ExpressionWrapper(Q(Exists(task_moved)) | Q(reward_version__isnull=False,
                                                          reward_version__lt=F("current_reward_version")),
                                output_field=BooleanField()),
        regraded=ExpressionWrapper(Q(Exists(regrade_now)) & ~Q(Exists(regrade_moved)), output_field=BooleanField()))


def _current_reward_version() -> Case:
    """Each run's current reward version, as SQL: that of the environment its pinned tasks are in."""
    return Case(*[When(Exists(RunTaskPin.objects.filter(run=OuterRef("pk"), task__environment=world.name)),
                       then=Value(world.reward_version)) for world in environments()],
                default=Value(environment(DEFAULT_ENVIRONMENT).reward_version))


def run_pins_out(*, run: EvaluationRun) -> dict:
    """The pins as the API and the export show them: each task's version and hash (and the version its
    latest re-grade used), the reward version, configuration and memory pins."""
    tasks = [{"task": pin.task.external_id, "version": pin.version, "content_hash": pin.content_hash,
              "regraded_version": pin.regraded_version} for pin in _pins(run)]
    return {"tasks": tasks, "reward_version": run.reward_version, **run.pins}
