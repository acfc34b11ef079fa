"""Comparing runs: whether they may be compared at all, then each run against the baseline (the
oldest) with evaluation.metrics.paired_metrics over their finished trials, and the per-task flip
table sorted on the server, every task's trials linked to their transcripts."""
from evaluation.metrics import paired_metrics
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services.results import run_charts, run_heatmap, run_matrix


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
    }


def _same_task_versions(run: EvaluationRun, baseline: EvaluationRun) -> None:
    """Same task ids can hide edited tasks (a re-import updates them in place); an imported run
    from elsewhere has no fingerprint and is taken at its task ids."""
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


def _cells(run: EvaluationRun) -> dict[str, list]:
    heatmap = run_heatmap(run=run)
    return dict(zip(heatmap["tasks"], heatmap["cells"]))


def _pair(run: EvaluationRun, baseline: EvaluationRun, cells: dict[int, dict], sort: str) -> dict:
    """`run` (A) against the baseline (B): paired_metrics with each flip row's transcript links."""
    metrics = paired_metrics(run_matrix(run=run, trials=run.metrics_trials),
                             run_matrix(run=baseline, trials=baseline.metrics_trials),
                             a_name=f"#{run.pk} {run.name}", b_name=f"#{baseline.pk} {baseline.name}",
                             seed=baseline.seed)
    for row in metrics["flips"]:
        row["a"]["cells"] = cells[run.pk].get(row["task"], [])
        row["b"]["cells"] = cells[baseline.pk].get(row["task"], [])
    metrics["flips"].sort(key=FLIP_SORTS[sort])
    return {"run": run, "baseline": baseline, **metrics}


def runs_compare(*, runs: list[EvaluationRun], sort: str = DEFAULT_SORT) -> dict:
    """Each run's chart series and every later run against the first (the baseline); raises
    RunsNotComparable first when the runs may not be compared."""
    runs_comparable_check(runs=runs)
    sort = sort if sort in FLIP_SORTS else DEFAULT_SORT
    cells = {run.pk: _cells(run) for run in runs}
    return {"charts": [run_charts(run=run) for run in runs], "sort": sort,
            "pairs": [_pair(run, runs[0], cells, sort) for run in runs[1:]]}
