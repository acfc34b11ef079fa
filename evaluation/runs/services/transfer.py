"""A run's results as JSON or CSV, and JSON results from elsewhere imported as a run (checked in
full first, then written in one transaction, marked imported) so they chart beside memweb's. An
import restores the pins its file carries (what the run was scored against), so its staleness is
known here too, and notes on the run what it could not carry."""
import csv
import io
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import pydantic
from django.db import transaction
from django.utils import timezone

from evaluation.configs import ReflectionInput
from evaluation.feedback.models import EpisodeFeedback
from evaluation.feedback.services import MAX_FEEDBACK_ROUNDS
from evaluation.memory_layers.registry import NO_MEMORY, memory_layer_validate
from evaluation.models import Task, TaskVersion
from evaluation.runs.models import (
    EvaluationMode,
    EvaluationRun,
    FeedbackCalibration,
    FeedbackMemory,
    ReviewGate,
    RunEpisode,
    RunPreset,
    RunTaskPin,
    SplitRule,
    TaskSplit,
    Trial,
)
from evaluation.runs.services.pins import run_pins_out, run_staleness
from evaluation.runs.services.results import CHART_SERIES, run_metrics_compute
from evaluation.runs.services.spec import (
    SPEC_VERSION,
    RunSpec,
    StoredSpecError,
    run_spec_stored,
    spec_as_columns,
    spec_from_columns,
    spec_upgrade,
)
from memweb.errors import problems_of
from memweb.problem_report import ProblemReport, problem_report
from orbs.services import ReflectionStyle

FORMAT = "memweb.evaluation-run"
# 2: the run header carries the run's spec and its version (`spec`, `spec_version`); files of
# version 1 (settings as separate keys) still import.
FORMAT_VERSION = 2
EPISODE_COLUMNS = ("task_id", "trial", "status", "success", "reward", "turns", "tokens", "latency_ms", "error",
                   "episode_id", "split")
MAX_IMPORT_EPISODES = 100_000


FEEDBACK_FIELDS = ("score", "sampled_score", "score_method", "action", "copied", "behavior", "reasoning", "response",
                   "critique_backend", "score_backend", "rounds")


def _feedback_line(row: RunEpisode) -> dict | None:
    """The episode's simulated user feedback: its row's on a played episode, the file's on an imported one."""
    if row.imported_feedback is not None:
        return row.imported_feedback
    feedback = getattr(row.episode, "simulated_feedback", None) if row.episode_id else None
    return {name: getattr(feedback, name) for name in FEEDBACK_FIELDS} if feedback else None


def _episode_line(row: RunEpisode) -> dict:
    return {"task_id": row.task_key, "trial": row.trial.number, "status": row.status, "success": row.success,
            "reward": row.reward, "turns": row.turns, "tokens": row.tokens, "latency_ms": row.latency_ms,
            "error": row.error, "episode_id": row.episode_id, "seed": row.seed, "split": row.split,
            "finished_at": row.finished_at.isoformat() if row.finished_at else None, "feedback": _feedback_line(row)}


# Export headers of format version 1 named three settings otherwise than the run's old columns did.
_HEADER_NAMES = {"memory_same_customer_only": "same_customer_only", "memory_approved_only": "approved_only",
                 "memory_per_turn": "per_turn"}


def _settings_header(spec: RunSpec) -> dict:
    """The settings under the names version-1 files used, for readers of those."""
    return {_HEADER_NAMES.get(name, name): value for name, value in spec_as_columns(spec).items()}


def _run_header(run: EvaluationRun) -> dict:
    return {**_settings_header(run.run_spec), "spec": run_spec_stored(run.run_spec), "spec_version": SPEC_VERSION,
            "name": run.name, "source": run.imported_from or f"memweb run #{run.pk}", "status": run.status,
            "scripted": run.scripted, "agent_backend": run.agent_backend, "memory_mode": run.memory_mode,
            "dmrm_config": run.dmrm_config, "tasks_fingerprint": run.tasks_fingerprint,
            "bank_copied_from": run.bank_copied_from, "task_splits": run.task_splits,
            "created_at": run.created_at.isoformat(), "memory_layer": run.memory_layer.export_header(run),
            "started_at": run.started_at.isoformat() if run.started_at else None,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None}


