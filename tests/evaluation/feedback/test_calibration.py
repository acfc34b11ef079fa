"""Calibration through the service: target global rates, monotone curves, recalibration on a run."""
import pytest

from evaluation.feedback import formulas as fm
from evaluation.feedback.models import CalibrationSetting, EpisodeFeedback
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.services import (
    MIN_FIT_PAIRS,
    calibration_fit,
    calibration_recalibrate,
    calibration_refit,
    calibration_table,
    calibration_update,
    feedback_for_episode,
    feedback_rates,
)
from tests.evaluation.feedback.conftest import CONTRADICTORY, PEOPLE, plant_campaign, play_many


def test_the_default_setting_hits_the_paper_targets_under_the_paper_distribution(db):
    params = CalibrationSetting.current().params()
    table = calibration_table(params=params)
    assert table.global_like == pytest.approx(0.065 * 0.86, abs=1e-12)
    assert table.global_dislike == pytest.approx(0.065 * 0.14, abs=1e-12)
    assert (round(table.c_like, 6), round(table.c_dislike, 6)) == (0.085667, 0.15172)
    likes, dislikes = [r["p_like"] for r in table.rows], [r["p_dislike"] for r in table.rows]
    assert all(a < b for a, b in zip(likes, likes[1:])) and all(a > b for a, b in zip(dislikes, dislikes[1:]))
    for row in table.rows:
        assert row["p_none"] == pytest.approx(1 - row["p_like"] - row["p_dislike"], abs=1e-15)
        assert row["p_copy"] == pytest.approx(min(1, 4 * row["p_like"]), abs=1e-15)
    assert sum(r["p_score"] for r in table.rows) == pytest.approx(1.0)
    assert table.binary is None


def test_an_edited_setting_hits_its_own_targets(db):
    setting = CalibrationSetting.current()
    params = FeedbackParams(distribution=(1, 1, 2, 3, 5, 8, 13, 21, 34, 12), like_rate=0.1, dislike_rate=0.02,
                            k_like=2.0, metric="correctness")
    calibration_update(setting=setting, params=params, source="test")
    stored = CalibrationSetting.current().params()
    assert stored == params
    table = calibration_table(params=stored)
    assert (table.global_like, table.global_dislike) == (pytest.approx(0.1, abs=1e-12), pytest.approx(0.02, abs=1e-12))
    low_share = params.binary_low_share  # the paper's share, not p(S <= 5) of the distribution
    assert table.binary["p_dislike_low"] == pytest.approx(0.02 / low_share)
    assert table.binary["p_like_high"] == pytest.approx(0.1 / (1 - low_share))


def test_an_infeasible_setting_is_refused_and_nothing_changes(db):
    setting = CalibrationSetting.current()
    with pytest.raises(ValueError, match="infeasible: at S="):
        calibration_update(setting=setting, params=FeedbackParams(dislike_rate=0.5))
    assert CalibrationSetting.current().dislike_rate == pytest.approx(fm.DISLIKE_RATE)


def test_recalibrating_on_a_run_makes_its_expected_rates_the_targets(builtin):
    episodes = play_many(builtin, 24)
    for episode in episodes:
        feedback_for_episode(episode=episode, seed=2)
    before = feedback_rates(episodes=episodes)
    assert before.n == 24 and sum(before.histogram) == 24
    assert before.expected["like"] != pytest.approx(before.targets["like"], abs=1e-6)
    setting = calibration_recalibrate(episodes=episodes, label="run 7")
    scores = list(EpisodeFeedback.objects.values_list("score", flat=True))
    assert tuple(setting.distribution) == pytest.approx(fm.score_distribution(scores))
    assert setting.distribution_source == "recalibrated from 24 realised scores (run 7)"
    after = feedback_rates(episodes=episodes)
    assert after.expected == {"like": pytest.approx(fm.LIKE_RATE, abs=1e-12),
                              "dislike": pytest.approx(fm.DISLIKE_RATE, abs=1e-12)}
    assert after.counts["like"] + after.counts["dislike"] + after.counts["none"] == 24
    assert after.realised["like"] == after.counts["like"] / 24


