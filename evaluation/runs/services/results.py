"""What a run shows: its success matrix and metrics (evaluation.metrics), the task x trial heatmap,
per-trial progress and the runs list's filters (comparisons of several runs: compare.py)."""
from django.db.models import Q, QuerySet

from evaluation.metrics import run_metrics, run_minimum_detectable_effect
from evaluation.runs.models import EvaluationRun, RunEpisode, TaskSplit, Trial
from evaluation.runs.services.pins import runs_staleness_annotate
from evaluation.runs.services.splits import measured_split

CHART_SERIES = ("per_trial", "cumulative", "pass_k")


MEASURED = None  # run_matrix's split: the one the run's headline metrics are on (splits.measured_split)


def _rows(run: EvaluationRun, trials: int, split: str = "") -> QuerySet:
    rows = run.run_episodes.filter(trial__number__lte=trials).order_by("task_key", "trial__number")
    return rows.filter(split=split) if split else rows


# A re-grade's new verdicts: run episode id -> (success, reward), used instead of the stored ones.
Verdicts = dict[int, tuple[bool, float]]


def _columns(run: EvaluationRun, trials: int, split: str) -> dict[int, int]:
    """Trial number -> its column in the matrix: a split's own trials, numbered from 1 (a
    train-then-test run's test trials are its test split's trials 1, 2, ...)."""
    numbers = run.split_trials(split, trials) if split else range(1, trials + 1)
    return {number: column for column, number in enumerate(numbers)}


def run_matrix(*, run: EvaluationRun, trials: int, verdicts: Verdicts | None = None,
               split: str | None = MEASURED) -> dict[str, list[bool | None]]:
    """task id -> results of trials 1..`trials`: True / False, None for an infrastructure error
    (or a row that never got a verdict). `split`: train or test tasks only, in that split's trials;
    "" every task; by default the split the run measures (test for a held-out run)."""
    split = measured_split(run) if split is MEASURED else split
    columns = _columns(run, trials, split)
    matrix: dict[str, list[bool | None]] = {}
    verdicts = verdicts or {}
    for pk, key, number, status, success in _rows(run, trials, split).values_list(
            "pk", "task_key", "trial__number", "status", "success"):
        results = matrix.setdefault(key, [None] * len(columns))
        results[columns[number]] = verdicts.get(pk, (success,))[0] if status == RunEpisode.Status.DONE else None
    return matrix


def _split_metrics(run: EvaluationRun, trials: int, verdicts: Verdicts | None, split: str) -> dict:
    done = _rows(run, trials, split).filter(status=RunEpisode.Status.DONE)
    columns = {name: list(done.values_list(name, flat=True)) for name in ("turns", "tokens", "latency_ms")}
    rewards = [(verdicts or {}).get(pk, (None, reward))[1] for pk, reward in done.values_list("pk", "reward")]
    return run_metrics(run_matrix(run=run, trials=trials, verdicts=verdicts, split=split), rewards=rewards,
                       turns=columns["turns"], tokens=columns["tokens"], latency=columns["latency_ms"], seed=run.run_spec.seed)


def run_metrics_compute(*, run: EvaluationRun, trials: int, verdicts: Verdicts | None = None) -> dict:
    """evaluation.metrics.run_metrics over trials 1..`trials` of the run (JSON-ready). A held-out
    run's are its test split's, with `split` saying so and the train split's beside them (`train`)."""
    if not run.held_out:
        return _split_metrics(run, trials, verdicts, "")
    return {**_split_metrics(run, trials, verdicts, TaskSplit.TEST), "split": TaskSplit.TEST,
            TaskSplit.TRAIN: _split_metrics(run, trials, verdicts, TaskSplit.TRAIN)}


def metrics_of_split(metrics: dict | None, split: str) -> dict | None:
    """A stored metrics value's `split` part (run.metrics, a re-grade's): the train split's of a
    held-out run, the headline (test) ones for any other split."""
    if metrics and split == TaskSplit.TRAIN:
        return metrics.get(TaskSplit.TRAIN)
    return metrics


def run_detectable_effect(*, run: EvaluationRun) -> dict:
    """The smallest success difference the run's finished trials could detect with 80 % power against a
    run like it (evaluation.metrics.run_minimum_detectable_effect); its effect is None before two verdicts."""
    return run_minimum_detectable_effect(run_matrix(run=run, trials=run.metrics_trials))


