"""Simulated-feedback formulas (no database)."""
import numpy as np
import pytest

from evaluation.feedback import formulas as fm

TARGET_LIKE, TARGET_DISLIKE = 0.065 * 0.86, 0.065 * 0.14


# --- satisfaction score from metrics ----------------------------------------------------------

def test_it_scores_binary_correctness_9_or_3():
    assert fm.score_from_correctness(True) == 9
    assert fm.score_from_correctness(False) == 3


@pytest.mark.parametrize("f1, score", [
    (1.0, 10), (0.9, 10), (0.8999, 9), (0.8, 9), (0.7999, 6), (0.5, 6), (0.4999, 4),
    (0.3, 4), (0.2999, 2), (0.1, 2), (0.0999, 1), (0.0, 1),
])
def test_it_maps_f1_to_scores_on_the_table_boundaries(f1, score):
    assert fm.score_from_f1(f1) == score


def test_it_rejects_f1_outside_zero_one():
    with pytest.raises(ValueError, match="f1 must lie between 0 and 1"):
        fm.score_from_f1(1.2)


SUCCESS = {"state": 1.0, "grounded": 1.0, "lookups": 1.0, "outputs": 1.0, "lookups_made": 2.0, "outputs_told": 1.0}


@pytest.mark.parametrize("turns, tool_errors, score", [(4, 0, 10), (6, 0, 10), (7, 0, 9), (4, 1, 9), (12, 2, 8)])
def test_it_scores_shop_success_8_to_10_by_turns_and_errors(turns, tool_errors, score):
    assert fm.score_from_shop(breakdown=SUCCESS, turns=turns, tool_errors=tool_errors) == score


@pytest.mark.parametrize("changes, score", [
    ({"state": 0.0, "lookups": 0.0, "outputs": 0.0}, 3),
    ({"state": 0.0, "lookups": 0.0}, 4),             # outputs only: 1 of 4 weight
    ({"state": 0.0}, 5),                             # lookups + outputs: 2 of 4
    ({"outputs": 0.0, "lookups": 0.0}, 5),           # state only: 2 of 4
    ({"outputs": 0.0}, 6),                           # state + lookups: 3 of 4
    ({"grounded": 0.0}, 2),                          # hallucinated though the state came out right
    ({"grounded": 0.0, "state": 0.0}, 1),
])
def test_it_gives_shop_failures_partial_credit_and_hallucinations_the_floor(changes, score):
    assert fm.score_from_shop(breakdown={**SUCCESS, **changes}, turns=4) == score


def test_it_scores_shop_tasks_without_optional_components_and_accepts_bools():
    assert fm.score_from_shop(breakdown={"state": True, "grounded": True}, turns=3) == 10
    assert fm.score_from_shop(breakdown={"state": False, "grounded": True}, turns=3) == 3
    with pytest.raises(ValueError, match="missing the 'grounded' component"):
        fm.score_from_shop(breakdown={"state": 1.0}, turns=3)


# --- action model -----------------------------------------------------------------------------

def test_it_calibrates_the_default_distribution_to_the_target_rates():
    model = fm.calibrate()
    like, dislike = model.global_rates()
    assert like == pytest.approx(TARGET_LIKE, abs=1e-9)
    assert dislike == pytest.approx(TARGET_DISLIKE, abs=1e-9)
    # independent recomputation straight from the formula and the published percentages
    p = np.array(fm.DEFAULT_SCORE_DISTRIBUTION) / 100
    s = np.arange(1, 11)
    c_like = TARGET_LIKE / np.sum(p / (1 + np.exp(-1.5 * (s - 7.5))))
    assert model.c_like == pytest.approx(c_like, rel=1e-12)
    assert sum(p[i] * model.p_like(i + 1) for i in range(10)) == pytest.approx(TARGET_LIKE, abs=1e-9)


