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
from dataclasses import dataclass
from enum import StrEnum
from math import comb, floor, sqrt
from statistics import NormalDist

import numpy as np
from scipy import stats

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


def _proportion_band(successes: int, trials: int, confidence: float) -> list[float] | None:
    """Wilson's interval of a share of 0/1 outcomes (one per task): unlike a bootstrap over tasks it
    does not collapse to [0, 0] or [1, 1] when every task failed or every one succeeded."""
    return list(wilson_interval(successes, trials, confidence=confidence)) if trials else None


def per_trial_series(matrix: SuccessMatrix, *, confidence: float) -> dict:
    """Per-trial success with Wilson bands and the success/failure/error counts behind each point."""
    points, successes, failures, errors = [], [], [], []
    for trial in range(1, trial_count(matrix) + 1):
        outcomes = trial_outcomes(matrix, trial)
        solved = int(sum(outcomes))
        points.append((trial, solved / len(outcomes) if outcomes else None,
                       _proportion_band(solved, len(outcomes), confidence)))
        successes.append(solved)
        failures.append(len(outcomes) - solved)
        errors.append(trial_errors(matrix, trial))
    return {**_series(points), "successes": successes, "failures": failures, "errors": errors}


def cumulative_series(matrix: SuccessMatrix, *, confidence: float) -> dict:
    """Cumulative success by trial with Wilson bands over the tasks with a verdict."""
    tasks = tasks_with_verdict(matrix)
    points = []
    for trial, rate in enumerate(cumulative_success(matrix), start=1):
        solved = int(sum(solved_by(matrix[task_id], trial) for task_id in tasks))
        points.append((trial, rate, _proportion_band(solved, len(tasks), confidence)))
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
        "per_trial": per_trial_series(matrix, confidence=confidence),
        "cumulative": cumulative_series(matrix, confidence=confidence),
        "pass_k": pass_k_series(matrix, **options),
        "reward": {"mean": mean_reward(rewards), "ci": _ci_or_none(
            [float(r) for r in rewards or () if r is not None], seed, resamples, confidence)},
        "turns": distribution_summary(turns),
        "tokens": distribution_summary(tokens),
        "cost": distribution_summary(cost),
        "latency": distribution_summary(latency),
        "bootstrap": options,
    }


# --- paired comparison of two runs over the same tasks -----------------------------------------
#
# Two runs of one task set are compared task by task: each task contributes one difference (its
# success rate, or its Pass^k, in run A minus run B, over the trials both runs gave a verdict for),
# and the intervals and the test resample those per-task differences. Tasks are the unit because a
# task's trials share its difficulty; treating 130 tasks x 4 trials as 520 independent episodes
# would make every interval too narrow.

DEFAULT_POWER = 0.8
DEFAULT_ALPHA = 0.05
EXACT_SIGN_FLIPS = 16  # up to 2**16 sign patterns are enumerated; more are sampled
P_TOLERANCE = 1e-9  # per-task differences are float sums: equal statistics must tie, not miss by rounding


@dataclass(frozen=True)
class PairedDifference:
    """Run A minus run B: the estimate, its paired bootstrap interval and the sign-flip p-value."""

    estimate: float
    low: float
    high: float
    p_value: float
    tasks: int
    confidence: float

    @property
    def interval_excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    @property
    def significant(self) -> bool:
        return self.p_value < 1 - self.confidence

    @property
    def decided(self) -> bool:
        """A winner may be named only when the interval leaves out 0 and the sign-flip test agrees:
        on a handful of tasks the percentile bootstrap is far too narrow (3 tasks can leave out 0
        at p = 0.25), while the exact test is not."""
        return self.interval_excludes_zero and self.significant

    def as_dict(self) -> dict:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "p_value": self.p_value,
                "tasks": self.tasks, "confidence": self.confidence, "decided": self.decided,
                "interval_excludes_zero": self.interval_excludes_zero, "significant": self.significant}


def aligned_trials(a: Sequence[TrialResult], b: Sequence[TrialResult]) -> list[tuple[bool, bool]]:
    """The (A, B) verdict pairs of the trial numbers where both runs have a verdict: an error in
    either run removes that trial from both, so the two sides stay comparable."""
    return [(x, y) for x, y in zip(a, b) if x is not None and y is not None]


