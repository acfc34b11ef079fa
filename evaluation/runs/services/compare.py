"""Comparing runs: whether they may be compared at all, then each run against the baseline (the
oldest) with evaluation.metrics.paired_metrics over their finished trials, and the per-task flip
table sorted on the server, every task's trials linked to their transcripts.

Runs scored against different versions of their tasks (or of the reward code) are compared only
with that said: `runs_scoring` names the stale runs and what changed, and `scores="regraded"`
compares the stale runs' current re-grades instead of their original scores.
"""
from evaluation.metrics import paired_metrics
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
from evaluation.runs.services.splits import run_measured_text

SCORES = ("original", "regraded")


class RunsNotComparable(ValueError):
    """The runs differ in something other than what a comparison is for; the message says what."""


# What may differ between compared runs is their memory (and seed, name, concurrency); a difference
# in any of these would be measured as a memory effect, so it refuses the comparison.
def _identity(run: EvaluationRun) -> dict[str, object]:
    agent, customer = run.agent_config or {}, run.customer_config or {}
    return {
        "task set": run.task_set.name if run.task_set else (run.imported_from or "none"),
        "task selection": (run.task_domain, run.task_split, sorted(run.task_ids)),
        "tasks": sorted(run.task_pks) or sorted(set(run.run_episodes.values_list("task_key", flat=True))),
        "agent backend": agent.get("backend", run.agent_backend),
        "agent model": (agent.get("model"), sorted((agent.get("error_rates") or {}).items())),
        "customer backend": customer.get("backend"),
        "customer model": customer.get("model"),
        "turn limit": run.max_turns,
        "measured tasks": (run.evaluation_mode, run.train_trials, sorted(run.task_splits.items())),
    }


def _pinned_versions(run: EvaluationRun) -> set[tuple[int, int]]:
    return set(run.task_pins.values_list("task_id", "version"))


def _same_task_versions(run: EvaluationRun, baseline: EvaluationRun) -> None:
    """Same task ids can hide edited tasks. Runs whose pinned task versions differ are compared with
    that said (`runs_scoring`); otherwise differing fingerprints mean a task was changed without a
    new version (runs launched before versions, or a direct database edit). An imported run from
    elsewhere has no fingerprint and is taken at its task ids."""
    pinned = _pinned_versions(run), _pinned_versions(baseline)
    if all(pinned) and pinned[0] != pinned[1]:
        return
    fingerprints = (run.tasks_fingerprint, baseline.tasks_fingerprint)
    if all(fingerprints) and fingerprints[0] != fingerprints[1]:
        raise RunsNotComparable(f"run #{run.pk} and run #{baseline.pk} were scored against different versions of "
                                "their tasks (the tasks were edited or re-imported between them)")


def runs_comparable_check(*, runs: list[EvaluationRun]) -> None:
    """Raise RunsNotComparable naming the first difference from the baseline, or a run with no
    finished trial."""
    baseline = _identity(runs[0])
    for run in runs[1:]:
        for name, value in _identity(run).items():
            if value != baseline[name]:
                raise RunsNotComparable(f"run #{run.pk} and run #{runs[0].pk} have different {name}: "
                                        "their difference would not be the memory's")
        _same_task_versions(run, runs[0])
    for run in runs:
        if not run.metrics_trials:
            raise RunsNotComparable(f"run #{run.pk} has no finished trial yet")


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


def _charts(run: EvaluationRun, regrade: RunRegrade | None, view: str = "") -> dict:
    chart = run_charts(run=run, split=view)
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


def _pair(run: EvaluationRun, baseline: EvaluationRun, cells: dict[int, dict], verdicts: dict[int, Verdicts],
          sort: str, view: str | None = None) -> dict:
    """`run` (A) against the baseline (B): paired_metrics with each flip row's transcript links;
    `view`: the split compared (None: the one the runs measure)."""
    metrics = paired_metrics(run_matrix(run=run, trials=run.metrics_trials, verdicts=verdicts.get(run.pk), split=view),
                             run_matrix(run=baseline, trials=baseline.metrics_trials, verdicts=verdicts.get(baseline.pk),
                                        split=view),
                             a_name=f"#{run.pk} {run.name}", b_name=f"#{baseline.pk} {baseline.name}",
                             seed=baseline.seed)
    for row in metrics["flips"]:
        row["a"]["cells"] = cells[run.pk].get(row["task"], [])
        row["b"]["cells"] = cells[baseline.pk].get(row["task"], [])
    metrics["flips"].sort(key=FLIP_SORTS[sort])
    return {"run": run, "baseline": baseline, **metrics}


def runs_compare(*, runs: list[EvaluationRun], sort: str = DEFAULT_SORT, scores: str = "original",
                 view: str = "") -> dict:
    """Each run's chart series and every later run against the first (the baseline), with `scoring`
    (runs_scoring: stale runs and what changed); raises RunsNotComparable first when the runs may
    not be compared. `scores="regraded"` uses each stale run's current re-grade where it has one.
    `view`: held-out runs' test (the default) or train split (compare_views)."""
    runs_comparable_check(runs=runs)
    views = compare_views(runs=runs)
    view = view if view in views else (views[0] if views else "")
    _view_played_check(runs, view)
    sort = sort if sort in FLIP_SORTS else DEFAULT_SORT
    scoring = runs_scoring(runs=runs, scores=scores if scores in SCORES else "original")
    regrades = scoring["regrades"]
    verdicts = {pk: regrade_verdicts(regrade=regrade) for pk, regrade in regrades.items()}
    cells = {run.pk: _cells(run, regrades.get(run.pk)) for run in runs}
    return {"charts": [_charts(run, regrades.get(run.pk), view) for run in runs], "sort": sort, "scoring": scoring,
            "pairs": [_pair(run, runs[0], cells, verdicts, sort, view) for run in runs[1:]],
            "view": view, "views": views, "measured": run_measured_text(runs[0])}
