"""Metrics on hand-computed cases (no database)."""
import json
from math import comb

import numpy as np
import pytest

from evaluation import metrics

T, F, E = True, False, None


def test_it_computes_pass_hat_k_from_binomials():
    assert metrics.pass_hat_k(3, 5, 1) == pytest.approx(0.6)
    assert metrics.pass_hat_k(3, 5, 2) == pytest.approx(0.3)
    assert metrics.pass_hat_k(3, 5, 3) == pytest.approx(0.1)
    assert metrics.pass_hat_k(3, 5, 4) == 0.0
    assert metrics.pass_hat_k(5, 5, 5) == 1.0


def test_it_rejects_k_larger_than_n_and_bad_counts():
    with pytest.raises(ValueError, match="k=4 is larger than the number of trials n=3"):
        metrics.pass_hat_k(1, 3, 4)
    with pytest.raises(ValueError, match="c=6"):
        metrics.pass_hat_k(6, 5, 1)
    with pytest.raises(ValueError, match="at least 1"):
        metrics.pass_hat_k(1, 5, 0)


def test_it_averages_pass_k_over_tasks_with_n_per_task():
    matrix = {"a": [T, T, F, T, F], "b": [T, F, F], "c": [F, F]}
    # a: c=3 n=5; b: c=1 n=3; c: c=0 n=2
    assert metrics.pass_k(matrix, 1) == pytest.approx((0.6 + 1 / 3 + 0) / 3)
    assert metrics.pass_k(matrix, 2) == pytest.approx((0.3 + 0 + 0) / 3)
    assert metrics.pass_k_by_task(matrix, 2) == pytest.approx({"a": 0.3, "b": 0.0, "c": 0.0})


def test_it_names_the_task_whose_trials_are_fewer_than_k():
    matrix = {"a": [T, T, T], "short-one": [T, E, T]}
    with pytest.raises(ValueError, match=r"task 'short-one' has 2 trials with a verdict, fewer than k=3"):
        metrics.pass_k(matrix, 3)


def test_it_excludes_infrastructure_errors_from_pass_k():
    # errors shrink n instead of counting as failures: c=2, n=2 -> Pass^2 = 1
    assert metrics.pass_k({"a": [T, E, T]}, 2) == 1.0


def test_it_excludes_errors_from_per_trial_rates_and_counts_them_apart():
    matrix = {"a": [T, F, E], "b": [F, E, E], "c": [T, T, T], "d": [E, T, F]}
    assert metrics.per_trial_success(matrix) == pytest.approx([2 / 3, 2 / 3, 1 / 2])
    assert [metrics.trial_errors(matrix, t) for t in (1, 2, 3)] == [1, 1, 2]
    assert metrics.per_trial_success({"a": [E], "b": [E]}) == [None]


def test_it_computes_cumulative_success_as_solved_in_any_of_the_first_t_trials():
    matrix = {"a": [F, F, T], "b": [T, F, F], "c": [F, T, F], "d": [F, F, F]}
    assert metrics.cumulative_success(matrix) == pytest.approx([0.25, 0.5, 0.75])
    assert metrics.per_trial_success(matrix) == pytest.approx([0.25, 0.25, 0.25])


def test_it_keeps_cumulative_success_monotone_with_errors_and_ragged_rows():
    rng = np.random.default_rng(7)
    choices = np.array([True, False, None], dtype=object)
    matrix = {f"t{i}": list(rng.choice(choices, size=int(rng.integers(1, 11)), p=[0.3, 0.6, 0.1]))
              for i in range(60)}
    series = [v for v in metrics.cumulative_success(matrix)]
    assert len(series) == 10
    assert all(b >= a for a, b in zip(series, series[1:]))
    assert series[-1] == pytest.approx(
        np.mean([any(r is True for r in row) for t, row in matrix.items() if t in metrics.tasks_with_verdict(matrix)]))


def test_it_leaves_tasks_that_only_errored_out_of_cumulative_success():
    matrix = {"a": [T, F], "broken": [E, E], "b": [F, F]}
    assert metrics.cumulative_success(matrix) == pytest.approx([0.5, 0.5])
    assert metrics.tasks_with_verdict(matrix) == ["a", "b"]


def test_it_means_rewards_skipping_missing_ones():
    assert metrics.mean_reward([1.0, 0.0, None, 0.5]) == pytest.approx(0.5)
    assert metrics.mean_reward([]) is None
    assert metrics.mean_reward(None) is None