def common_tasks(a: SuccessMatrix, b: SuccessMatrix) -> list[str]:
    """Task ids of two runs that must cover the same tasks; a mismatch is named, not averaged away."""
    if set(a) != set(b):
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        raise ValueError(f"the runs cover different tasks (only in A: {only_a[:5]}, only in B: {only_b[:5]})")
    return sorted(a)


def paired_task_differences(a: SuccessMatrix, b: SuccessMatrix, *, k: int = 1) -> dict[str, float]:
    """Per task: Pass^k of A minus Pass^k of B over the aligned trials (k = 1 is the success rate).
    Tasks with fewer than k aligned trials carry no paired evidence and are left out."""
    differences = {}
    for task_id in common_tasks(a, b):
        pairs = aligned_trials(a[task_id], b[task_id])
        if len(pairs) >= k:
            c_a, c_b = sum(x for x, _ in pairs), sum(y for _, y in pairs)
            differences[task_id] = pass_hat_k(c_a, len(pairs), k) - pass_hat_k(c_b, len(pairs), k)
    return differences


def _sign_patterns(nonzero: int, seed: int, resamples: int) -> tuple[np.ndarray, bool]:
    """Every +/-1 pattern when there are few enough, else `resamples` random ones; and which."""
    if nonzero <= EXACT_SIGN_FLIPS:
        codes = np.arange(2 ** nonzero)[:, None] >> np.arange(nonzero) & 1
        return 1 - 2 * codes, True
    return 2 * np.random.default_rng(seed).integers(0, 2, size=(resamples, nonzero)) - 1, False