def _episode_rows(run: EvaluationRun):
    return run.run_episodes.select_related("trial", "episode__simulated_feedback").order_by("trial__number", "task_key")


def run_export_json(*, run: EvaluationRun) -> dict:
    """Everything needed to chart the run elsewhere: settings, one line per episode, metrics; and what
    it was scored against (`pins`, `staleness`). An import restores the pins, matching the task
    versions to the importing server's tasks by id, version and content hash."""
    header = {**_run_header(run), "pins": run_pins_out(run=run), "staleness": run_staleness(run=run)}
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "run": header,
            "episodes": [_episode_line(row) for row in _episode_rows(run)], "metrics": run.metrics}


def _csv(header: tuple[str, ...], rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def run_export_csv(*, run: EvaluationRun, part: Literal["episodes", "metrics"] = "episodes") -> str:
    """One row per episode, or (`part="metrics"`) one row per chart point with its 95% interval."""
    if part == "metrics":
        metrics = run.metrics or {}
        rows = [(name, x, value, low, high)
                for name in CHART_SERIES if name in metrics
                for x, value, low, high in zip(*(metrics[name][c] for c in ("x", "value", "low", "high")))]
        return _csv(("series", "x", "value", "low", "high"), rows)
    return _csv(EPISODE_COLUMNS, ([_episode_line(row)[c] for c in EPISODE_COLUMNS] for row in _episode_rows(run)))


# --- import ----------------------------------------------------------------------------------

class _Line(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")


class ImportedFeedback(_Line):
    score: int = pydantic.Field(ge=1, le=10)
    sampled_score: int = pydantic.Field(ge=1, le=10)
    score_method: Literal[tuple(EpisodeFeedback.ScoreMethod.values)]
    action: Literal[tuple(EpisodeFeedback.Action.values)]
    copied: bool = False
    behavior: Literal["", *EpisodeFeedback.Behavior.values] = ""
    reasoning: str = ""
    response: str = ""
    critique_backend: str = pydantic.Field(default="", max_length=200)
    score_backend: str = pydantic.Field(default="", max_length=200)
    rounds: list[dict] = pydantic.Field(default_factory=list)


class ImportedEpisode(_Line):
    task_id: str = pydantic.Field(min_length=1, max_length=100)
    trial: int = pydantic.Field(ge=1)
    status: Literal["done", "error"]
    success: bool | None = None
    reward: float | None = None
    turns: int | None = pydantic.Field(default=None, ge=0, le=32767)
    tokens: int | None = pydantic.Field(default=None, ge=0)
    latency_ms: int | None = pydantic.Field(default=None, ge=0)
    error: str = ""
    seed: int = pydantic.Field(default=0, ge=0, le=2**63 - 1)
    finished_at: datetime | None = None
    feedback: ImportedFeedback | None = None
    split: Literal["", *TaskSplit.values] = ""

    @pydantic.model_validator(mode="after")
    def _verdict_matches_status(self):
        if self.status == "done" and self.success is None:
            raise ValueError("success must be true or false when status is done")
        if self.status == "error" and self.success is not None:
            raise ValueError("success must be null when status is error (an infrastructure error has no verdict)")
        return self


class ImportedTaskPin(_Line):
    task: str = pydantic.Field(min_length=1, max_length=100)
    version: int = pydantic.Field(ge=1)
    content_hash: str = pydantic.Field(pattern=r"^[0-9a-f]{64}$")


class ImportedPins(_Line):
    """What the exporting server pinned (pins.run_pins_out): kept as it was, the task versions matched
    to this server's tasks."""

    tasks: list[ImportedTaskPin] = pydantic.Field(default_factory=list, max_length=MAX_IMPORT_EPISODES)
    reward_version: int | None = pydantic.Field(default=None, ge=1)
    agent: dict | None = None
    customer: dict | None = None
    reward: dict | None = None
    memory: dict | None = None
    feedback: dict | None = None


class ImportedRun(_Line):
    """What a run header says besides its settings: where it came from and what its launch resolved."""

    name: str = pydantic.Field(min_length=1, max_length=200)
    source: str = pydantic.Field(default="", max_length=200)
    scripted: bool = False
    agent_backend: str = pydantic.Field(default="external", max_length=32)
    dmrm_config: dict = pydantic.Field(default_factory=dict)
    bank_copied_from: str = pydantic.Field(default="", max_length=100)
    tasks_fingerprint: str = pydantic.Field(default="", max_length=64, description="empty: unknown (not memweb's)")
    task_splits: dict[str, Literal[tuple(TaskSplit.values)]] = pydantic.Field(default_factory=dict)
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    pins: ImportedPins | None = pydantic.Field(default=None, description="empty: an older file, staleness unknown")


class ImportedSpecRun(ImportedRun):
    """A header of format version 2: the settings are its spec."""

    spec: dict
    spec_version: int = pydantic.Field(ge=1)


class ImportedColumnsRun(ImportedRun):
    """A header of format version 1: the settings as separate keys, defaults for what older files lack."""

    agent_config: dict = pydantic.Field(default_factory=dict)
    customer_config: dict = pydantic.Field(default_factory=dict)
    memory_mode: str = pydantic.Field(default=NO_MEMORY, max_length=64, description="a registered memory layer")
    memory_k: int = pydantic.Field(default=5, ge=1, le=50)
    same_customer_only: bool = False
    review_gate: Literal[tuple(ReviewGate.values)] = ReviewGate.AUTO
    approved_only: bool = True
    per_turn: bool = True
    withhold_probability: float = pydantic.Field(default=0.0, ge=0.0, le=1.0)
    task_domain: str = pydantic.Field(default="", max_length=16)
    task_split: str = pydantic.Field(default="", max_length=8)
    pass_k: int | None = pydantic.Field(default=None, ge=1, le=100)
    concurrency: int = pydantic.Field(default=4, ge=1, le=32767)
    feedback_enabled: bool = False
    feedback_memory: Literal[tuple(FeedbackMemory.values)] = FeedbackMemory.NONE
    feedback_rounds: int = pydantic.Field(default=1, ge=1, le=MAX_FEEDBACK_ROUNDS)
    # Files written before the setting existed come from runs calibrated on their realised scores.
    feedback_calibration: Literal[tuple(FeedbackCalibration.values)] = FeedbackCalibration.REALISED
    reflection_style: Literal[tuple(ReflectionStyle.values)] = ReflectionStyle.SIMPLE
    # Files exported before the choice existed hold runs reflected with the answer key.
    reflection_input: Literal[tuple(ReflectionInput.values)] = ReflectionInput.ORACLE
    preset: Literal["", *RunPreset.values] = ""
    # Files written before held-out tasks existed replayed every task: replay.
    evaluation_mode: Literal[tuple(EvaluationMode.values)] = EvaluationMode.REPLAY
    split_rule: Literal["", *SplitRule.values] = ""
    test_fraction: float = pydantic.Field(default=0.0, ge=0.0, lt=1.0)
    train_trials: int = pydantic.Field(default=0, ge=0, le=100)
    trials: int = pydantic.Field(ge=1, le=100)
    seed: int = pydantic.Field(default=0, ge=0)
    max_turns: int = pydantic.Field(default=12, ge=1, le=50)

    def columns(self, task_ids: list[str]) -> dict:
        """The header as the old setting columns (spec.spec_from_columns reads those)."""
        header = self.model_dump()
        columns = {column: header[name] for column, name in _HEADER_NAMES.items()}
        return {**header, **columns, "task_ids": task_ids, "task_set": ""}

    @pydantic.field_validator("memory_mode")
    @classmethod
    def _registered_layer(cls, name: str) -> str:
        return memory_layer_validate(name)


class _ImportedFile(_Line):
    format: Literal["memweb.evaluation-run"]
    episodes: list[ImportedEpisode] = pydantic.Field(min_length=1, max_length=MAX_IMPORT_EPISODES)


class ImportedFile(_ImportedFile):
    format_version: Literal[2]
    run: ImportedSpecRun


class ImportedColumnsFile(_ImportedFile):
    format_version: Literal[1]
    run: ImportedColumnsRun


@dataclass
class _Parsed:
    """An import file checked: its header, its episodes, and the run's spec (with, for a version-1
    file, the settings its header gave that the spec could not take: they took their defaults)."""

    run: ImportedRun
    episodes: list[ImportedEpisode]
    spec: RunSpec
    defaulted: list[str]


class RunImportError(ValueError):
    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems[:10]))

    def problem_report(self, *, data: dict) -> ProblemReport:
        """The problems grouped by the episode line (or header) of `data`, the file as uploaded."""
        return problem_report((*_record_of(path, data), message) for path, message in self.problems)


