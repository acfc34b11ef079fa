"""Paired comparison of two runs, flips and the trial planner: hand-computed cases and scipy."""
import json

import numpy as np
import pytest
from scipy import stats

from evaluation import metrics

T, F, E = True, False, None

RUN_A = {"x": [T, T, F, T], "y": [F, F, F, F], "z": [T, E, T, T]}
RUN_B = {"x": [T, F, F, F], "y": [T, F, F, F], "z": [T, T, F, E]}


def _mean_difference(x, y, axis):
    return np.mean(x - y, axis=axis)


def test_it_pairs_tasks_over_the_trials_both_runs_judged():
    # z: trial 2 errored in A and trial 4 in B, so only trials 1 and 3 pair up: A 2/2, B 1/2
    assert metrics.paired_task_differences(RUN_A, RUN_B) == pytest.approx({"x": 0.5, "y": -0.25, "z": 0.5})
    # Pass^2: x 3 of 4 -> C(3,2)/C(4,2) = 0.5 against 0; z 1 against 0
    assert metrics.paired_task_differences(RUN_A, RUN_B, k=2) == pytest.approx({"x": 0.5, "y": 0.0, "z": 1.0})


def test_it_refuses_runs_over_different_tasks_and_names_them():
    with pytest.raises(ValueError, match=r"only in A: \['y'\], only in B: \['w'\]"):
        metrics.paired_compare({"x": [T], "y": [F]}, {"x": [T], "w": [T]})


def test_it_computes_the_exact_sign_flip_p_value_by_hand():
    # 8 sign patterns of (1, 1, 1): only +++ and --- reach |sum| = 3
    assert metrics.sign_flip_p_value([1, 1, 1]) == 0.25
    # zeros cannot flip and leave the p-value unchanged
    assert metrics.sign_flip_p_value([1, 1, 1, 0, 0]) == 0.25
    # |±1 ±0.5 ±0.25| is 1.75, 1.25, 0.75 or 0.25, twice each; the observed 1.25 is matched by 4 of 8
    assert metrics.sign_flip_p_value([1, 0.5, -0.25]) == 0.5
    assert metrics.sign_flip_p_value([0, 0]) == 1.0


def test_it_matches_scipys_exact_paired_permutation_test():
    rng = np.random.default_rng(11)
    for size in (4, 9, 14):
        x, y = rng.integers(0, 5, size) / 4, rng.integers(0, 5, size) / 4
        expected = stats.permutation_test((x, y), _mean_difference, permutation_type="samples",
                                          n_resamples=np.inf, vectorized=True).pvalue
        assert metrics.sign_flip_p_value(x - y) == pytest.approx(expected)


def test_it_samples_sign_flips_for_many_tasks_like_scipy_does():
    rng = np.random.default_rng(5)
    x, y = rng.integers(0, 5, 130) / 4, rng.integers(0, 5, 130) / 4 - 0.05
    expected = stats.permutation_test((x, y), _mean_difference, permutation_type="samples", n_resamples=20000,
                                      vectorized=True, random_state=1).pvalue
    ours = metrics.sign_flip_p_value(x - y, resamples=20000, seed=2)
    assert ours == pytest.approx(expected, abs=0.01)
    assert ours == metrics.sign_flip_p_value(x - y, resamples=20000, seed=2)
    assert metrics.sign_flip_p_value([1.0] * 40, resamples=99) == pytest.approx(1 / 100)


@pytest.mark.parametrize("a_only,b_only", [(0, 0), (3, 0), (5, 1), (7, 7), (2, 11), (40, 22), (0, 25)])
def test_it_matches_scipys_binomial_test_for_exact_mcnemar(a_only, b_only):
    expected = stats.binomtest(a_only, a_only + b_only, 0.5).pvalue if a_only + b_only else 1.0
    assert metrics.mcnemar_exact(a_only, b_only) == pytest.approx(expected)


def test_it_compares_per_trial_success_with_a_paired_interval_and_p_value():
    difference = metrics.paired_compare(RUN_A, RUN_B, seed=4, resamples=1000)
    assert difference.estimate == pytest.approx((0.5 - 0.25 + 0.5) / 3)
    assert difference.low <= difference.estimate <= difference.high
    # per-task differences 0.5, -0.25, 0.5: |±0.5 ±0.25 ±0.5| reaches 0.75 for 4 of the 8 patterns
    assert difference.p_value == 0.5
    assert difference.tasks == 3 and not difference.decided
    assert difference == metrics.paired_compare(RUN_A, RUN_B, seed=4, resamples=1000)


