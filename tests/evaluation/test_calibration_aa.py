"""A/A calibration, power and the planner check on real scripted outcomes (no database).

The outcomes are 4 trials x 130 built-in tasks of the scripted agent without memory (error rates
0.3 each) against the agenda customer, played in this process as a run with seed 0 would play them.
"""
import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from evaluation import calibration_aa, metrics

T, F = True, False
RATES = {"wrong_tool": 0.3, "wrong_arguments": 0.3, "result_unused": 0.3}


@pytest.fixture(scope="module")
def scripted_run() -> dict[str, list[bool]]:
    return calibration_aa.scripted_outcomes(trials=4, error_rates=RATES)


def test_it_plays_real_scripted_outcomes_that_vary_between_trials(scripted_run):
    assert len(scripted_run) == 130 and {len(row) for row in scripted_run.values()} == {4}
    assert 0.3 < metrics.pass_k(scripted_run, 1) < 0.9
    assert metrics.run_instability(scripted_run)["mixed"] > 30


def test_it_draws_pseudo_runs_from_each_tasks_own_verdicts():
    pools = calibration_aa.OutcomePools.of({"always": [T, None, T], "never": [F, F], "broken": [None]})
    first, second = calibration_aa.pseudo_runs(pools, trials=6, rng=np.random.default_rng(0))
    assert first == second == {"always": [T] * 6, "never": [F] * 6}
    _, lifted = calibration_aa.pseudo_runs(pools, trials=6, rng=np.random.default_rng(0), flip_chance=1.0)
    assert lifted["never"] == [T] * 6


def test_it_plants_a_lift_that_raises_mean_success_by_that_much():
    # 40 % success: turning each failure into a success with chance 0.1 / 0.6 adds 10 points
    matrix = {f"t{i}": [T, T, F, F, F] for i in range(400)}
    assert calibration_aa.lift_flip_chance(matrix, 0.1) == pytest.approx(1 / 6)
    first, second = calibration_aa.pseudo_runs(calibration_aa.OutcomePools.of(matrix), trials=5,
                                               rng=np.random.default_rng(3), flip_chance=1 / 6)
    assert metrics.pass_k(second, 1) - metrics.pass_k(first, 1) == pytest.approx(0.1, abs=0.02)
    with pytest.raises(ValueError, match="cannot be planted"):
        calibration_aa.lift_flip_chance(matrix, 0.7)


def test_it_calls_a_winner_in_about_five_percent_of_a_a_comparisons(scripted_run):
    result = calibration_aa.comparisons_simulate(scripted_run, comparisons=1000, trials=4, seed=0)
    assert result.tasks == 130
    assert 0.03 <= result.rate <= 0.07
    assert 0.03 <= result.p_rate <= 0.07


def test_it_detects_a_planted_ten_point_lift_with_at_least_80_percent_power(scripted_run):
    result = calibration_aa.comparisons_simulate(scripted_run, comparisons=1000, trials=4, lift=0.10, seed=0)
    assert result.rate >= 0.8


def test_it_plans_within_a_quarter_of_the_trials_simulation_needs(scripted_run):
    check = calibration_aa.planner_check(scripted_run, effect=0.07, max_trials=6, comparisons=200, seed=0)
    assert check["simulated"] is not None
    assert 0.75 <= check["ratio"] <= 1.25


def test_it_prints_the_report_from_the_aa_calibrate_command():
    out = StringIO()
    call_command("aa_calibrate", "--tasks", "20", "--source-trials", "2", "--comparisons", "40",
                 "--planner-comparisons", "10", "--power-comparisons", "40", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["source"]["tasks"] == 20 and report["source"]["trials"] == 2
    assert report["aa"]["comparisons"] == 40 and report["aa"]["lift"] == 0
    assert report["power"]["lift"] == pytest.approx(0.10)
    assert len(report["planner"]["simulated_power"]) == 10 and report["planner"]["effect"] == pytest.approx(0.07)
    assert [row["trials"] for row in report["power_check"]] == list(range(1, 11))