def test_it_recalibrates_from_realised_scores():
    scores = [2] * 10 + [5] * 20 + [7] * 30 + [9] * 40
    model = fm.recalibrate(scores)
    assert model.distribution == pytest.approx((0, 0.1, 0, 0, 0.2, 0, 0.3, 0, 0.4, 0))
    like, dislike = model.global_rates()
    assert like == pytest.approx(TARGET_LIKE, abs=1e-9) and dislike == pytest.approx(TARGET_DISLIKE, abs=1e-9)
    realised_like = np.mean([model.p_like(s) for s in scores])
    assert realised_like == pytest.approx(TARGET_LIKE, abs=1e-9)
    assert model.c_like != pytest.approx(fm.calibrate().c_like)


def test_it_recalibrates_a_custom_distribution_and_custom_rates():
    params = fm.ActionParams(like_rate=0.2, dislike_rate=0.1, k_like=1.0)
    model = fm.calibrate([1] * 10, params)
    assert model.global_rates() == (pytest.approx(0.2, abs=1e-12), pytest.approx(0.1, abs=1e-12))


def test_it_refuses_empty_or_out_of_range_scores():
    with pytest.raises(ValueError, match="empty list of scores"):
        fm.recalibrate([])
    with pytest.raises(ValueError, match="integer from 1 to 10, got 11"):
        fm.recalibrate([5, 11])
    with pytest.raises(ValueError, match="got 2.5"):
        fm.recalibrate([2.5])
    with pytest.raises(ValueError, match="10 weights"):
        fm.calibrate([1, 2, 3])


def test_it_raises_when_the_targets_cannot_be_met_within_probabilities():
    # all mass at S=1, where likes are nearly impossible: c_L would push P(L|10) far above 1
    with pytest.raises(ValueError, match=r"infeasible: at S=\d+"):
        fm.recalibrate([1] * 50)


def test_it_makes_likes_rise_and_dislikes_fall_with_the_score():
    model = fm.calibrate()
    likes = [model.p_like(s) for s in fm.SCORES]
    dislikes = [model.p_dislike(s) for s in fm.SCORES]
    assert all(b > a for a, b in zip(likes, likes[1:]))
    assert all(b < a for a, b in zip(dislikes, dislikes[1:]))


def test_it_keeps_every_probability_in_zero_one():
    for model in (fm.calibrate(), fm.recalibrate([3, 6, 7, 8, 8, 9, 9, 10])):
        for row in model.table():
            for key in ("p_like", "p_dislike", "p_none", "p_copy"):
                assert 0.0 <= row[key] <= 1.0
            assert row["p_like"] + row["p_dislike"] + row["p_none"] == pytest.approx(1.0)


def test_it_shifts_the_like_threshold_and_nothing_else():
    base = fm.calibrate()
    selective = fm.shift_like_threshold(base, 1.0)
    assert selective.params.s0_like == 8.5
    assert selective.global_rates()[0] == pytest.approx(TARGET_LIKE, abs=1e-9)
    assert [selective.p_dislike(s) for s in fm.SCORES] == [base.p_dislike(s) for s in fm.SCORES]
    # selective users keep their likes for the best answers
    assert selective.p_like(10) > base.p_like(10) and selective.p_like(7) < base.p_like(7)


def test_it_rejects_bad_parameters_by_name():
    with pytest.raises(ValueError, match="k_like must be positive"):
        fm.ActionParams(k_like=0)
    with pytest.raises(ValueError, match="dislike_rate must lie between 0 and 1"):
        fm.ActionParams(dislike_rate=-0.1)


# --- binary and copy models -------------------------------------------------------------------

def test_it_computes_the_binary_model():
    model = fm.calibrate_binary(p_low=0.25)
    assert model.p_dislike(3) == pytest.approx(TARGET_DISLIKE / 0.25)
    assert model.p_like(3) == 0.0
    assert model.p_like(9) == pytest.approx(TARGET_LIKE / 0.75)
    assert model.p_dislike(9) == 0.0
    assert model.p_none(9) == pytest.approx(1 - TARGET_LIKE / 0.75)
    # global rates: P(S_low)·P(D|S_low) and P(S_high)·P(L|S_high) give the targets back
    assert 0.25 * model.p_dislike(3) == pytest.approx(TARGET_DISLIKE)
    assert 0.75 * model.p_like(9) == pytest.approx(TARGET_LIKE)
    with pytest.raises(ValueError, match="only scores 3 and 9, got 5"):
        model.p_like(5)


