"""Comparing runs: whether they may be compared at all, then each run against the baseline (the
oldest) with evaluation.metrics.paired_metrics over their finished trials, and the per-task flip
table sorted on the server, every task's trials linked to their transcripts.

Runs scored against different versions of their tasks (or of the reward code) are compared only
with that said: `runs_scoring` names the stale runs and what changed, and `scores="regraded"`
compares the stale runs' current re-grades instead of their original scores.

Whether runs may be compared is read from the run spec's roles (spec.SETTING_ROLES): a difference
in a memory setting is what a comparison measures; a difference in an identity setting would be
measured as the memory's effect, so it refuses the comparison (or, for the few that only widen or
dilute it, warns), and either is named in the verdict sentence. Runs that share only some of their
tasks are compared on the shared ones when asked (`shared=True`).
"""
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

import pydantic

from evaluation.configs import AgentConfig, CustomerConfig
from evaluation.metrics import paired_metrics, run_metrics
from evaluation.models import Task
from evaluation.runs.models import EvaluationRun, RunRegrade, TaskSplit
from evaluation.runs.services.pins import change_summary, run_regrade_current, run_staleness
from evaluation.runs.services.regrade import regrade_verdicts
from evaluation.runs.services.results import (
    CHART_SERIES,
    Verdicts,
    metrics_of_split,
    run_charts,
    run_heatmap,
    run_matrix,
)
from evaluation.runs.services.spec import SettingRole, setting_label, settings_of_role
from evaluation.runs.services.splits import run_measured_text

SCORES = ("original", "regraded")


class RunsNotComparable(ValueError):
    """The runs differ in something other than what a comparison is for; the message says what.
    `shared_tasks`: how many tasks all the runs share when their task lists differ (a comparison on
    those may be asked for); `acceptable`: every refusing difference may be accepted explicitly."""

    def __init__(self, message: str, *, shared_tasks: int = 0, acceptable: bool = False):
        super().__init__(message)
        self.shared_tasks, self.acceptable = shared_tasks, acceptable


@dataclass(frozen=True)
class IdentitySetting:
    """One setting compared arms must agree on: its name in messages, how a run row gives its value
    and whether a difference only warns (otherwise it refuses unless accepted)."""

    label: str
    read: Callable[[EvaluationRun], object]
    warns: bool = False


TASKS = "tasks"
WITHHOLDING = "withholding (effect measurement)"
_AGENT_LABELS = {"backend": "agent backend", "error_rates": "agent error rates", "max_steps": "agent step limit",
                 "max_tokens": "agent max tokens", "context_tokens": "agent context window"}
_CUSTOMER_LABELS = {"backend": "customer backend", "max_tokens": "customer max tokens"}


def _task_keys(run: EvaluationRun) -> tuple[str, ...]:
    """The run's tasks by external id: those its selection resolved to, or an imported run's."""
    if run.task_pks:
        return tuple(sorted(Task.objects.filter(pk__in=run.task_pks).values_list("external_id", flat=True)))
    return tuple(sorted(set(run.run_episodes.values_list("task_key", flat=True))))


def _task_set(run: EvaluationRun) -> str:
    return run.task_set.name if run.task_set else (run.imported_from or "none")


def _comparable(value: object) -> object:
    """A setting's value as compared and shown: a section or a mapping as its sorted (name, value) pairs."""
    if isinstance(value, pydantic.BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict):
        return sorted((name, _comparable(item)) for name, item in value.items())
    if isinstance(value, list):
        return tuple(value)
    return getattr(value, "value", value)


def _spec_value(*path: str) -> Callable[[EvaluationRun], object]:
    """Reads a (dotted) field of the run's spec: ("agent", "max_tokens")."""
    def read(run: EvaluationRun) -> object:
        value = run.run_spec
        for name in path:
            value = getattr(value, name)
        return _comparable(value)
    return read


