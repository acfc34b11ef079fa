"""Simulated user against people: MAE, action kappa, calibration, ceilings and the
action-model refit, against hand-worked cases (no Django)."""
import numpy as np
import pytest
from scipy.special import expit

from annotation.fidelity import (
    Conversation,
    action_fit,
    action_kappa,
    action_kappa_ceiling,
    expected_calibration_error,
    fidelity_summary,
    like_predictions_ceiling,
    reliability_bins,
    score_mae,
    score_mae_ceiling,
)

ONE = Conversation(8, "like", 0.9, ((6, "like"), (8, "like"), (4, "none")))
TWO = Conversation(9, "like", 0.7, ((2, "dislike"), (3, "dislike")))


def test_it_computes_the_score_error_and_its_ceiling_by_hand():
    # |8 - 6| = 2 and |9 - 2.5| = 6.5.
    assert score_mae([ONE, TWO]) == pytest.approx(4.25)
    # ONE: |6-6|, |8-5|, |4-7|; TWO: |2-3|, |3-2| -> (0 + 3 + 3 + 1 + 1) / 5.
    assert score_mae_ceiling([ONE, TWO]) == pytest.approx(8 / 5)


def test_it_compares_actions_with_the_majority():
    # Pairs (like, like) and (like, dislike): observed 1/2, chance (2*1 + 0) / 4 = 1/2 -> 0.
    assert action_kappa([ONE, TWO]) == pytest.approx(0.0)
    perfect = [Conversation(8, "like", None, ((8, "like"), (9, "like"))),
               Conversation(2, "dislike", None, ((2, "dislike"), (3, "dislike")))]
    assert action_kappa(perfect) == pytest.approx(1.0)
    assert action_kappa_ceiling(perfect) == pytest.approx(1.0)


def test_it_bins_predictions_and_computes_ece_by_hand():
    predictions = [(0.9, True), (0.9, False), (0.1, False), (0.1, False)]
    bins = reliability_bins(predictions)
    assert [(row["predicted"], row["observed"], row["n"]) for row in bins] == [(0.1, 0.0, 2), (0.9, 0.5, 2)]
    assert expected_calibration_error(predictions) == pytest.approx(0.5 * 0.1 + 0.5 * 0.4)
    assert expected_calibration_error([]) is None


def test_it_predicts_a_person_from_the_others_for_the_ceiling():
    assert like_predictions_ceiling([ONE]) == [(0.5, True), (0.5, True), (1.0, False)]


def test_it_summarises_every_figure_with_an_interval_and_a_ceiling():
    summary = fidelity_summary([ONE, TWO] * 10, reps=100)
    assert [figure["key"] for figure in summary["figures"]] == ["score_mae", "action_kappa", "like_ece"]
    mae = summary["figures"][0]
    assert mae["simulated"]["value"] == pytest.approx(4.25) and mae["simulated"]["low"] <= 4.25 <= mae["simulated"]["high"]
    assert mae["ceiling"]["value"] == pytest.approx(1.6)
    assert summary["mean_scores"] == {"simulated": 8.5, "human": pytest.approx((6 + 2.5) / 2)}


def test_it_refits_the_action_curves_from_human_actions():
    rng = np.random.default_rng(4)
    scores = rng.integers(1, 11, size=6000)
    like = 0.6 * expit(1.2 * (scores - 7.0))
    dislike = 0.5 * expit(-1.0 * (scores - 3.0))
    draws = rng.random(6000)
    actions = np.where(draws < like, "like", np.where(draws < like + dislike, "dislike", "none"))
    fit = action_fit(list(zip(scores.tolist(), actions.tolist())))
    assert fit.params["s0_like"] == pytest.approx(7.0, abs=0.5) and fit.c_like == pytest.approx(0.6, abs=0.08)
    assert fit.params["s0_dislike"] == pytest.approx(3.0, abs=0.6)
    p = np.array(fit.params["distribution"])
    assert p.sum() == pytest.approx(1.0)
    # The shape evaluation's calibrate() expects: like_rate / sum p(S) sigma(...) gives back c_like.
    shape = expit(fit.params["k_like"] * (np.arange(1, 11) - fit.params["s0_like"]))
    assert fit.params["like_rate"] / float(p @ shape) == pytest.approx(fit.c_like)
    assert [row["score"] for row in fit.rows] == list(range(1, 11))


def test_it_refuses_bad_pairs_for_the_refit():
    with pytest.raises(ValueError):
        action_fit([(11, "like")])
    with pytest.raises(ValueError):
        action_fit([(5, "copy")])
    with pytest.raises(ValueError):
        action_fit([])
