"""A/A calibration and power of the paired run comparison, by simulation (plain Python, no Django).

A/A: the episode outcomes of one finished run are resampled, per task, into two pseudo-runs that
differ only by chance (nothing is re-played), and the comparison the compare page makes is run on
them many times; the share of comparisons that name a winner is the false-positive rate, which
should be near the 5 % a 95 % interval promises. Power: the same, with a lift planted in the second
pseudo-run; the share of comparisons that name it the winner is the power at that lift.

Resampling a task's stored verdicts with replacement draws from that task's observed success rate,
so both pseudo-runs share each task's difficulty and between-trial variance, as two runs of one
configuration would. A lift of L points turns each failure of the second pseudo-run into a success
with chance L / (1 - mean success), which raises its expected success by exactly L.
"""
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from evaluation import metrics
from evaluation.environments import DEFAULT_ENVIRONMENT, environment

SIMULATION_RESAMPLES = 1000  # per comparison; the simulated rates are then stable to about 1 point


@dataclass(frozen=True)
class SimulationResult:
    """How often `comparisons` simulated comparisons named the second pseudo-run better or worse."""

    comparisons: int
    called: int  # the verdict named a winner (interval leaves out 0 and p < alpha)
    rejected: int  # p-value below alpha
    trials: int
    tasks: int
    lift: float

    @property
    def rate(self) -> float:
        return self.called / self.comparisons

    @property
    def p_rate(self) -> float:
        return self.rejected / self.comparisons

    def as_dict(self) -> dict:
        return {**asdict(self), "rate": self.rate, "p_rate": self.p_rate}


def scripted_outcomes(*, trials: int, error_rates: dict[str, float], seed: int = 0,
                      specs: list[dict] | None = None,
                      environment_name: str = DEFAULT_ENVIRONMENT) -> dict[str, list[bool]]:
    """Success matrix of real scripted episodes without memory (agenda customer), played in this
    process: the cheapest honest source of outcomes when no stored run is at hand. Trial t uses
    the seed a run with `seed` gives it, so the outcomes equal those of such a run."""
    world = environment(environment_name)
    matrix: dict[str, list[bool]] = {}
    for trial in range(1, trials + 1):
        episode_seed = seed * 1000 + trial
        for spec in specs or world.builtin_tasks():
            agent = world.scripted_agent(seed=episode_seed, key=spec["id"], error_rates=error_rates)
            outcome = world.play(task=spec, agent=agent, customer=world.scripted_customer(task=spec, seed=episode_seed))
            matrix.setdefault(spec["id"], []).append(outcome.reward.success)
    return matrix


def lift_flip_chance(matrix: metrics.SuccessMatrix, lift: float) -> float:
    """The chance of turning a failure into a success that raises mean success by `lift`."""
    verdicts = [r for results in matrix.values() for r in results if r is not None]
    failures = 1 - float(np.mean(verdicts))
    if lift < 0 or lift > failures:
        raise ValueError(f"a lift of {lift:.3f} cannot be planted on a run that fails {failures:.3f} of its trials")
    return lift / failures if lift else 0.0


@dataclass(frozen=True)
class OutcomePools:
    """Each task's stored verdicts, padded into one array so both pseudo-runs are drawn at once.
    Tasks that never got a verdict are left out, as the comparison leaves them out."""

    task_ids: list[str]
    verdicts: np.ndarray  # tasks x longest pool, padded with False
    sizes: np.ndarray  # verdicts per task

    @classmethod
    def of(cls, matrix: metrics.SuccessMatrix) -> "OutcomePools":
        pools = {t: [r for r in results if r is not None] for t, results in matrix.items()}
        pools = {t: pool for t, pool in pools.items() if pool}
        width = max(map(len, pools.values()))
        verdicts = np.array([pool + [False] * (width - len(pool)) for pool in pools.values()], dtype=bool)
        return cls(list(pools), verdicts, np.array([len(pool) for pool in pools.values()]))

    def draw(self, *, trials: int, rng: np.random.Generator) -> np.ndarray:
        """tasks x trials verdicts drawn with replacement from each task's own pool."""
        picks = rng.integers(0, self.sizes[:, None], size=(len(self.task_ids), trials))
        return np.take_along_axis(self.verdicts, picks, axis=1)

    def matrix(self, drawn: np.ndarray) -> dict[str, list[bool]]:
        return dict(zip(self.task_ids, drawn.tolist()))