def test_it_calibrates_the_binary_model_from_scores_and_validates_it():
    model = fm.binary_from_scores([3, 9, 9, 9])
    assert model.p_dislike_low == pytest.approx(TARGET_DISLIKE / 0.25)
    with pytest.raises(ValueError, match=r"P\(D\|S_low\) = 1.8200 > 1"):
        fm.calibrate_binary(p_low=0.005)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        fm.binary_from_scores([9, 9])
    with pytest.raises(ValueError, match=r"must be 3 or 9, got \[5\]"):
        fm.binary_from_scores([3, 5, 9])


def test_it_copies_long_outputs_at_four_times_the_like_rate_and_never_short_ones():
    model = fm.calibrate()
    for s in fm.SCORES:
        assert fm.p_copy(model, s, long_output=True) == pytest.approx(4 * model.p_like(s))
        assert fm.p_copy(model, s, long_output=False) == 0.0
    generous = fm.calibrate_binary(p_low=0.5, like_rate=0.4, dislike_rate=0.1)
    assert fm.p_copy(generous, 9, long_output=True) == 1.0  # 4·0.8 capped


# --- sampling ---------------------------------------------------------------------------------

def test_it_samples_reproducibly_for_a_seed():
    model = fm.calibrate()
    scores = [int(s) for s in np.random.default_rng(0).integers(1, 11, 500)]
    first = fm.sample_actions(model, scores, long_output=True, rng=42)
    assert first == fm.sample_actions(model, scores, long_output=True, rng=42)
    assert first != fm.sample_actions(model, scores, long_output=True, rng=43)
    reactions, copies = fm.sample_action_arrays(model, scores, long_output=True, rng=42)
    assert first == [fm.Action(r, c) for r, c in zip(reactions, copies)]
    short = fm.sample_actions(model, scores, long_output=False, rng=42)
    assert [a.reaction for a in short] == [a.reaction for a in first] and not any(a.copy for a in short)
    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)
    assert [fm.sample_action(model, 8, long_output=True, rng=rng_a) for _ in range(50)] == \
        [fm.sample_action(model, 8, long_output=True, rng=rng_b) for _ in range(50)]


def test_it_samples_at_the_analytic_rates():
    model = fm.calibrate()
    p = np.array(model.distribution)
    scores = np.random.default_rng(1).choice(np.arange(1, 11), size=200_000, p=p)
    reactions, copies = fm.sample_action_arrays(model, scores, long_output=True, rng=2)
    n = scores.size
    # 5 standard errors of a proportion around the analytic rate
    for rate, reaction in ((TARGET_LIKE, "like"), (TARGET_DISLIKE, "dislike")):
        observed = np.mean(reactions == reaction)
        assert observed == pytest.approx(rate, abs=5 * np.sqrt(rate * (1 - rate) / n))
    copy_rate = sum(pi * fm.p_copy(model, s, long_output=True) for pi, s in zip(p, fm.SCORES))
    assert np.mean(copies) == pytest.approx(copy_rate, abs=5 * np.sqrt(copy_rate / n))
    assert np.mean(reactions[scores == 9] == "like") == pytest.approx(model.p_like(9), abs=0.005)


def test_it_perturbs_scores_with_rounded_clipped_gaussian_noise():
    scores = [1, 5, 10] * 2000
    assert fm.perturb_scores(scores, sigma=0, rng=1) == scores
    noisy = fm.perturb_scores(scores, sigma=1.5, rng=1)
    assert noisy == fm.perturb_scores(scores, sigma=1.5, rng=1)
    assert min(noisy) == 1 and max(noisy) == 10 and all(isinstance(s, int) for s in noisy)
    mids = [n for s, n in zip(scores, noisy) if s == 5]
    assert np.mean(mids) == pytest.approx(5, abs=0.1) and 1.2 < np.std(mids) < 1.8
    with pytest.raises(ValueError, match="sigma must not be negative"):
        fm.perturb_scores(scores, sigma=-1, rng=1)