def test_it_resamples_whole_tasks_so_identical_trials_do_not_narrow_the_interval():
    # Every task repeats its verdict in all 8 trials: 8 trials carry no more evidence than 1.
    one = {f"t{i}": [i % 3 == 0] for i in range(30)}
    other = {f"t{i}": [i % 2 == 0] for i in range(30)}
    eight = ({t: r * 8 for t, r in one.items()}, {t: r * 8 for t, r in other.items()})
    single, repeated = metrics.paired_compare(one, other, seed=1), metrics.paired_compare(*eight, seed=1)
    assert (single.low, single.high) == pytest.approx((repeated.low, repeated.high))


def test_it_reports_each_trials_difference_with_mcnemar():
    rows = metrics.per_trial_differences(RUN_A, RUN_B, resamples=200)
    assert [row["tasks"] for row in rows] == [3, 2, 3, 2]
    # trial 3: x F/F, y F/F, z T/F -> A alone solved one task
    assert (rows[2]["a_only"], rows[2]["b_only"], rows[2]["estimate"]) == (1, 0, pytest.approx(1 / 3))
    assert rows[2]["p_value"] == 1.0
    # trial 1: x T/T, y F/T, z T/T -> B alone solved one
    assert (rows[0]["a_only"], rows[0]["b_only"]) == (0, 1)


def test_it_names_a_winner_only_when_the_interval_leaves_out_zero_and_p_is_below_5_percent():
    ahead = metrics.PairedDifference(estimate=0.081, low=0.032, high=0.130, p_value=0.002, tasks=130, confidence=0.95)
    assert metrics.verdict_text(ahead, a_name="MemOrb", b_name="no memory") == (
        "MemOrb is ahead of no memory by 8.1 points on per-trial success, 95 % CI 3.2–13.0 (p = 0.002).")
    behind = metrics.PairedDifference(estimate=-0.05, low=-0.09, high=-0.01, p_value=0.0004, tasks=130,
                                      confidence=0.95)
    assert metrics.verdict_text(behind, a_name="MemOrb", b_name="no memory", measure="Pass^2") == (
        "no memory is ahead of MemOrb by 5.0 points on Pass^2, 95 % CI 1.0–9.0 (p < 0.001).")
    tie = metrics.PairedDifference(estimate=0.012, low=-0.03, high=0.054, p_value=0.61, tasks=130, confidence=0.95)
    assert metrics.verdict_text(tie, a_name="MemOrb", b_name="no memory") == (
        "No winner on per-trial success: MemOrb minus no memory is 1.2 points, 95 % CI −3.0 to 5.4, "
        "which includes no difference (p = 0.610).")


def test_it_names_no_winner_on_three_tasks_where_the_interval_and_the_test_disagree():
    # Every task is ahead in A: the bootstrap interval leaves out 0, but 3 signs give at best p = 2/8.
    ahead = {"x": [T, T, T, T], "y": [T, T, F, T], "z": [T, T, T, F]}
    behind = {"x": [F, F, F, F], "y": [F, F, F, T], "z": [F, T, F, F]}
    difference = metrics.paired_compare(ahead, behind, seed=0, resamples=1000)
    assert difference.interval_excludes_zero and difference.p_value == 0.25
    assert not difference.significant and not difference.decided
    assert metrics.verdict_text(difference, a_name="MemOrb", b_name="no memory") == (
        "No winner on per-trial success: MemOrb minus no memory is 66.7 points, 95 % CI 50.0 to 100.0, "
        "which leaves out no difference, but the sign-flip test does not agree (p = 0.250, not below 0.05).")


def test_it_says_so_when_the_test_rejects_but_the_interval_covers_zero():
    edge = metrics.PairedDifference(estimate=0.03, low=-0.001, high=0.06, p_value=0.045, tasks=130, confidence=0.95)
    assert not edge.decided
    assert metrics.verdict_text(edge, a_name="MemOrb", b_name="no memory") == (
        "No winner on per-trial success: MemOrb minus no memory is 3.0 points, 95 % CI −0.1 to 6.0, "
        "which includes no difference, although the sign-flip test gives p = 0.045.")


