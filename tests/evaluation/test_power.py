"""The planner's power prediction (evaluation.metrics.comparison_power) against a seeded simulation of
the sign-flip test (evaluation.calibration_aa.power_simulate)."""
from statistics import NormalDist

import numpy as np

from evaluation import calibration_aa


def test_predicted_power_is_within_3_points_of_simulated_power_at_1_to_10_trials():
    # 130 tasks whose success chances spread like a scripted run's (many nearly always or never solved)
    chances = np.random.default_rng(0).beta(0.5, 0.4, size=130)
    rows = calibration_aa.power_check(chances, effect=0.07, comparisons=2000, resamples=500, seed=1)
    assert [row["trials"] for row in rows] == list(range(1, 11))
    assert max(abs(row["predicted"] - row["simulated"]) for row in rows) <= 0.03
    # the earlier planner (the baseline's between-trial variance for both arms, no task x arm interaction,
    # the permutation null's spread and granularity ignored) overstated power by more than that
    variance = float(np.mean(chances * (1 - chances)))
    earlier = [NormalDist().cdf(0.07 / (2 * variance / (row["trials"] * 130)) ** 0.5 - 1.959964) for row in rows]
    assert max(e - row["simulated"] for e, row in zip(earlier, rows)) > 0.05