def pseudo_runs(pools: OutcomePools, *, trials: int, rng: np.random.Generator,
                flip_chance: float = 0.0) -> tuple[dict[str, list[bool]], dict[str, list[bool]]]:
    """Two pseudo-runs of `trials` trials; failures of the second become successes with `flip_chance`."""
    first = pools.draw(trials=trials, rng=rng)
    second = pools.draw(trials=trials, rng=rng) | (rng.random(first.shape) < flip_chance)
    return pools.matrix(first), pools.matrix(second)


def _names_winner(difference: metrics.PairedDifference, lift: float) -> bool:
    """With a planted lift only the right winner counts; an A/A call on either side is false."""
    return difference.decided and (lift == 0 or difference.estimate > 0)


def comparisons_simulate(matrix: metrics.SuccessMatrix, *, comparisons: int = 1000, trials: int = 4,
                         lift: float = 0.0, seed: int = 0, alpha: float = metrics.DEFAULT_ALPHA,
                         resamples: int = SIMULATION_RESAMPLES) -> SimulationResult:
    """Run the compare page's paired comparison on `comparisons` pairs of pseudo-runs (lift 0: an
    A/A calibration; lift > 0: the power to detect that lift)."""
    rng, flip_chance, pools = np.random.default_rng(seed), lift_flip_chance(matrix, lift), OutcomePools.of(matrix)
    called = rejected = 0
    for number in range(comparisons):
        first, second = pseudo_runs(pools, trials=trials, rng=rng, flip_chance=flip_chance)
        difference = metrics.paired_compare(second, first, seed=seed + number, resamples=resamples,
                                            confidence=1 - alpha)
        called += _names_winner(difference, lift)
        rejected += difference.p_value < alpha
    return SimulationResult(comparisons=comparisons, called=called, rejected=rejected, trials=trials,
                            tasks=len(pools.task_ids), lift=lift)


def _crossing(curve: list[float], target: float) -> float | None:
    """The trial count (interpolated linearly between whole trials) where power first reaches target."""
    for trials in range(2, len(curve) + 1):
        below, above = curve[trials - 2], curve[trials - 1]
        if below < target <= above:
            return trials - 1 + (target - below) / (above - below)
    return None


def planner_check(matrix: metrics.SuccessMatrix, *, effect: float, max_trials: int = 10, comparisons: int = 400,
                  seed: int = 0, power: float = metrics.DEFAULT_POWER) -> dict:
    """The planner against simulation. It plans from an earlier 4-trial pseudo-run (as an operator
    plans from an earlier run), then simulated power at 1..max_trials trials says where the power
    is really reached; `ratio` is planned over simulated trials."""
    earlier, _ = pseudo_runs(OutcomePools.of(matrix), trials=4, rng=np.random.default_rng(seed))
    rates = metrics.TaskRates.of(earlier)
    planned = metrics.trials_for_power(effect=effect, tasks=len(earlier), rates=rates, power=power)
    curve = [comparisons_simulate(matrix, comparisons=comparisons, trials=trials, lift=effect, seed=seed + trials).rate
             for trials in range(1, max_trials + 1)]
    predicted = [metrics.comparison_power(effect=effect, trials=trials, tasks=len(earlier), rates=rates)
                 for trials in range(1, max_trials + 1)]
    simulated = _crossing(curve, power)
    return {"effect": effect, "variance": rates.variance, "mean": rates.mean, "square": rates.square,
            "planned": planned, "simulated": simulated,
            "ratio": planned / simulated if planned and simulated else None, "simulated_power": curve,
            "predicted_power": predicted}