def _record_of(path: str, data: dict) -> tuple[str, str]:
    """(record, field within it) of a problem's dotted path: an episode line, the run header or the file."""
    head, _, rest = path.partition(".")
    index, _, field_name = rest.partition(".")
    if head == "episodes" and index.isdigit():
        return _episode_label(int(index), data), field_name
    if head == "run" and rest:
        return "the run header (\"run\")", rest
    return "the file", path


def _episode_label(index: int, data: dict) -> str:
    episodes = data.get("episodes")
    line = episodes[index] if isinstance(episodes, list) and index < len(episodes) else None
    given = line if isinstance(line, dict) else {}
    about = ", ".join(f"{word} {given[name]}" for name, word in (("task_id", "task"), ("trial", "trial"))
                      if isinstance(given.get(name), str | int))
    return f"episode {index + 1}" + (f" ({about})" if about else "")


def _imported_splits(data: _Parsed) -> dict[str, str]:
    """Task id -> split of a held-out run: the header's map, else what its episodes say."""
    if data.spec.evaluation_mode == EvaluationMode.REPLAY:
        return {}
    return dict(data.run.task_splits) or {e.task_id: e.split for e in data.episodes if e.split}


def _expected_trials(data: _Parsed, split: str) -> range:
    """The trials a task of `split` has episodes in: all, or a train-then-test run's phase of it."""
    spec = data.spec
    if spec.evaluation_mode != EvaluationMode.TRAIN_TEST:
        return range(1, spec.trials + 1)
    train = spec.train_trials_resolved()
    return range(1, train + 1) if split == TaskSplit.TRAIN else range(train + 1, spec.trials + 1)