def run_charts(*, run: EvaluationRun, split: str = "") -> dict:
    """The chart series of the finished trials, with the run's name (empty series before trial 1
    ends); `split` train: a held-out run's train split's."""
    metrics = metrics_of_split(run.metrics, split) or {}
    empty = {"x": [], "value": [], "low": [], "high": []}
    return {"id": run.pk, "name": run.name, "scripted": run.scripted,
            **{name: metrics.get(name, empty) for name in CHART_SERIES}}


def run_split_summary(*, run: EvaluationRun) -> list[dict]:
    """A held-out run's splits side by side: tasks, the run's trials each split played, and per-trial
    success (test first: the split the run reports); empty for a replay run or before trial 1 ends."""
    if not run.held_out or not run.metrics:
        return []
    counts = run.split_counts()
    summary = []
    for split in (TaskSplit.TEST, TaskSplit.TRAIN):
        metrics = metrics_of_split(run.metrics, split) or {}
        numbers = run.split_trials(split, run.run_spec.trials)
        summary.append({"split": split, "tasks": counts[split], "trials": f"{numbers[0]}–{numbers[-1]}",
                        "per_trial": metrics.get("per_trial", {}).get("value", []),
                        "pass_k": metrics.get("pass_k", {}).get("value", [])})
    return summary


def run_heatmap(*, run: EvaluationRun) -> dict:
    """Compact task x trial grid for the page script: per task, one [state, episode id] per trial,
    and what the page sorts and filters the tasks by: the task's request (`summaries`), its failed
    trials (failures and infrastructure errors) and how often its outcome flips between trials."""
    grid: dict[str, list] = {}
    summaries: dict[str, str] = {}
    for key, summary, number, status, success, episode_id in run.run_episodes.order_by("task_key").values_list(
            "task_key", "task__summary", "trial__number", "status", "success", "episode_id"):
        state = ("success" if success else "failure") if status == RunEpisode.Status.DONE else status
        grid.setdefault(key, [["", None] for _ in range(run.run_spec.trials)])[number - 1] = [state, episode_id]
        summaries[key] = summary or ""
    states = [[state for state, _ in cells] for cells in grid.values()]
    return {"trials": run.run_spec.trials, "tasks": list(grid), "cells": list(grid.values()),
            "summaries": list(summaries.values()),
            "failures": [sum(state in ("failure", "error") for state in row) for row in states],
            "flips": [outcome_flips(row) for row in states]}


def outcome_flips(states: list[str]) -> int:
    """How often a task's verdict changes from one judged trial to the next (success <-> failure;
    unplayed trials and infrastructure errors have no verdict): more than 0 is an unstable task."""
    verdicts = [state for state in states if state in ("success", "failure")]
    return sum(before != after for before, after in zip(verdicts, verdicts[1:]))


def run_progress(*, run: EvaluationRun) -> list[Trial]:
    return list(run.trial_rows.order_by("number"))


def run_errors(*, run: EvaluationRun, limit: int = 50) -> QuerySet:
    return run.run_episodes.filter(status=RunEpisode.Status.ERROR).select_related("trial").order_by(
        "trial__number", "task_key")[:limit]


def runs_count_active(*, workspace) -> int:
    """The workspace's runs queued, running or waiting for review (the home page's count)."""
    return EvaluationRun.objects.of(workspace).filter(status__in=EvaluationRun.ACTIVE).count()


def runs_filtered(*, status: str = "", memory_mode: str = "", agent_backend: str = "", q: str = "") -> QuerySet:
    runs = runs_staleness_annotate(EvaluationRun.objects.select_related("created_by", "bank", "task_set"))
    for field, value in (("status", status), ("memory_mode", memory_mode), ("agent_backend", agent_backend)):
        if value:
            runs = runs.filter(**{field: value})
    if q.strip():
        text = q.strip()
        match = Q(name__icontains=text) | Q(bank__name__icontains=text) | Q(imported_from__icontains=text)
        runs = runs.filter(match | Q(pk=int(text)) if text.isdigit() else match)
    return runs.order_by("-created_at", "-pk")