def spec_reader(name: str) -> IdentitySetting:
    """Any spec field compared as it is stored, under its own name: a new setting needs no reader."""
    return IdentitySetting(setting_label(name).lower(), _spec_value(name))


def _section_settings(section: str, config, labels: dict[str, str]) -> list[IdentitySetting]:
    return [IdentitySetting(labels.get(name, f"{section} {name.replace('_', ' ')}"), _spec_value(section, name))
            for name in config.model_fields]


def _pinned_model(role: str) -> Callable[[EvaluationRun], object]:
    """The LLM model a run's role was pinned to at launch; None for a scripted backend or a run from
    before pins (unknown: not compared)."""
    return lambda run: ((run.pins or {}).get(role) or {}).get("model")


def _measured_tasks(run: EvaluationRun) -> str:
    """Replayed or held-out tasks, and for held-out runs which split each task was in (a short digest:
    two seeds hold out different tasks)."""
    spec = run.run_spec
    if not run.task_splits:
        return spec.evaluation_mode.value
    digest = hashlib.sha256(json.dumps(sorted(run.task_splits.items())).encode()).hexdigest()[:8]
    return f"{spec.evaluation_mode.value}, {spec.train_trials_resolved()} train trials, split {digest}"


def _when_feedback(name: str) -> Callable[[EvaluationRun], object]:
    """A feedback setting, which only a run with feedback used."""
    return lambda run: _spec_value(name)(run) if run.run_spec.feedback_enabled else None


# The identity settings whose comparison is more than the spec's value under its own name (the rest
# are compared by spec_reader): the tasks as resolved, sections field by field, settings that only
# warn, settings that only count when another is on. Every reader reads the run's spec, or a
# result of its launch (the tasks it resolved to, its split).
_MEASURED_TASKS = IdentitySetting("measured tasks", _measured_tasks)
SPEC_READERS: dict[str, list[IdentitySetting]] = {
    "task_set": [IdentitySetting("task set", _task_set)],
    "domain": [IdentitySetting(TASKS, _task_keys)],
    "split": [IdentitySetting(TASKS, _task_keys)],
    "task_ids": [IdentitySetting(TASKS, _task_keys)],
    # An imported run's agent backend is its column's ("external" when not memweb's).
    "agent": [IdentitySetting("agent backend", lambda run: run.agent_backend),
              *[s for s in _section_settings("agent", AgentConfig, _AGENT_LABELS) if s.label != "agent backend"]],
    "customer": _section_settings("customer", CustomerConfig, _CUSTOMER_LABELS),
    "max_turns": [IdentitySetting("turn limit", _spec_value("max_turns"))],
    # Withholding leaves the compared memory arm fewer memories: it dilutes an effect, never makes one.
    "memory_effects": [IdentitySetting(WITHHOLDING, _spec_value("withhold_probability"), warns=True)],
    "withhold_probability": [IdentitySetting(WITHHOLDING, _spec_value("withhold_probability"), warns=True)],
    # Another seed or trial count is another sample of the same arm (trials are paired by number).
    "trials": [IdentitySetting("trials", _spec_value("trials"), warns=True)],
    "seed": [IdentitySetting("seed", _spec_value("seed"), warns=True)],
    "feedback_enabled": [IdentitySetting("simulated feedback", _spec_value("feedback_enabled"))],
    "feedback_rounds": [IdentitySetting("feedback rounds",
                                        lambda run: run.run_spec.feedback_rounds if run.run_spec.feedback_enabled else 0)],
    "feedback_calibration": [IdentitySetting("feedback calibration", _when_feedback("feedback_calibration"))],
    **dict.fromkeys(("evaluation_mode", "split_rule", "test_fraction", "train_trials"), [_MEASURED_TASKS]),
}
# Not settings of the spec but of the deployment at launch, as the run recorded them; a run that
# recorded none (from before pins, scripted, without a bank) is not compared on it: unknown, not guessed.
RECORDED = [
    IdentitySetting("agent model", _pinned_model("agent")),
    IdentitySetting("customer model", _pinned_model("customer")),
    IdentitySetting("embedding model", lambda run: run.bank.embedding_model if run.bank_id else None),
]