def _trials_text(trials: range) -> str:
    return f"trial {trials.start}" if len(trials) == 1 else f"trials {trials.start}–{trials.stop - 1}"


def _split_problems(data: _Parsed, splits: dict[str, str]) -> list[tuple[str, str]]:
    """A held-out run's tasks each in one split, both splits present, its episodes saying the same."""
    spec, problems = data.spec, []
    if spec.evaluation_mode == EvaluationMode.REPLAY:
        return [(f"episodes.{index}.split", f"is {e.split!r}, but a replay run's episodes have no split")
                for index, e in enumerate(data.episodes) if e.split]
    train = spec.train_trials_resolved()
    if spec.evaluation_mode == EvaluationMode.TRAIN_TEST and not 1 <= train < spec.trials:
        problems.append(("run.train_trials", f"must be at least 1 and less than trials ({spec.trials}) in a "
                                             f"train_test run, got {train}"))
    if set(splits.values()) != set(TaskSplit.values):
        problems.append(("run.task_splits", "a held-out run needs tasks in both the train and the test split"))
    for index, e in enumerate(data.episodes):
        if e.task_id not in splits:
            problems.append((f"episodes.{index}.split", f"task {e.task_id!r} has no split (train or test)"))
        elif e.split and e.split != splits[e.task_id]:
            problems.append((f"episodes.{index}.split", f"is {e.split!r}, but task {e.task_id!r} is in the "
                                                        f"{splits[e.task_id]} split"))
    return problems