def task_chances(matrix: metrics.SuccessMatrix) -> list[float]:
    """Each task's share of successes: the success chances its resampled pseudo-runs are drawn with."""
    pools = OutcomePools.of(matrix)
    return [float(row[:size].mean()) for row, size in zip(pools.verdicts, pools.sizes)]


def calibration_report(matrix: metrics.SuccessMatrix, *, comparisons: int = 1000, trials: int = 4,
                       lift: float = 0.10, effect: float = 0.07, planner_comparisons: int = 400,
                       power_comparisons: int = 4000, seed: int = 0) -> dict:
    """The A/A false-positive rate, the power at `lift`, the power prediction against simulation and the
    planner check at `effect`, for one run."""
    options = {"comparisons": comparisons, "trials": trials, "seed": seed}
    return {"aa": comparisons_simulate(matrix, **options).as_dict(),
            "power": comparisons_simulate(matrix, lift=lift, **options).as_dict(),
            "power_check": power_check(task_chances(matrix), effect=effect, comparisons=power_comparisons, seed=seed),
            "planner": planner_check(matrix, effect=effect, comparisons=planner_comparisons, seed=seed),
            "source": {"tasks": len(matrix), "trials": metrics.trial_count(matrix),
                       "success": metrics.pass_k(matrix, 1), "variance": metrics.between_trial_variance(matrix)}}


# --- the planner's power prediction against simulation ------------------------------------------

POWER_CHUNK = 500  # comparisons simulated per matrix product (memory: resamples x chunk floats)


def power_simulate(chances: Sequence[float], *, effect: float, trials: int, comparisons: int = 2000, seed: int = 0,
                   alpha: float = metrics.DEFAULT_ALPHA, resamples: int = metrics.DEFAULT_RESAMPLES) -> float:
    """Simulated power of the sign-flip test: tasks with these success chances, run A as they are, run B
    with each failure turned into a success with the lift's chance; the share of comparisons whose
    p-value (sampled sign patterns, the observed one counted in, as `metrics.sign_flip_p_value`) is below
    alpha with B ahead. Vectorised over comparisons, which share one set of sign patterns."""
    rng = np.random.default_rng(seed)
    rate_a = np.asarray(chances, dtype=float)
    rate_b = rate_a + (1 - rate_a) * metrics.lift_flip_chance(metrics.TaskRates.exact(rate_a), effect)
    signs = (2 * rng.integers(0, 2, size=(resamples, rate_a.size)) - 1).astype(float)
    found = 0
    for start in range(0, comparisons, POWER_CHUNK):
        size = min(POWER_CHUNK, comparisons - start)
        differences = (rng.binomial(trials, rate_b, size=(size, rate_a.size))
                       - rng.binomial(trials, rate_a, size=(size, rate_a.size))) / trials
        observed = differences.sum(axis=1)
        extreme = (np.abs(signs @ differences.T) >= np.abs(observed) - metrics.P_TOLERANCE).sum(axis=0)
        found += int(np.count_nonzero(((extreme + 1) / (resamples + 1) < alpha) & (observed > 0)))
    return found / comparisons


def power_check(chances: Sequence[float], *, effect: float, max_trials: int = 10, comparisons: int = 2000,
                seed: int = 0, resamples: int = metrics.DEFAULT_RESAMPLES) -> list[dict]:
    """Predicted (`metrics.comparison_power`, from the chances' mean and mean square only) against
    simulated power at 1..max_trials trials."""
    rates = metrics.TaskRates.exact(chances)
    return [{"trials": trials,
             "predicted": metrics.comparison_power(effect=effect, trials=trials, tasks=len(chances), rates=rates),
             "simulated": power_simulate(chances, effect=effect, trials=trials, comparisons=comparisons,
                                         seed=seed + trials, resamples=resamples)}
            for trials in range(1, max_trials + 1)]