# The memory settings a comparison measures, where their name or value in the verdict ("reflection
# style (structured against simple)") is more than spec_reader gives.
MEMORY_READERS: dict[str, IdentitySetting] = {
    "memory_mode": IdentitySetting("memory", lambda run: run.get_memory_mode_display()),
    "memory_k": IdentitySetting("k", _spec_value("memory_k")),
    # The parameters in force (the bank's, when the spec left them to it), recorded at launch.
    "dmrm": IdentitySetting("DMRM parameters", lambda run: sorted((run.dmrm_config or {}).items())),
    "approved_only": IdentitySetting("approved memories only", _spec_value("approved_only")),
    "same_customer_only": IdentitySetting("same-customer filter", _spec_value("same_customer_only")),
    "per_turn": IdentitySetting("retrieval per turn", _spec_value("per_turn")),
    # The bank that was copied, by name as recorded at launch (the spec names it as it was asked for).
    "bank_source": IdentitySetting("starting bank", lambda run: run.bank_copied_from or None),
    "feedback_memory": IdentitySetting("feedback into memory", _when_feedback("feedback_memory")),
}


def memory_settings() -> list[IdentitySetting]:
    """The memory settings of the spec (SETTING_ROLES), each with its reader."""
    return [MEMORY_READERS.get(name) or spec_reader(name) for name in settings_of_role(SettingRole.MEMORY)]


def memory_differences(run: EvaluationRun, baseline: EvaluationRun) -> list[str]:
    """The memory settings the two runs differ in, each with both values ("reflection style (structured
    against simple)"). Without memory on either side only the memory itself is named: the rest of a
    no-memory run's memory settings are never used."""
    settings = memory_settings()
    if not (run.has_memory and baseline.has_memory):
        settings = [MEMORY_READERS["memory_mode"]]
    return [_difference_text({"setting": s.label, "run": _shown(s.read(run)), "baseline": _shown(s.read(baseline))})
            for s in settings if s.read(run) != s.read(baseline)]


def identity_settings() -> list[IdentitySetting]:
    """The settings compared runs must agree on, one per label, from the spec's identity fields."""
    by_label = {}
    for name in settings_of_role(SettingRole.IDENTITY):
        for setting in SPEC_READERS.get(name) or [spec_reader(name)]:
            by_label.setdefault(setting.label, setting)
    for setting in RECORDED:
        by_label.setdefault(setting.label, setting)
    return list(by_label.values())


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(f"{k} {v}" for k, v in value) or "none"
    return str(value)


@dataclass
class ArmsCheck:
    """One run against the baseline: the settings both had, those they differ in, the tasks compared,
    and on shared tasks how many of the run's and the baseline's tasks the other did not play."""

    equal: list[str]
    differences: list[dict]
    tasks: set[str]
    shared: bool
    only_run: int = 0
    only_baseline: int = 0

    def as_dict(self) -> dict:
        return {"equal": self.equal, "differences": self.differences, "shared_tasks": len(self.tasks) if self.shared
                else None}


def runs_differences(run: EvaluationRun, baseline: EvaluationRun) -> tuple[list[str], list[dict], tuple, tuple]:
    """(labels of equal settings, differences, the run's tasks, the baseline's tasks). A difference:
    {"setting", "run", "baseline", "refuses"}; tasks are checked apart (they may be narrowed to the
    shared ones) and not in the differences."""
    equal, differences, tasks = [], [], ((), ())
    for setting in identity_settings():
        value, base = setting.read(run), setting.read(baseline)
        if setting.label == TASKS:
            tasks = value, base
        elif setting in RECORDED and (value is None or base is None):
            continue
        elif value == base:
            equal.append(setting.label)
        else:
            differences.append({"setting": setting.label, "run": _shown(value), "baseline": _shown(base),
                                "refuses": not setting.warns})
    return equal, differences, *tasks