def _grid_problems(data: _Parsed) -> list[tuple[str, str]]:
    """Each task needs exactly one episode per trial it plays (1..trials, or its split's phase of a
    train-then-test run), so the metrics mean what they say."""
    splits = _imported_splits(data)
    problems, seen, trials = _split_problems(data, splits), {}, data.spec.trials
    if problems:
        return problems
    for index, episode in enumerate(data.episodes):
        expected = _expected_trials(data, splits.get(episode.task_id, ""))
        if episode.trial not in expected:
            problems.append((f"episodes.{index}.trial", f"is {episode.trial}, but the run has {trials} trials"
                             if episode.trial > trials else
                             f"is {episode.trial}, but task {episode.task_id!r} plays {_trials_text(expected)} only "
                             f"(its {splits[episode.task_id]} split)"))
        cell = (episode.task_id, episode.trial)
        if cell in seen:
            problems.append((f"episodes.{index}", f"task {episode.task_id!r} trial {episode.trial} appears twice "
                                                  f"(also episodes.{seen[cell]})"))
        seen.setdefault(cell, index)
    for task_id in sorted({e.task_id for e in data.episodes}):
        missing = [t for t in _expected_trials(data, splits.get(task_id, "")) if (task_id, t) not in seen]
        if missing:
            problems.append(("episodes", f"task {task_id!r} has no episode for trial(s) {', '.join(map(str, missing))}"))
    return problems


def _file_spec(parsed: ImportedFile | ImportedColumnsFile) -> tuple[RunSpec, list[str]]:
    """The run's spec: a version-2 file's own (upgraded from its version), a version-1 file's from its
    settings keys as the old columns took them."""
    if isinstance(parsed, ImportedColumnsFile):
        return spec_from_columns(parsed.run.columns(sorted({e.task_id for e in parsed.episodes})))
    try:
        return spec_upgrade(parsed.run.spec, parsed.run.spec_version), []
    except StoredSpecError as exc:
        raise RunImportError([("run.spec", str(exc))]) from None


def run_import_parse(data: dict) -> _Parsed:
    """The file checked in full: RunImportError names each problem."""
    version_1 = isinstance(data, dict) and data.get("format_version") == 1
    try:
        parsed = (ImportedColumnsFile if version_1 else ImportedFile).model_validate(data)
    except pydantic.ValidationError as exc:
        raise RunImportError(problems_of(exc, whole="(file)")) from None
    spec, defaulted = _file_spec(parsed)
    checked = _Parsed(parsed.run, parsed.episodes, spec, defaulted)
    problems = _grid_problems(checked)
    if problems:
        raise RunImportError(problems)
    return checked


def _imported_run(data: _Parsed, user, workspace) -> EvaluationRun:
    head, spec = data.run, data.spec
    owner = {"workspace": workspace} if workspace is not None else {}
    return EvaluationRun.objects.create(
        **owner, name=head.name, imported=True, imported_from=head.source or head.name, status=EvaluationRun.Status.COMPLETED,
        scripted=head.scripted, agent_backend=head.agent_backend, memory_mode=spec.memory_mode,
        spec=run_spec_stored(spec), spec_version=SPEC_VERSION, dmrm_config=head.dmrm_config,
        bank_copied_from=head.bank_copied_from, tasks_fingerprint=head.tasks_fingerprint,
        task_splits=_imported_splits(data), created_by=user, created_at=head.created_at or timezone.now(),
        started_at=head.started_at, finished_at=head.finished_at or timezone.now(),
        episodes_total=len(data.episodes), episodes_finished=len(data.episodes),
        episodes_error=sum(e.status == "error" for e in data.episodes),
        successes=sum(bool(e.success) for e in data.episodes))


def _imported_trials(run: EvaluationRun, data: _Parsed) -> dict[int, Trial]:
    trials = {}
    for number in range(1, data.spec.trials + 1):
        episodes = [e for e in data.episodes if e.trial == number]
        trials[number] = Trial.objects.create(
            run=run, number=number, status=Trial.Status.DONE, episodes_total=len(episodes),
            episodes_finished=len(episodes), episodes_error=sum(e.status == "error" for e in episodes),
            successes=sum(bool(e.success) for e in episodes))
    return trials


UNPINNED_NOTE = "imported without pins: staleness unknown"