def test_it_lists_flips_between_runs_and_instability_within_a_run():
    rows = {row["task"]: row for row in metrics.task_flips(RUN_A, RUN_B)}
    assert rows["x"]["a"] == {"successes": 3, "trials": 4, "errors": 0, "verdict": "mixed", "instability": 2 / 3}
    assert rows["y"]["a"]["verdict"] == "failed" and rows["y"]["b"]["verdict"] == "mixed"
    assert rows["z"]["a"]["verdict"] == "solved" and rows["z"]["changed"]
    assert not rows["x"]["changed"] and rows["x"]["discordant"] == 2
    assert [row["task"] for row in metrics.task_flips(RUN_A, RUN_B)] == ["x", "z", "y"]
    assert metrics.run_instability(RUN_B) == {"tasks": 3, "mixed": 3, "share_mixed": 1.0,
                                              "mean_instability": pytest.approx((1 / 3 + 1 / 3 + 1 / 2) / 3)}
    assert metrics.task_verdict([E, E]) == metrics.TaskVerdict.NONE and metrics.task_instability([T, E]) is None


def test_it_estimates_between_trial_variance_over_runs():
    # a: c=2 of n=4 -> 2*2/(4*3) = 1/3; b: 0; c: one verdict, skipped
    assert metrics.between_trial_variance({"a": [T, F, T, F], "b": [T, T, T], "c": [T, E]}) == pytest.approx(1 / 6)
    assert metrics.between_trial_variance({"a": [T, F]}, {"b": [F, F]}) == pytest.approx(0.25)
    assert metrics.between_trial_variance({"a": [T]}) is None


def test_it_estimates_the_spread_of_task_success_without_bias():
    # a: c=2 of n=4 -> p 1/2, p^2 2*1/(4*3) = 1/6; b: c=3 of 3 -> 1, 1; c: one verdict, skipped
    rates = metrics.TaskRates.of({"a": [T, F, T, F], "b": [T, T, T], "c": [T, E]})
    assert (rates.mean, rates.square, rates.tasks) == (pytest.approx(3 / 4), pytest.approx(7 / 12), 2)
    assert rates.variance == pytest.approx(metrics.between_trial_variance({"a": [T, F, T, F], "b": [T, T, T]}))
    assert metrics.TaskRates.of({"a": [T]}) is None and metrics.TaskRates.default().variance == 0.25


def test_the_planner_the_power_and_the_minimum_detectable_effect_agree():
    rates = metrics.TaskRates(mean=0.6, square=0.4)  # between-trial variance 0.2, tasks spread by 0.04
    planned = metrics.trials_for_power(effect=0.1, tasks=130, rates=rates)
    assert metrics.comparison_power(effect=0.1, trials=planned, tasks=130, rates=rates) == pytest.approx(0.8, abs=1e-3)
    needed = metrics.trials_needed(effect=0.1, tasks=130, rates=rates)
    assert needed == 3 and 2 < planned <= 3
    detectable = metrics.minimum_detectable_effect(trials=needed, tasks=130, rates=rates)
    assert detectable < 0.1
    assert metrics.comparison_power(effect=detectable, trials=needed, tasks=130, rates=rates) == pytest.approx(0.8, abs=1e-3)
    # with no lift the test finds B ahead at most alpha/2 of the time
    assert metrics.comparison_power(effect=0.0, trials=4, tasks=130, rates=rates) < 0.025
    # the old planner (baseline variance for both arms, no interaction, no continuity) asked for
    # 2 * 0.2 * 2.8016^2 / (130 * 0.1^2) = 2.415 trials
    assert planned > 2.415


def test_it_says_when_no_number_of_trials_or_no_lift_is_enough():
    rates = metrics.TaskRates(mean=0.6, square=0.4)
    # three tasks: the exact sign-flip test cannot go below 2/8 = 0.25, so no trials suffice
    assert metrics.trials_for_power(effect=0.1, tasks=3, rates=rates) is None
    assert metrics.trials_needed(effect=0.1, tasks=3, rates=rates) is None
    assert metrics.minimum_detectable_effect(trials=10, tasks=3, rates=rates) is None
    with pytest.raises(ValueError, match="a lift of 45.0 points cannot be reached from a success rate of 60.0 %"):
        metrics.trials_needed(effect=0.45, tasks=130, rates=rates)
    with pytest.raises(ValueError, match="power"):
        metrics.trials_needed(effect=0.1, tasks=130, rates=rates, power=1.2)