def _difference_text(difference: dict) -> str:
    return f"{difference['setting']} ({difference['run']} against {difference['baseline']})"


def _pinned_versions(run: EvaluationRun, tasks: set[str] | None) -> set[tuple[int, int]]:
    pins = run.task_pins.all() if tasks is None else run.task_pins.filter(task__external_id__in=tasks)
    return set(pins.values_list("task_id", "version"))


def _same_task_versions(run: EvaluationRun, baseline: EvaluationRun, shared: set[str] | None = None) -> None:
    """Same task ids can hide edited tasks. Runs whose pinned task versions differ are compared with
    that said (`runs_scoring`); otherwise differing fingerprints mean a task was changed without a
    new version (runs launched before versions, or a direct database edit). An imported run from
    elsewhere has no fingerprint and is taken at its task ids. On `shared` tasks only the pins can
    tell (the fingerprints cover each run's whole task list)."""
    pinned = _pinned_versions(run, shared), _pinned_versions(baseline, shared)
    if all(pinned) and (pinned[0] != pinned[1] or shared is not None):
        return
    fingerprints = (run.tasks_fingerprint, baseline.tasks_fingerprint)
    if shared is not None and all(fingerprints):
        raise RunsNotComparable(f"run #{run.pk} or run #{baseline.pk} was launched before task versions were "
                                "pinned: the versions of their shared tasks cannot be checked")
    if all(fingerprints) and fingerprints[0] != fingerprints[1]:
        raise RunsNotComparable(f"run #{run.pk} and run #{baseline.pk} were scored against different versions of "
                                "their tasks (the tasks were edited or re-imported between them)")


def runs_comparable_check(*, runs: list[EvaluationRun], shared: bool = False,
                          accept_differences: bool = False) -> dict[int, ArmsCheck]:
    """Each later run against the first (the baseline): run id -> ArmsCheck. Raises RunsNotComparable
    naming every refusing difference (unless `accept_differences`), tasks that differ (unless
    `shared` and some are shared by all), or a run with no finished trial."""
    baseline, checks = runs[0], {}
    every = [set(_task_keys(run)) for run in runs]
    common = set.intersection(*every)
    narrowed = shared and bool(common) and any(tasks != common for tasks in every)
    for run in runs[1:]:
        equal, differences, tasks, base_tasks = runs_differences(run, baseline)
        refusing = [d for d in differences if d["refuses"]]
        if refusing and not accept_differences:
            raise RunsNotComparable(
                f"run #{run.pk} and run #{baseline.pk} differ in {'; '.join(map(_difference_text, refusing))}: "
                "the difference would be measured as the memory's", acceptable=True)
        if tasks != base_tasks and not narrowed:
            raise RunsNotComparable(
                f"run #{run.pk} and run #{baseline.pk} have different tasks ({len(tasks)} and {len(base_tasks)}; "
                f"{len(common)} shared by all the compared runs)", shared_tasks=len(common))
        _same_task_versions(run, baseline, common if narrowed else None)
        checks[run.pk] = ArmsCheck(equal + ([] if narrowed else [TASKS]), differences, common, narrowed,
                                   only_run=len(set(tasks) - set(base_tasks)),
                                   only_baseline=len(set(base_tasks) - set(tasks)))
    for run in runs:
        if not run.metrics_trials:
            raise RunsNotComparable(f"run #{run.pk} has no finished trial yet")
    return checks