def test_it_bootstraps_deterministically_for_a_seed_and_brackets_the_estimate():
    values = [1.0] * 13 + [0.0] * 7
    first = metrics.bootstrap_ci(values, seed=3)
    assert first == metrics.bootstrap_ci(values, seed=3)
    continuous = [0.05 * i ** 1.3 for i in range(20)]
    assert metrics.bootstrap_ci(continuous, seed=3) != metrics.bootstrap_ci(continuous, seed=4)
    low, high = first
    assert low < np.mean(values) < high
    # normal approximation of the mean of 20 Bernoulli(0.65): ±1.96·sqrt(.65·.35/20) ≈ ±0.21
    assert low == pytest.approx(0.65 - 0.21, abs=0.06) and high == pytest.approx(0.65 + 0.21, abs=0.06)


def test_it_narrows_the_interval_with_lower_confidence_and_rejects_bad_input():
    values = [0.0, 0.2, 0.4, 0.9, 1.0, 0.3, 0.7]
    low95, high95 = metrics.bootstrap_ci(values, seed=1)
    low50, high50 = metrics.bootstrap_ci(values, seed=1, confidence=0.5)
    assert low95 < low50 < high50 < high95
    assert metrics.bootstrap_ci([0.4] * 5) == (pytest.approx(0.4), pytest.approx(0.4))
    with pytest.raises(ValueError, match="at least one value"):
        metrics.bootstrap_ci([])
    with pytest.raises(ValueError, match="confidence"):
        metrics.bootstrap_ci([1.0], confidence=1.5)


def test_it_summarises_turns_tokens_cost_and_latency():
    summary = metrics.distribution_summary([float(v) for v in range(1, 21)] + [None])
    assert summary == {"count": 20, "mean": 10.5, "median": 10.5, "p95": pytest.approx(19.05)}
    assert metrics.distribution_summary(None) == {"count": 0, "mean": None, "median": None, "p95": None}


def test_it_bundles_run_metrics_as_json_with_chart_series():
    matrix = {"a": [T, T, T], "b": [F, T, E], "c": [F, F, F], "d": [E, E, E]}
    result = metrics.run_metrics(matrix, rewards=[1, 0, None, 1], turns=[4, 6, 8], latency=[0.5, None],
                                 seed=5, resamples=500)
    decoded = json.loads(json.dumps(result))
    assert decoded["tasks"] == 4 and decoded["trials"] == 3
    assert decoded["errors"] == {"total": 4, "tasks_without_verdict": ["d"]}
    assert decoded["matrix"]["b"] == [False, True, None]
    per_trial = decoded["per_trial"]
    assert per_trial["x"] == [1, 2, 3]
    assert per_trial["value"] == pytest.approx([1 / 3, 2 / 3, 1 / 2])
    assert per_trial["successes"] == [1, 2, 1] and per_trial["failures"] == [2, 1, 1]
    assert per_trial["errors"] == [1, 1, 2]
    assert decoded["cumulative"]["value"] == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    # Pass^k stops at the smallest n among tasks with a verdict (b has n = 2)
    assert decoded["pass_k"]["x"] == [1, 2]
    assert decoded["pass_k"]["value"] == pytest.approx([(1 + 0.5 + 0) / 3, (1 + 0 + 0) / 3])
    for series in (per_trial, decoded["cumulative"], decoded["pass_k"]):
        for low, value, high in zip(series["low"], series["value"], series["high"]):
            assert low <= value + 1e-12 and value <= high + 1e-12
    assert decoded["reward"]["mean"] == pytest.approx(2 / 3)
    assert decoded["turns"]["median"] == 6.0 and decoded["latency"]["count"] == 1
    assert decoded["tokens"]["count"] == 0


def test_it_matches_pass_k_on_a_published_style_table():
    # 10 trials per task: Pass^k from closed form for tasks with c = 10, 7, 0 successes
    matrix = {"x": [T] * 10, "y": [T] * 7 + [F] * 3, "z": [F] * 10}
    for k in range(1, 11):
        expected = (1 + comb(7, k) / comb(10, k) + 0) / 3
        assert metrics.pass_k(matrix, k) == pytest.approx(expected)
    values = metrics.run_metrics(matrix, resamples=200)["pass_k"]["value"]
    assert all(b <= a for a, b in zip(values, values[1:]))


def test_per_trial_and_cumulative_bands_stay_open_when_every_task_fails_or_succeeds():
    matrix = {f"t{i}": [F, T] for i in range(20)}
    result = metrics.run_metrics(matrix)
    per_trial, cumulative = result["per_trial"], result["cumulative"]
    # Wilson's interval at 0/20 and 20/20 (z = 1.96): upper bound z^2 / (n + z^2) = 0.1611, mirrored
    assert per_trial["low"][0] == 0.0 and per_trial["high"][0] == pytest.approx(0.16113, abs=1e-4)
    assert per_trial["low"][1] == pytest.approx(1 - 0.16113, abs=1e-4) and per_trial["high"][1] == 1.0
    assert cumulative["low"][1] == pytest.approx(1 - 0.16113, abs=1e-4) and cumulative["high"][1] == 1.0