def test_it_says_what_a_finished_run_could_have_detected():
    run = {f"t{i}": [T, F, T, F] for i in range(40)}
    result = metrics.run_minimum_detectable_effect(run)
    assert result["variance"] == pytest.approx(1 / 3) and (result["trials"], result["tasks"]) == (4, 40)
    rates = metrics.TaskRates.of(run)
    assert metrics.comparison_power(effect=result["effect"], trials=4, tasks=40, rates=rates) == pytest.approx(0.8, abs=1e-3)
    assert metrics.run_minimum_detectable_effect({"a": [T]})["effect"] is None
    assert metrics.run_minimum_detectable_effect({"t1": [T, F, T, F], "t2": [F, T, F, T]})["effect"] is None


def test_it_bundles_a_comparison_as_json():
    result = json.loads(json.dumps(metrics.paired_metrics(RUN_A, RUN_B, a_name="MemOrb", b_name="none",
                                                          resamples=300)))
    assert result["success"]["estimate"] == pytest.approx(0.75 / 3)
    assert result["verdict"].startswith("No winner on per-trial success: MemOrb minus none")
    # every task has at least 2 aligned trials (z has exactly 2)
    assert [row["k"] for row in result["pass_k"]] == [1, 2]
    assert result["pass_k"][1]["estimate"] == pytest.approx(1.5 / 3)
    assert len(result["per_trial"]) == 4 and result["changed"] == 2
    assert result["instability"]["a"]["mixed"] == 1


@pytest.mark.parametrize("successes,trials", [(0, 10), (3, 10), (81, 263), (30, 30), (1, 1)])
def test_it_matches_scipys_wilson_interval(successes, trials):
    expected = stats.binomtest(successes, trials).proportion_ci(confidence_level=0.95, method="wilson")
    assert metrics.wilson_interval(successes, trials) == pytest.approx((expected.low, expected.high))


def test_it_reproduces_newcombes_published_difference_interval():
    # Newcombe (1998), Statistics in Medicine 17:873, example (a): 56/70 - 48/80, hybrid score method
    low, high = metrics.difference_interval(56, 70, 48, 80)
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)


def test_it_estimates_a_memorys_effect_from_served_and_withheld_episodes():
    # served in 32 episodes, 8 successes; withheld from 8, 7 successes
    outcomes = [(True, i < 8) for i in range(32)] + [(False, i < 7) for i in range(8)]
    effect = metrics.memory_effect(outcomes)
    assert (effect.served, effect.served_successes, effect.withheld, effect.withheld_successes) == (32, 8, 8, 7)
    assert effect.estimate == pytest.approx(0.25 - 0.875)
    assert (effect.low, effect.high) == pytest.approx(metrics.difference_interval(8, 32, 7, 8))
    assert effect.high < 0 and effect.harmful


def test_it_holds_back_an_estimate_until_a_memory_was_retrieved_often_enough():
    few = metrics.memory_effect([(True, True)] * 20 + [(False, False)] * 9)
    assert few.estimate is None and not few.harmful and few.served == 20
    never_withheld = metrics.memory_effect([(True, False)] * 40)
    assert never_withheld.estimate is None


def test_it_sorts_memories_by_estimated_harm():
    helpful = metrics.memory_effect([(True, True)] * 30 + [(False, i < 3) for i in range(10)])
    harmful = metrics.memory_effect([(True, False)] * 30 + [(False, True)] * 10)
    neutral = metrics.memory_effect([(True, i % 2 == 0) for i in range(30)] + [(False, i % 2 == 0) for i in range(10)])
    unknown = metrics.memory_effect([(True, True)] * 5)
    ranked = metrics.memory_effects_by_harm({"h": helpful, "x": harmful, "n": neutral, "u": unknown})
    assert [key for key, _ in ranked] == ["x", "n", "h"]
    assert [effect.harmful for _, effect in ranked] == [True, False, False]