def measured_sentence(run: EvaluationRun, baseline: EvaluationRun, check: ArmsCheck) -> str:
    """What a pair's comparison measured: on which tasks, which memory settings against which, what was
    equal and what was not."""
    measures = {run_measured_text(run), run_measured_text(baseline)}
    on = " and ".join(sorted(measures))
    scope = f"the {len(check.tasks)} tasks the runs share" if check.shared else f"all {len(check.tasks)} tasks"
    compared = "; ".join(memory_differences(run, baseline)) or "the same memory settings"
    text = f"Measured on {on}, over {scope}: {compared}; equal: {', '.join(check.equal) or 'nothing checked'}"
    if check.differences:
        text += f"; not equal: {'; '.join(map(_difference_text, check.differences))}"
    return text + "."


def _instability(row: dict) -> float:
    return max(row["a"]["instability"] or 0, row["b"]["instability"] or 0)


FLIP_SORTS = {
    "difference": lambda row: (-abs(row["difference"] or 0), row["task"]),
    "task": lambda row: row["task"],
    "changed": lambda row: (not row["changed"], -abs(row["difference"] or 0), row["task"]),
    "instability": lambda row: (-_instability(row), row["task"]),
    "discordant": lambda row: (-row["discordant"], row["task"]),
}
DEFAULT_SORT = "difference"


def _scored_against(staleness: dict) -> tuple:
    """The older task and reward versions a run's scores answer to: ((), None) for the current ones."""
    tasks = tuple((change["task"], change["pinned"]) for change in staleness["tasks"])
    return tasks, staleness["reward"]["pinned"] if staleness["reward"] else None


def runs_scoring(*, runs: list[EvaluationRun], scores: str = "original") -> dict:
    """What the compared scores were graded against. `stale`: each run whose compared scores are
    against older task or reward versions, with what changed and whether a current re-grade exists;
    `mixed`: the runs' scores answer to different versions (a stale run beside a fresh one);
    `regrades`: run id -> the re-grade used for it (with `scores="regraded"`)."""
    stale, versions, regrades = [], set(), {}
    for run in runs:
        staleness = run_staleness(run=run)
        regrade = run_regrade_current(run=run) if staleness["stale"] else None
        if scores == "regraded" and regrade is not None:
            regrades[run.pk], staleness = regrade, {**staleness, "stale": False, "tasks": [], "reward": None}
        versions.add(_scored_against(staleness))
        if staleness["stale"]:
            stale.append({"run": run.pk, "name": run.name, "changes": change_summary(staleness),
                          "tasks": staleness["tasks"], "reward": staleness["reward"],
                          "regrade_available": regrade is not None})
    return {"scores": scores, "stale": stale, "mixed": len(versions) > 1, "regrades": regrades,
            "regraded_available": bool(stale) and all(entry["regrade_available"] for entry in stale)}


def _cells(run: EvaluationRun, regrade: RunRegrade | None) -> dict[str, list]:
    """The run's task x trial cells; a re-grade's verdicts recolour the cells it scored again."""
    heatmap = run_heatmap(run=run)
    cells = dict(zip(heatmap["tasks"], heatmap["cells"]))
    if regrade is not None:
        for key, number, success in regrade.scores.values_list("run_episode__task_key", "run_episode__trial__number",
                                                               "success"):
            cells[key][number - 1][0] = "success" if success else "failure"
    return cells


def _matrix(run: EvaluationRun, verdicts: dict[int, Verdicts], tasks: set[str], view: str) -> dict:
    matrix = run_matrix(run=run, trials=run.metrics_trials, verdicts=verdicts.get(run.pk), split=view)
    return {task: results for task, results in matrix.items() if task in tasks}


def _charts(run: EvaluationRun, regrade: RunRegrade | None, matrix: dict | None, view: str) -> dict:
    """The run's chart series on split `view`: its stored ones, a re-grade's, or (on shared tasks,
    `matrix`) computed over the compared tasks only."""
    chart = run_charts(run=run, split=view)
    if matrix is not None:
        metrics = run_metrics(matrix, seed=run.run_spec.seed)
        name = f"{run.name} ({len(matrix)} shared tasks{', re-graded' if regrade else ''})"
        return {**chart, "name": name, **{series: metrics[series] for series in CHART_SERIES}}
    regraded = metrics_of_split(regrade.metrics, view) if regrade is not None else None
    if not regraded:
        return chart
    return {**chart, "name": f"{run.name} (re-graded)", **{name: regraded[name] for name in CHART_SERIES}}