def _task_pin_matches(pins: list[ImportedTaskPin], workspace) -> tuple[list[tuple[Task, ImportedTaskPin]], list[str]]:
    """Each pinned task matched to this workspace's task with that id whose current or kept version has
    the pinned number and content hash (the first such, by id); the ids nothing matched."""
    wanted = {pin.task: pin for pin in pins}
    tasks = Task.objects.of(workspace).filter(external_id__in=wanted).order_by("pk")
    kept = set(TaskVersion.objects.filter(task__in=tasks).values_list("task_id", "number", "content_hash"))
    matched: dict[str, Task] = {}
    for task in tasks:
        pin = wanted[task.external_id]
        same = (task.version, task.content_hash) == (pin.version, pin.content_hash)
        if (same or (task.pk, pin.version, pin.content_hash) in kept) and task.external_id not in matched:
            matched[task.external_id] = task
    return [(task, wanted[name]) for name, task in matched.items()], sorted(set(wanted) - set(matched))


def _import_note(pins: ImportedPins, unmatched: list[str]) -> str:
    if not pins.tasks:
        return "imported: pins from the exporting server, but no task versions: staleness of its tasks unknown"
    if not unmatched:
        return "imported: pins from the exporting server, staleness checked against these task versions"
    shown = ", ".join(unmatched[:10]) + (f" and {len(unmatched) - 10} more" if len(unmatched) > 10 else "")
    return (f"imported: pins from the exporting server for {len(pins.tasks) - len(unmatched)} of {len(pins.tasks)} "
            f"tasks; staleness unknown for {shown} (no task here has that version and content)")


def _pins_restore(run: EvaluationRun, pins: ImportedPins | None, workspace) -> None:
    """Restore what the file pinned, and say on the run what it could not carry."""
    if pins is None:
        run.pins = {"import": {"pinned": False, "unmatched_tasks": [], "note": UNPINNED_NOTE}}
        run.save(update_fields=["pins"])
        return
    matches, unmatched = _task_pin_matches(pins.tasks, workspace)
    RunTaskPin.objects.bulk_create([RunTaskPin(run=run, task=task, version=pin.version, content_hash=pin.content_hash)
                                    for task, pin in matches])
    carried = pins.model_dump(exclude={"tasks", "reward_version"})
    run.pins = {**carried, "import": {"pinned": True, "unmatched_tasks": unmatched,
                                      "note": _import_note(pins, unmatched)}}
    run.reward_version = pins.reward_version
    run.save(update_fields=["pins", "reward_version"])


def _defaulted_note(run: EvaluationRun, defaulted: list[str]) -> None:
    """Say which settings of a version-1 header no run spec accepts (they took their defaults)."""
    if defaulted:
        run.pins["import"]["settings_defaulted"] = defaulted
        run.pins["import"]["note"] += f"; settings not valid here, so at their defaults: {', '.join(defaulted)}"
        run.save(update_fields=["pins"])


def run_import(*, data: dict, user=None, workspace=None) -> EvaluationRun:
    """Import a run exported by memweb (or written in its format) into `workspace` (None: the
    default one); RunImportError names each bad field and nothing is written then."""
    parsed = run_import_parse(data)
    with transaction.atomic():
        run = _imported_run(parsed, user, workspace)
        trials = _imported_trials(run, parsed)
        RunEpisode.objects.bulk_create([
            RunEpisode(run=run, trial=trials[e.trial], task_key=e.task_id, status=e.status, success=e.success,
                       reward=e.reward, turns=e.turns, tokens=e.tokens, latency_ms=e.latency_ms, error=e.error,
                       seed=e.seed, split=run.task_splits.get(e.task_id, ""), finished_at=e.finished_at or run.finished_at,
                       imported_feedback=e.feedback.model_dump() if e.feedback else None) for e in parsed.episodes])
        _pins_restore(run, parsed.run.pins, run.workspace)
        _defaulted_note(run, parsed.defaulted)
        trials = parsed.spec.trials
        EvaluationRun.objects.filter(pk=run.pk).update(metrics=run_metrics_compute(run=run, trials=trials),
                                                       metrics_trials=trials)
    run.refresh_from_db()
    return run


def run_imported_feedback(*, run: EvaluationRun) -> list[dict]:
    """The simulated feedback an imported run's file gave, one dict per episode that had some."""
    return list(run.run_episodes.filter(imported_feedback__isnull=False).values_list("imported_feedback", flat=True))
