"""Evaluation metrics over a run's task x trial success matrix (plain Python, no Django).

A *success matrix* maps each task id to its per-trial results in trial order: True (solved),
False (failed) or None (an infrastructure error: the episode never produced a verdict, so it
is neither a success nor a failure and is counted apart).

Pass^k follows the MemOrb protocol: the mean over tasks of C(c, k) / C(n, k), with c successes
out of the n trials that produced a verdict for that task. Cumulative success by trial t counts
a task once it has been solved in any of its first t trials (the form of the MemOrb tables).

`run_metrics` bundles everything into a JSON-serialisable dict whose chart series are
column-oriented (`x`, `value`, `low`, `high` lists) so Chart.js can plot them directly.
"""
from collections.abc import Callable, Mapping, Sequence
from math import comb

import numpy as np

TrialResult = bool | None
SuccessMatrix = Mapping[str, Sequence[TrialResult]]

DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95


def pass_hat_k(c: int, n: int, k: int) -> float:
    """Unbiased estimate of the chance that k independent trials all succeed, from c of n."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"successes c={c} must lie between 0 and trials n={n}")
    if n < k:
        raise ValueError(f"k={k} is larger than the number of trials n={n}")
    return comb(c, k) / comb(n, k)


def task_counts(results: Sequence[TrialResult]) -> tuple[int, int, int]:
    """(successes, trials with a verdict, infrastructure errors) for one task's results."""
    errors = sum(1 for r in results if r is None)
    successes = sum(1 for r in results if r is True)
    return successes, len(results) - errors, errors


def pass_k_by_task(matrix: SuccessMatrix, k: int) -> dict[str, float]:
    """Per-task Pass^k; n is taken per task, so tasks with fewer valid trials are allowed
    as long as each has at least k, and the offending task is named otherwise."""
    values = {}
    for task_id, results in matrix.items():
        c, n, _ = task_counts(results)
        if n < k:
            raise ValueError(f"task {task_id!r} has {n} trials with a verdict, fewer than k={k}")
        values[task_id] = pass_hat_k(c, n, k)
    return values


def pass_k(matrix: SuccessMatrix, k: int) -> float:
    """Pass^k over tasks: the mean of the per-task estimates."""
    values = pass_k_by_task(matrix, k)
    if not values:
        raise ValueError("the success matrix has no tasks")
    return float(np.mean(list(values.values())))


def trial_count(matrix: SuccessMatrix) -> int:
    """Number of trials in the run: the longest task row (rows may be ragged mid-run)."""
    return max((len(results) for results in matrix.values()), default=0)


def trial_outcomes(matrix: SuccessMatrix, trial: int) -> list[float]:
    """0/1 outcome of every task that has a verdict at `trial` (1-based); errors dropped."""
    outcomes = []
    for results in matrix.values():
        if trial <= len(results) and results[trial - 1] is not None:
            outcomes.append(1.0 if results[trial - 1] else 0.0)
    return outcomes


def trial_errors(matrix: SuccessMatrix, trial: int) -> int:
    """Infrastructure errors at `trial` (1-based), kept out of the success denominator."""
    return sum(1 for r in matrix.values() if trial <= len(r) and r[trial - 1] is None)


def per_trial_success(matrix: SuccessMatrix) -> list[float | None]:
    """Success rate of each trial over the tasks that got a verdict; None for a trial where
    every episode hit an infrastructure error (no evidence either way)."""
    rates = []
    for trial in range(1, trial_count(matrix) + 1):
        outcomes = trial_outcomes(matrix, trial)
        rates.append(float(np.mean(outcomes)) if outcomes else None)
    return rates


def tasks_with_verdict(matrix: SuccessMatrix) -> list[str]:
    """Tasks with at least one verdict; a task that only ever errored says nothing about
    the agent, so it is left out of cumulative success instead of counted as unsolved."""
    return [task_id for task_id, results in matrix.items() if task_counts(results)[1] > 0]


def solved_by(results: Sequence[TrialResult], trial: int) -> float:
    """1.0 when the task was solved in any of its first `trial` trials."""
    return 1.0 if any(r is True for r in results[:trial]) else 0.0


def cumulative_success(matrix: SuccessMatrix) -> list[float | None]:
    """Share of tasks solved in any of the first t trials, for t = 1..T. The denominator is
    fixed (tasks with a verdict), which makes the series monotone by construction."""
    tasks = tasks_with_verdict(matrix)
    if not tasks:
        return [None] * trial_count(matrix)
    return [float(np.mean([solved_by(matrix[task_id], t) for task_id in tasks]))
            for t in range(1, trial_count(matrix) + 1)]


def mean_value(values: Sequence[float | None] | None) -> float | None:
    """Mean of the values that exist (None = not recorded); None when there are none."""
    present = [float(v) for v in values or () if v is not None]
    return float(np.mean(present)) if present else None


def mean_reward(rewards: Sequence[float | None] | None) -> float | None:
    """Mean episode reward; episodes without a reward (infrastructure errors) are skipped."""
    return mean_value(rewards)