def sign_flip_p_value(differences: Sequence[float], *, seed: int = 0, resamples: int = DEFAULT_RESAMPLES) -> float:
    """Two-sided p-value of the paired permutation test over tasks. If the runs do not differ, which
    run a task's two results came from is arbitrary, so each per-task difference is as likely to
    carry either sign; the p-value is the share of sign assignments whose mean is at least as far
    from 0 as the observed one. Chosen over McNemar because it uses every trial of a task at once,
    keeps a task's correlated trials together, works for Pass^k as well as for success, and is
    exact for any number of tasks. Zero differences cannot change sign and are skipped; sampled
    patterns count the observed one, so the p-value is never 0."""
    data = np.asarray(differences, dtype=float)
    if data.size == 0:
        raise ValueError("the permutation test needs at least one task")
    nonzero = data[data != 0]
    signs, exact = _sign_patterns(nonzero.size, seed, resamples)
    extreme = int(np.count_nonzero(np.abs(signs @ nonzero) >= abs(nonzero.sum()) - P_TOLERANCE))
    return extreme / len(signs) if exact else (extreme + 1) / (len(signs) + 1)


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Exact two-sided McNemar test of one trial: of the tasks the runs disagree on, how unlikely a
    split at least this uneven is when either run is equally likely to be the one that solved it
    (a binomial test at 1/2). Shown per trial; it sees one trial at a time, so the headline test
    is the sign-flip test over whole tasks."""
    discordant = a_only + b_only
    if discordant == 0:
        return 1.0
    tail = sum(comb(discordant, i) for i in range(min(a_only, b_only) + 1))
    return min(1.0, 2 * tail / 2 ** discordant)


def paired_compare(a: SuccessMatrix, b: SuccessMatrix, *, k: int = 1, seed: int = 0,
                   resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE) -> PairedDifference:
    """Pass^k of run A minus run B (k = 1: per-trial success), with the bootstrap over whole tasks
    (the per-task differences are resampled, so a task's trials stay together) and the sign-flip
    p-value."""
    differences = list(paired_task_differences(a, b, k=k).values())
    if not differences:
        raise ValueError(f"no task has {k} trial(s) with a verdict in both runs")
    low, high = bootstrap_ci(differences, seed=seed, resamples=resamples, confidence=confidence)
    return PairedDifference(estimate=float(np.mean(differences)), low=low, high=high,
                            p_value=sign_flip_p_value(differences, seed=seed, resamples=resamples),
                            tasks=len(differences), confidence=confidence)


def _trial_pairs(a: SuccessMatrix, b: SuccessMatrix, trial: int) -> list[tuple[bool, bool]]:
    """The (A, B) verdicts of trial `trial` (1-based) for every task with a verdict in both."""
    pairs = []
    for task_id in common_tasks(a, b):
        row_a, row_b = a[task_id], b[task_id]
        if trial <= min(len(row_a), len(row_b)) and row_a[trial - 1] is not None and row_b[trial - 1] is not None:
            pairs.append((row_a[trial - 1], row_b[trial - 1]))
    return pairs


def per_trial_differences(a: SuccessMatrix, b: SuccessMatrix, *, seed: int = 0, resamples: int = DEFAULT_RESAMPLES,
                          confidence: float = DEFAULT_CONFIDENCE) -> list[dict]:
    """Trial t of A against trial t of B: the success difference, its paired interval and McNemar."""
    rows = []
    for trial in range(1, min(trial_count(a), trial_count(b)) + 1):
        pairs = _trial_pairs(a, b, trial)
        a_only, b_only = sum(x and not y for x, y in pairs), sum(y and not x for x, y in pairs)
        differences = [float(x) - float(y) for x, y in pairs]
        interval = _ci_or_none(differences, seed, resamples, confidence)
        rows.append({"trial": trial, "tasks": len(pairs), "a_only": a_only, "b_only": b_only,
                     "estimate": float(np.mean(differences)) if pairs else None,
                     "low": interval[0] if interval else None, "high": interval[1] if interval else None,
                     "p_value": mcnemar_exact(a_only, b_only)})
    return rows


def _points(value: float) -> str:
    return f"{100 * value:.1f}".replace("-", "\N{MINUS SIGN}")


def _p_text(p_value: float) -> str:
    return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.3f}"


def verdict_text(difference: PairedDifference, *, a_name: str, b_name: str,
                 measure: str = "per-trial success") -> str:
    """The comparison in one sentence, in percentage points. It names a winner only when the
    interval leaves out 0 and the p-value is below the level; otherwise it says the data cannot tell
    the runs apart, and which of the two disagrees."""
    level = f"{round(difference.confidence * 100)} % CI"
    interval = f"{level} {_points(difference.low)} to {_points(difference.high)}"
    if not difference.decided:
        start = f"No winner on {measure}: {a_name} minus {b_name} is {_points(difference.estimate)} points, "
        alpha = f"{1 - difference.confidence:.2f}"
        if difference.interval_excludes_zero:
            return (f"{start}{interval}, which leaves out no difference, but the sign-flip test does not agree "
                    f"({_p_text(difference.p_value)}, not below {alpha}).")
        if difference.significant:
            return (f"{start}{interval}, which includes no difference, although the sign-flip test gives "
                    f"{_p_text(difference.p_value)}.")
        return f"{start}{interval}, which includes no difference ({_p_text(difference.p_value)})."
    sign = 1 if difference.estimate > 0 else -1
    leader, other = (a_name, b_name) if sign > 0 else (b_name, a_name)
    low, high = sorted((sign * difference.low, sign * difference.high))
    return (f"{leader} is ahead of {other} by {_points(sign * difference.estimate)} points on {measure}, "
            f"{level} {_points(low)}\N{EN DASH}{_points(high)} ({_p_text(difference.p_value)}).")


# --- flips: tasks whose verdict changes between runs, or between trials of one run ---------------

class TaskVerdict(StrEnum):
    SOLVED = "solved"  # every trial with a verdict succeeded
    FAILED = "failed"  # every trial with a verdict failed
    MIXED = "mixed"  # some of each: the task flips between trials of the same run
    NONE = "no verdict"  # only infrastructure errors


def task_verdict(results: Sequence[TrialResult]) -> TaskVerdict:
    successes, trials, _ = task_counts(results)
    if trials == 0:
        return TaskVerdict.NONE
    if successes in (0, trials):
        return TaskVerdict.SOLVED if successes else TaskVerdict.FAILED
    return TaskVerdict.MIXED


def task_instability(results: Sequence[TrialResult]) -> float | None:
    """Share of consecutive trials (errors skipped) whose verdicts differ; None below 2 verdicts."""
    verdicts = [r for r in results if r is not None]
    if len(verdicts) < 2:
        return None
    return sum(x != y for x, y in zip(verdicts, verdicts[1:])) / (len(verdicts) - 1)


def _flip_side(results: Sequence[TrialResult]) -> dict:
    successes, trials, errors = task_counts(results)
    return {"successes": successes, "trials": trials, "errors": errors,
            "verdict": str(task_verdict(results)), "instability": task_instability(results)}


def task_flips(a: SuccessMatrix, b: SuccessMatrix) -> list[dict]:
    """One row per task: each run's verdict and instability, the aligned success difference (A - B),
    how many aligned trials disagree, and whether the verdict changed; largest differences first."""
    rows = []
    for task_id in common_tasks(a, b):
        pairs = aligned_trials(a[task_id], b[task_id])
        side_a, side_b = _flip_side(a[task_id]), _flip_side(b[task_id])
        rows.append({"task": task_id, "a": side_a, "b": side_b, "changed": side_a["verdict"] != side_b["verdict"],
                     "discordant": sum(x != y for x, y in pairs),
                     "difference": float(np.mean([x - y for x, y in pairs])) if pairs else None})
    return sorted(rows, key=lambda row: (-abs(row["difference"] or 0), row["task"]))


def run_instability(matrix: SuccessMatrix) -> dict:
    """How unstable one run is: the tasks that flip between its trials, and the mean instability."""
    verdicts = [task_verdict(results) for results in matrix.values()]
    judged = [v for v in verdicts if v != TaskVerdict.NONE]
    mixed = sum(v == TaskVerdict.MIXED for v in judged)
    return {"tasks": len(judged), "mixed": mixed, "share_mixed": mixed / len(judged) if judged else None,
            "mean_instability": mean_value([task_instability(r) for r in matrix.values()])}


# --- power: how many trials a comparison needs, and what a finished run could have detected ------
#
# The comparison is the sign-flip test over the per-task differences d_t = success of B minus success
# of A over n trials each. Its power depends on three things, each modelled here:
# - each arm's own between-trial variance (p(1-p)/n per task, with B's p raised by the lift);
# - how unevenly the lift falls on the tasks (the task x arm interaction): a lift cannot raise a task
#   that always succeeds, so the per-task effects differ, which widens the permutation null, whose
#   spread is the root of the sum of d_t^2 rather than the sampling spread of the sum of d_t;
# - the null's granularity: d_t moves in steps of 1/n, so a continuity correction of 1/n applies.
# A lift of L points is modelled as the A/A calibration plants it (evaluation/calibration_aa.py): each
# failure becomes a success with chance L / (1 - mean success). Task success chances are described by
# their mean and mean square, estimated without bias from earlier runs, and spread as a Beta
# distribution with those moments. docs/STATISTICS.md has the simulation that checks the prediction.

POWER_GRID = 200  # representative tasks the Beta distribution of success chances is evaluated at
MAX_PLANNED_TRIALS = 1000  # beyond this the planner says the effect cannot be reached over these tasks


@dataclass(frozen=True)
class TaskRates:
    """How likely the tasks are to succeed in the baseline arm: the mean over tasks of the success
    chance p and of p^2. mean - square is the mean between-trial variance p(1-p); square - mean^2 is
    how much the tasks differ in difficulty."""

    mean: float
    square: float
    tasks: int = 0  # tasks the moments were estimated from (0: the stated default)

    @classmethod
    def default(cls) -> "TaskRates":
        """Every task at p = 0.5, the largest between-trial variance a 0/1 outcome has: with no
        earlier run the planner asks for more trials than needed rather than fewer."""
        return cls(mean=0.5, square=0.25)

    @classmethod
    def of(cls, *matrices: SuccessMatrix) -> "TaskRates | None":
        """Unbiased moments from the tasks (of all given runs) with two verdicts or more: c/n estimates
        p and c(c-1)/(n(n-1)) estimates p^2. None when no task has two verdicts."""
        counts = [(c, n) for matrix in matrices for c, n, _ in map(task_counts, matrix.values()) if n >= 2]
        if not counts:
            return None
        return cls(mean=float(np.mean([c / n for c, n in counts])),
                   square=float(np.mean([c * (c - 1) / (n * (n - 1)) for c, n in counts])), tasks=len(counts))

    @classmethod
    def exact(cls, chances: Sequence[float]) -> "TaskRates":
        """The moments of known success chances (a simulation's planted truth)."""
        values = np.asarray(chances, dtype=float)
        return cls(mean=float(values.mean()), square=float((values ** 2).mean()), tasks=len(values))

    @property
    def variance(self) -> float:
        """The mean between-trial variance, E[p(1-p)] (what `between_trial_variance` estimates)."""
        return self.mean - self.square

    def grid(self) -> tuple[np.ndarray, np.ndarray]:
        """Representative success chances and their weights: the Beta distribution with these moments
        at `POWER_GRID` quantiles, or its limits (every task alike; every task always or never solved)."""
        spread = min(max(self.square - self.mean ** 2, 0.0), self.mean * (1 - self.mean))
        if spread < 1e-9:
            return np.array([self.mean]), np.array([1.0])
        if spread > self.mean * (1 - self.mean) - 1e-9:
            return np.array([0.0, 1.0]), np.array([1 - self.mean, self.mean])
        size = self.mean * (1 - self.mean) / spread - 1  # alpha + beta of the Beta distribution
        quantiles = (np.arange(POWER_GRID) + 0.5) / POWER_GRID
        rates = stats.beta.ppf(quantiles, self.mean * size, (1 - self.mean) * size)
        return rates, np.full(POWER_GRID, 1 / POWER_GRID)


def between_trial_variance(*matrices: SuccessMatrix) -> float | None:
    """Mean over tasks (of all given runs) of the unbiased variance of a task's 0/1 trial results,
    c(n-c) / (n(n-1)); None when no task has two verdicts."""
    rates = TaskRates.of(*matrices)
    return rates.variance if rates else None


def _check_power(power: float, alpha: float) -> None:
    if not (0 < power < 1 and 0 < alpha < 1):
        raise ValueError(f"power and alpha must lie strictly between 0 and 1, got {power} and {alpha}")


def lift_flip_chance(rates: TaskRates, effect: float) -> float:
    """The chance of turning a failure into a success that raises mean success by `effect`."""
    if effect < 0 or effect >= 1 - rates.mean:
        raise ValueError(f"a lift of {100 * effect:.1f} points cannot be reached from a success rate of "
                         f"{100 * rates.mean:.1f} %")
    return effect / (1 - rates.mean)


def _mean_moments(rate: np.ndarray, trials: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Variance, third and fourth central moments of the success share of `trials` Bernoulli trials."""
    spread = rate * (1 - rate)
    return (spread / trials, spread * (1 - 2 * rate) / trials ** 2,
            spread * (1 + 3 * (trials - 2) * spread) / trials ** 3)


def _difference_moments(rate_a: np.ndarray, rate_b: np.ndarray, trials: float) -> list[np.ndarray]:
    """Raw moments 1-4 of a task's difference d = success share of B minus that of A, per task."""
    (var_a, third_a, fourth_a), (var_b, third_b, fourth_b) = _mean_moments(rate_a, trials), _mean_moments(rate_b, trials)
    shift, var, third, fourth = rate_b - rate_a, var_a + var_b, third_b - third_a, fourth_a + fourth_b + 6 * var_a * var_b
    return [shift, shift ** 2 + var, shift ** 3 + 3 * shift * var + third,
            shift ** 4 + 6 * shift ** 2 * var + 4 * shift * third + fourth]


def comparison_power(*, effect: float, trials: float, tasks: int, rates: TaskRates,
                     alpha: float = DEFAULT_ALPHA) -> float:
    """The chance that the sign-flip test over `tasks` tasks of `trials` trials per run finds a lift of
    `effect` (a fraction) on the right side. With S the sum of d_t and Q the sum of d_t^2, the test
    rejects when S >= z sqrt(Q) + 1/n; S and sqrt(Q) are taken as jointly normal (delta method), from
    the per-task moments of d_t averaged over the distribution of success chances."""
    if trials < 1 or tasks < 1:
        raise ValueError(f"trials and tasks must be at least 1, got {trials} and {tasks}")
    rate_a, weight = rates.grid()
    rate_b = rate_a + (1 - rate_a) * lift_flip_chance(rates, effect)
    m1, m2, m3, m4 = _difference_moments(rate_a, rate_b, trials)
    count = tasks * weight  # how many of the tasks each representative success chance stands for
    sum_mean, square_mean = (count * m1).sum(), (count * m2).sum()
    if square_mean <= 0:  # no task ever differs: the test can never reject
        return 0.0
    sum_var, square_var = (count * (m2 - m1 ** 2)).sum(), (count * (m4 - m2 ** 2)).sum()
    covariance = (count * (m3 - m1 * m2)).sum()
    z = NormalDist().inv_cdf(1 - alpha / 2)
    margin = sum_mean - z * (sqrt(square_mean) - square_var / (8 * square_mean ** 1.5)) - 1 / trials
    spread = sum_var + z * z * square_var / (4 * square_mean) - z * covariance / sqrt(square_mean)
    if spread <= 0:
        return 1.0 if margin > 0 else 0.0
    return NormalDist().cdf(margin / sqrt(spread))


def trials_for_power(*, effect: float, tasks: int, rates: TaskRates, power: float = DEFAULT_POWER,
                     alpha: float = DEFAULT_ALPHA) -> float | None:
    """Trials per run (unrounded, at least 1) at which the comparison reaches `power` for a lift of
    `effect`; None when no number of trials up to `MAX_PLANNED_TRIALS` does: with few tasks whose lifts
    differ, the sign-flip test cannot get below alpha however many trials each task gets."""
    _check_power(power, alpha)
    if effect <= 0 or tasks < 1:
        raise ValueError(f"effect must be positive and tasks at least 1, got {effect} and {tasks}")

    def reached(trials: float) -> bool:
        return comparison_power(effect=effect, trials=trials, tasks=tasks, rates=rates, alpha=alpha) >= power

    if reached(1):
        return 1.0
    if not reached(MAX_PLANNED_TRIALS):
        return None
    return _bisect(reached, 1.0, float(MAX_PLANNED_TRIALS))


def _bisect(reached: Callable[[float], bool], low: float, high: float, *, tolerance: float = 1e-4) -> float:
    """The point where `reached` turns true (false at low, true at high)."""
    while high - low > tolerance * max(1.0, low):
        middle = (low + high) / 2
        low, high = (low, middle) if reached(middle) else (middle, high)
    return high


def trials_needed(*, effect: float, tasks: int, rates: TaskRates, power: float = DEFAULT_POWER,
                  alpha: float = DEFAULT_ALPHA) -> int | None:
    """The whole trials per run that reach `power` (None: not reachable over these tasks)."""
    planned = trials_for_power(effect=effect, tasks=tasks, rates=rates, power=power, alpha=alpha)
    if planned is None:
        return None
    whole = max(1, floor(planned))
    reaches = comparison_power(effect=effect, trials=whole, tasks=tasks, rates=rates, alpha=alpha) >= power
    return whole if reaches else whole + 1


def minimum_detectable_effect(*, trials: int, tasks: int, rates: TaskRates, power: float = DEFAULT_POWER,
                              alpha: float = DEFAULT_ALPHA) -> float | None:
    """The smallest lift (a fraction) that `trials` x `tasks` finds with the power; None when even the
    largest lift these success rates allow is not found that often."""
    _check_power(power, alpha)
    if trials < 1 or tasks < 1:
        raise ValueError(f"trials and tasks must be at least 1, got {trials} and {tasks}")
    largest = (1 - rates.mean) * (1 - 1e-6)

    def reached(effect: float) -> bool:
        return comparison_power(effect=effect, trials=trials, tasks=tasks, rates=rates, alpha=alpha) >= power

    if largest <= 0 or not reached(largest):
        return None
    return _bisect(reached, 0.0, largest)


def run_minimum_detectable_effect(matrix: SuccessMatrix, *, power: float = DEFAULT_POWER,
                                  alpha: float = DEFAULT_ALPHA) -> dict:
    """What a finished run could have detected against a run like it (same size and tasks), for a lift
    on top of its own success (see `comparison_power`)."""
    rates = TaskRates.of(matrix)
    tasks = len(tasks_with_verdict(matrix))
    summary = {"variance": rates.variance if rates else None, "trials": trial_count(matrix), "tasks": tasks,
               "success": rates.mean if rates else None}
    if rates is None or tasks == 0:
        return {"effect": None, **summary}
    return {"effect": minimum_detectable_effect(trials=trial_count(matrix), tasks=tasks, rates=rates, power=power,
                                                alpha=alpha), **summary}


def _common_k(a: SuccessMatrix, b: SuccessMatrix) -> int:
    """The largest k every task with aligned trials supports, so each Pass^k compares the same tasks."""
    counts = [len(aligned_trials(a[t], b[t])) for t in common_tasks(a, b)]
    return min((n for n in counts if n > 0), default=0)


def paired_metrics(a: SuccessMatrix, b: SuccessMatrix, *, a_name: str = "A", b_name: str = "B", seed: int = 0,
                   resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE) -> dict:
    """Everything a comparison page needs about run A against run B, JSON-serialisable: the
    per-trial success difference with its verdict, Pass^k differences, trial-by-trial McNemar,
    the flip table and each run's instability."""
    options = {"seed": seed, "resamples": resamples, "confidence": confidence}
    success, flips = paired_compare(a, b, k=1, **options), task_flips(a, b)
    pass_k_rows = [{"k": k, **paired_compare(a, b, k=k, **options).as_dict()} for k in range(1, _common_k(a, b) + 1)]
    return {"success": success.as_dict(), "verdict": verdict_text(success, a_name=a_name, b_name=b_name),
            "pass_k": pass_k_rows, "per_trial": per_trial_differences(a, b, **options),
            "flips": flips, "changed": sum(row["changed"] for row in flips),
            "instability": {"a": run_instability(a), "b": run_instability(b)},
            "test": "paired sign-flip permutation test over tasks", "bootstrap": options}


# --- what one memory is worth: success with it served against success with it withheld ----------
#
# With randomised withholding, each memory retrieved for an episode is kept out of the prompt with
# a fixed chance, decided once per (episode, memory). Served and withheld episodes then differ only
# by chance and by the memory, so the difference in their success rates estimates its effect.

MIN_RETRIEVALS = 30  # below this many episodes the interval is too wide to say anything


def wilson_interval(successes: int, trials: int, *, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a proportion; unlike the textbook p ± z·se it stays inside [0, 1]
    and keeps its coverage near 0 and 1, where harmful or perfect memories sit."""
    if trials == 0:
        return 0.0, 1.0
    z, rate = NormalDist().inv_cdf(1 - (1 - confidence) / 2), successes / trials
    centre = (rate + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z / (1 + z * z / trials) * sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials))
    return max(0.0, centre - half), min(1.0, centre + half)  # rounding must not step outside [0, 1]


def difference_interval(successes_a: int, trials_a: int, successes_b: int, trials_b: int, *,
                        confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Newcombe's hybrid score interval of rate A minus rate B (two independent groups), built from
    the two Wilson intervals; it behaves with small groups and rates near 0 or 1."""
    rate_a, rate_b = successes_a / trials_a, successes_b / trials_b
    low_a, high_a = wilson_interval(successes_a, trials_a, confidence=confidence)
    low_b, high_b = wilson_interval(successes_b, trials_b, confidence=confidence)
    difference = rate_a - rate_b
    return (difference - sqrt((rate_a - low_a) ** 2 + (high_b - rate_b) ** 2),
            difference + sqrt((high_a - rate_a) ** 2 + (rate_b - low_b) ** 2))


@dataclass(frozen=True)
class MemoryEffect:
    """Success of the episodes a memory was served in minus those it was withheld from."""

    served: int
    served_successes: int
    withheld: int
    withheld_successes: int
    estimate: float | None
    low: float | None
    high: float | None

    @property
    def harmful(self) -> bool:
        """Flag for review: even the most favourable end of the interval says it lowers success."""
        return self.high is not None and self.high < 0

    def as_dict(self) -> dict:
        return {**self.__dict__, "harmful": self.harmful}


def memory_effect(outcomes: Sequence[tuple[bool, bool]], *, confidence: float = DEFAULT_CONFIDENCE,
                  min_retrievals: int = MIN_RETRIEVALS) -> MemoryEffect:
    """From one (served, success) pair per episode the memory was retrieved for; the estimate and its
    interval stay None until it was retrieved `min_retrievals` times with at least one episode on
    each side."""
    served = [success for was_served, success in outcomes if was_served]
    withheld = [success for was_served, success in outcomes if not was_served]
    return memory_effect_of_counts(served=len(served), served_successes=sum(served), withheld=len(withheld),
                                   withheld_successes=sum(withheld), confidence=confidence,
                                   min_retrievals=min_retrievals)


def memory_effect_of_counts(*, served: int, served_successes: int, withheld: int, withheld_successes: int,
                            confidence: float = DEFAULT_CONFIDENCE, min_retrievals: int = MIN_RETRIEVALS) -> MemoryEffect:
    """`memory_effect` from the four counts."""
    counts = {"served": served, "served_successes": served_successes, "withheld": withheld,
              "withheld_successes": withheld_successes}
    if served + withheld < min_retrievals or not served or not withheld:
        return MemoryEffect(**counts, estimate=None, low=None, high=None)
    low, high = difference_interval(served_successes, served, withheld_successes, withheld, confidence=confidence)
    return MemoryEffect(**counts, estimate=served_successes / served - withheld_successes / withheld, low=low, high=high)


def memory_effects_by_harm(effects: Mapping[str, MemoryEffect]) -> list[tuple[str, MemoryEffect]]:
    """Memories with an estimate, most harmful first (lowest upper bound, then lowest estimate)."""
    estimated = [(key, effect) for key, effect in effects.items() if effect.estimate is not None]
    return sorted(estimated, key=lambda item: (item[1].high, item[1].estimate, item[0]))


# --- the harm flag: error control across a run's looks and a bank's memories ------------------
#
# A run looks at its memories' effects after every trial, and at every memory of the bank; testing
# each at 5 % every time would flag memories that do no harm far more often than 5 %. The flag is
# instead controlled family-wise: the chance that a run flags ANY memory of the bank that does not
# lower success is at most HARM_ERROR_RATE. Across looks the rate is split equally over the run's
# planned trials (Bonferroni, the simplest alpha spending: early looks keep the power to catch a
# harmful memory soon); within a look Holm's step-down runs over the memories tested there.

HARM_ERROR_RATE = 0.05
HARM_FLAG_RULE = ("At each trial end of a run with withholding, Fisher's one-sided exact test on the run's own "
                  "episodes, at the error rate divided by the run's planned trials, with Holm's correction over the "
                  "bank's memories tested there: the chance that a run flags any memory that does not lower success "
                  "is at most the error rate (family-wise).")


def harm_p_values(effects: Mapping[str, MemoryEffect] | Mapping[int, MemoryEffect]) -> dict:
    """One-sided p-value of "serving it does not lower success" for each memory with an estimate:
    Fisher's exact test, which is the randomisation test here. If the memory made no difference, the
    successful episodes would have succeeded either way, and withholding picked at random which of
    them were served; the p-value is the chance that a random pick serves this few successes."""
    estimated = [(key, effect) for key, effect in effects.items() if effect.estimate is not None]
    if not estimated:
        return {}
    served = np.array([e.served for _, e in estimated])
    episodes = served + np.array([e.withheld for _, e in estimated])
    successes = np.array([e.served_successes + e.withheld_successes for _, e in estimated])
    tails = stats.hypergeom.cdf(np.array([e.served_successes for _, e in estimated]), episodes, successes, served)
    return {key: float(tail) for (key, _), tail in zip(estimated, np.atleast_1d(tails))}


def look_error_rate(*, look: int, looks: int, rate: float = HARM_ERROR_RATE) -> float:
    """The error rate spent at trial end `look` of `looks` planned: an equal share, so all the looks
    together spend at most `rate`; a look beyond the plan has none left."""
    if looks < 1 or look < 1:
        raise ValueError(f"look and looks must be at least 1, got {look} and {looks}")
    return rate / looks if look <= looks else 0.0


def holm_rejections(p_values: Mapping, *, alpha: float) -> list:
    """Holm's step-down: the i-th smallest p-value of m is rejected while each so far lies at or below
    alpha / (m - i + 1); family-wise error at most alpha, whatever the dependence between the tests."""
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    rejected = []
    for rank, (key, p_value) in enumerate(ordered):
        if p_value > alpha / (len(ordered) - rank):
            break
        rejected.append(key)
    return rejected


def harmful_memories(effects: Mapping, *, look: int = 1, looks: int = 1, rate: float = HARM_ERROR_RATE) -> list:
    """The memories to flag at this look (see the section comment); with one look and one memory it is
    the one-sided test at `rate`."""
    return holm_rejections(harm_p_values(effects), alpha=look_error_rate(look=look, looks=looks, rate=rate))


def harm_guarantee_text(*, looks: int, memories: int, rate: float = HARM_ERROR_RATE) -> str:
    """The error rate the flag guarantees, in one sentence for the pages and the flag note."""
    return (f"A flag errs at most {100 * rate:g} % of the time: the chance that a run flags any memory that does "
            f"not lower success is at most {100 * rate:g} %, over its {looks} trial end{'s' if looks != 1 else ''} "
            f"(each spends {100 * rate / looks:.2g} %) and the bank's memories tested there "
            f"({memories} at this look, Holm's correction; Fisher's exact one-sided test).")