def test_recalibrating_without_feedback_is_refused(builtin):
    episodes = play_many(builtin, 2)
    with pytest.raises(ValueError, match="none of the selected episodes"):
        calibration_recalibrate(episodes=episodes)
    assert CalibrationSetting.current().distribution_source == "MemoryBench reference distribution"


def test_it_previews_the_fit_to_a_campaigns_people_beside_the_current_model(db):
    campaign = plant_campaign("Planted people", PEOPLE, writer=None)
    before = calibration_table(params=CalibrationSetting.current().params())
    fit = calibration_fit(campaign=campaign)
    assert (fit.n, fit.campaign, fit.problem, fit.active) == (18, "Planted people", None, False)
    assert [row["n"] for row in fit.rows] == [0, 3, 3, 0, 3, 0, 4, 0, 5, 0]
    assert [row["before_like"] for row in fit.rows] == [row["p_like"] for row in before.rows]
    assert [row["before_dislike"] for row in fit.rows] == [row["p_dislike"] for row in before.rows]
    third, ninth, fourth = fit.rows[2], fit.rows[8], fit.rows[3]
    assert (third["observed_like"], third["observed_dislike"]) == (0, pytest.approx(2 / 3))
    assert (ninth["observed_like"], ninth["observed_dislike"]) == (pytest.approx(0.8), 0)
    assert fourth["observed_like"] is None
    # The fitted curves follow people: most like at S=9, most dislike at S=2, far above the current model.
    assert ninth["fit_like"] == pytest.approx(0.8, abs=0.05) and fit.rows[1]["fit_dislike"] > 0.9
    assert ninth["fit_like"] > 5 * ninth["before_like"]
    assert CalibrationSetting.current().params() == before.params  # a preview saves nothing


def test_it_applies_the_fit_and_keeps_the_noise_controls(db, operator_user):
    setting = CalibrationSetting.current()
    calibration_update(setting=setting, params=setting.params().model_copy(update={"score_sigma": 0.5}))
    campaign = plant_campaign("Planted people", PEOPLE, writer=None)
    fit = calibration_fit(campaign=campaign)
    setting = calibration_refit(campaign=campaign, user=operator_user)
    stored = setting.params()
    assert stored == fit.params and stored.score_sigma == 0.5 and setting.updated_by == operator_user
    assert stored.s0_like != pytest.approx(7.5) and stored.like_rate != pytest.approx(fm.LIKE_RATE)
    assert stored.distribution == pytest.approx((0, 3 / 18, 3 / 18, 0, 3 / 18, 0, 4 / 18, 0, 5 / 18, 0))
    assert setting.distribution_source == "refitted to people's actions in campaign “Planted people” (18 conversations)"
    after = calibration_table(params=stored)
    assert [row["p_like"] for row in after.rows] == pytest.approx([row["fit_like"] for row in fit.rows])
    assert [row["p_dislike"] for row in after.rows] == pytest.approx([row["fit_dislike"] for row in fit.rows])
    assert calibration_fit(campaign=campaign).active


def test_it_refuses_a_contradictory_fit_or_too_few_conversations_and_changes_nothing(db):
    before = CalibrationSetting.current().params()
    contradictory = plant_campaign("Contradictory", CONTRADICTORY, writer=None)
    fit = calibration_fit(campaign=contradictory)
    assert fit.params is None and "must not exceed 1" in fit.problem
    with pytest.raises(ValueError, match="the fit to people cannot be used: like_rate"):
        calibration_refit(campaign=contradictory)
    few = plant_campaign("Few", PEOPLE[:MIN_FIT_PAIRS - 1], writer=None)
    with pytest.raises(ValueError, match=f"“Few” has {MIN_FIT_PAIRS - 1} conversations .* at least {MIN_FIT_PAIRS}"):
        calibration_refit(campaign=few)
    assert CalibrationSetting.current().params() == before