def compare_views(*, runs: list[EvaluationRun]) -> list[str]:
    """The splits a comparison can be viewed on: test and train when the runs held tasks out (they
    all did or none did: the measured tasks are part of what must match), none otherwise."""
    return [TaskSplit.TEST, TaskSplit.TRAIN] if runs[0].held_out else []


def _view_played_check(runs: list[EvaluationRun], view: str) -> None:
    """A train-then-test run has no test verdicts until its train trials are done."""
    for run in runs:
        if view and not run.split_trials(view, run.metrics_trials):
            raise RunsNotComparable(f"run #{run.pk} has no finished trial of its {view} split yet")


def _pair(run: EvaluationRun, baseline: EvaluationRun, check: ArmsCheck, cells: dict[int, dict],
          verdicts: dict[int, Verdicts], sort: str, view: str) -> dict:
    """`run` (A) against the baseline (B): paired_metrics over the compared tasks of split `view` with
    each flip row's transcript links; the verdict says what was measured."""
    metrics = paired_metrics(_matrix(run, verdicts, check.tasks, view), _matrix(baseline, verdicts, check.tasks, view),
                             a_name=f"#{run.pk} {run.name}", b_name=f"#{baseline.pk} {baseline.name}",
                             seed=baseline.run_spec.seed)
    for row in metrics["flips"]:
        row["a"]["cells"] = cells[run.pk].get(row["task"], [])
        row["b"]["cells"] = cells[baseline.pk].get(row["task"], [])
    metrics["flips"].sort(key=FLIP_SORTS[sort])
    measured = measured_sentence(run, baseline, check)
    return {"run": run, "baseline": baseline, **metrics, "verdict": f"{metrics['verdict']} {measured}",
            "measures": measured, **check.as_dict(), "only_run": check.only_run, "only_baseline": check.only_baseline}


def runs_compare(*, runs: list[EvaluationRun], sort: str = DEFAULT_SORT, scores: str = "original",
                 shared: bool = False, accept_differences: bool = False, view: str = "") -> dict:
    """Each run's chart series and every later run against the first (the baseline), with `scoring`
    (runs_scoring: stale runs and what changed); raises RunsNotComparable first when the runs may
    not be compared (runs_comparable_check: `shared` compares runs with different task lists on the
    tasks all of them share, `accept_differences` compares despite refusing differences, named in
    each verdict). `scores="regraded"` uses each stale run's current re-grade where it has one.
    `view`: held-out runs' test (the default) or train split (compare_views)."""
    checks = runs_comparable_check(runs=runs, shared=shared, accept_differences=accept_differences)
    views = compare_views(runs=runs)
    view = view if view in views else (views[0] if views else "")
    _view_played_check(runs, view)
    sort = sort if sort in FLIP_SORTS else DEFAULT_SORT
    scoring = runs_scoring(runs=runs, scores=scores if scores in SCORES else "original")
    regrades = scoring["regrades"]
    verdicts = {pk: regrade_verdicts(regrade=regrade) for pk, regrade in regrades.items()}
    cells = {run.pk: _cells(run, regrades.get(run.pk)) for run in runs}
    narrowed = next((check.tasks for check in checks.values() if check.shared), None)
    charts = [_charts(run, regrades.get(run.pk), None if narrowed is None else _matrix(run, verdicts, narrowed, view),
                      view) for run in runs]
    return {"charts": charts, "sort": sort, "scoring": scoring, "shared_tasks": None if narrowed is None else len(narrowed),
            "pairs": [_pair(run, runs[0], checks[run.pk], cells, verdicts, sort, view) for run in runs[1:]],
            "view": view, "views": views, "measured": run_measured_text(runs[0])}