def bootstrap_ci(values: Sequence[float], *, seed: int = 0, resamples: int = DEFAULT_RESAMPLES,
                 confidence: float = DEFAULT_CONFIDENCE,
                 statistic: Callable[[np.ndarray], np.ndarray] | None = None) -> tuple[float, float]:
    """Percentile bootstrap interval of a statistic (default: the mean) over per-task values.
    Tasks are the resampling unit because trials of one task are correlated."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap needs at least one value")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    rng = np.random.default_rng(seed)
    samples = data[rng.integers(0, data.size, size=(resamples, data.size))]
    stats = statistic(samples) if statistic else samples.mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(stats, [tail, 100 - tail])
    return float(low), float(high)


def distribution_summary(values: Sequence[float | None] | None) -> dict:
    """Count, mean, median and 95th percentile of the recorded values (None skipped)."""
    present = np.asarray([float(v) for v in values or () if v is not None], dtype=float)
    if present.size == 0:
        return {"count": 0, "mean": None, "median": None, "p95": None}
    return {"count": int(present.size), "mean": float(present.mean()),
            "median": float(np.median(present)), "p95": float(np.percentile(present, 95))}


def _ci_or_none(values: Sequence[float], seed: int, resamples: int, confidence: float):
    return list(bootstrap_ci(values, seed=seed, resamples=resamples, confidence=confidence)) if values else None


def _series(points: list[tuple[int, float | None, list | None]]) -> dict:
    """Column-oriented chart series: x, value and the CI band (None where undefined)."""
    return {"x": [p[0] for p in points], "value": [p[1] for p in points],
            "low": [p[2][0] if p[2] else None for p in points],
            "high": [p[2][1] if p[2] else None for p in points]}


def per_trial_series(matrix: SuccessMatrix, *, seed: int, resamples: int, confidence: float) -> dict:
    """Per-trial success with CI bands and the success/failure/error counts behind each point."""
    points, successes, failures, errors = [], [], [], []
    for trial in range(1, trial_count(matrix) + 1):
        outcomes = trial_outcomes(matrix, trial)
        rate = float(np.mean(outcomes)) if outcomes else None
        points.append((trial, rate, _ci_or_none(outcomes, seed, resamples, confidence)))
        successes.append(int(sum(outcomes)))
        failures.append(len(outcomes) - int(sum(outcomes)))
        errors.append(trial_errors(matrix, trial))
    return {**_series(points), "successes": successes, "failures": failures, "errors": errors}


def cumulative_series(matrix: SuccessMatrix, *, seed: int, resamples: int, confidence: float) -> dict:
    """Cumulative success by trial with CI bands (resampling the tasks with a verdict)."""
    tasks = tasks_with_verdict(matrix)
    points = []
    for trial, rate in enumerate(cumulative_success(matrix), start=1):
        solved = [solved_by(matrix[task_id], trial) for task_id in tasks]
        points.append((trial, rate, _ci_or_none(solved, seed, resamples, confidence)))
    return _series(points)


def pass_k_series(matrix: SuccessMatrix, *, seed: int, resamples: int, confidence: float) -> dict:
    """Pass^k for k = 1..(smallest n over the tasks with a verdict), with CI bands."""
    rows = {t: matrix[t] for t in tasks_with_verdict(matrix)}
    max_k = min((task_counts(r)[1] for r in rows.values()), default=0)
    points = []
    for k in range(1, max_k + 1):
        values = list(pass_k_by_task(rows, k).values())
        points.append((k, float(np.mean(values)), _ci_or_none(values, seed, resamples, confidence)))
    return _series(points)


def run_metrics(matrix: SuccessMatrix, *, rewards: Sequence[float | None] | None = None,
                turns: Sequence[float | None] | None = None, tokens: Sequence[float | None] | None = None,
                cost: Sequence[float | None] | None = None, latency: Sequence[float | None] | None = None,
                seed: int = 0, resamples: int = DEFAULT_RESAMPLES,
                confidence: float = DEFAULT_CONFIDENCE) -> dict:
    """Everything a run page needs, JSON-serialisable. The per-episode sequences (one value per
    episode, None where not recorded) are summarised independently of the matrix; having no
    task ids, the reward interval resamples episodes rather than tasks."""
    options = {"seed": seed, "resamples": resamples, "confidence": confidence}
    return {
        "tasks": len(matrix),
        "trials": trial_count(matrix),
        "matrix": {task_id: list(results) for task_id, results in matrix.items()},
        "errors": {"total": sum(task_counts(r)[2] for r in matrix.values()),
                   "tasks_without_verdict": sorted(set(matrix) - set(tasks_with_verdict(matrix)))},
        "per_trial": per_trial_series(matrix, **options),
        "cumulative": cumulative_series(matrix, **options),
        "pass_k": pass_k_series(matrix, **options),
        "reward": {"mean": mean_reward(rewards), "ci": _ci_or_none(
            [float(r) for r in rewards or () if r is not None], seed, resamples, confidence)},
        "turns": distribution_summary(turns),
        "tokens": distribution_summary(tokens),
        "cost": distribution_summary(cost),
        "latency": distribution_summary(latency),
        "bootstrap": options,
    }
