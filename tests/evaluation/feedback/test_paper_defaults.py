"""MemoryBench's defaults: calibration on the reference p(S) (the run's own realised scores as a
variant), the binary model's published figures, and the scorer prompt's 1-10 bands."""
import numpy as np
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from evaluation.feedback import formulas as fm
from evaluation.feedback.models import EpisodeFeedback
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.prompts import SCORE_BANDS
from evaluation.feedback.services import feedback_for_episode, profile_for
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from evaluation.runs.services import RunSpec
from tests.evaluation.feedback.conftest import play_episode, play_many
from tests.evaluation.feedback.test_llm import VALID


def test_the_binary_model_gives_the_papers_rates_at_its_stated_share():
    model = FeedbackParams().binary_model()
    assert model.p_dislike(3) == pytest.approx(0.021, abs=5e-4)
    assert model.p_like(9) == pytest.approx(0.099, abs=5e-4)
    assert FeedbackParams().binary_low_share == fm.BINARY_LOW_SHARE


def _two_trial_run(builtin, first_trial: int, **run_fields):
    """A run whose trial 1 holds `first_trial` judged episodes and whose trial 2 holds one unjudged episode."""
    run = EvaluationRun.objects.create(name="calibrated on itself", spec={"feedback_enabled": True, **run_fields})
    trials = [Trial.objects.create(run=run, number=n) for n in (1, 2)]
    earlier = play_many(builtin, first_trial)
    later = play_episode(builtin, "shop-app-001", seed=99)
    for trial, episode in [(trials[0], e) for e in earlier] + [(trials[1], later)]:
        RunEpisode.objects.create(run=run, trial=trial, task=episode.task, task_key=episode.task_snapshot["id"],
                                  episode=episode, status=RunEpisode.Status.DONE)
    for episode in earlier:
        feedback_for_episode(episode=episode, seed=3)
    return earlier, later


def test_a_run_is_calibrated_on_the_reference_distribution_by_default(builtin):
    """Even with enough realised scores: recalibrating each run on its own scores would pin every
    run's like rate at the target, so likes could not rank systems."""
    assert RunSpec(name="x").feedback_calibration == "reference" == EvaluationRun().run_spec.feedback_calibration
    earlier, later = _two_trial_run(builtin, fm.MIN_REALISED_SCORES)
    snapshot = feedback_for_episode(episode=later, seed=3).params
    assert snapshot["calibrated_on"] == "reference distribution (calibrate_on = reference)"
    assert tuple(snapshot["distribution"]) == fm.DEFAULT_SCORE_DISTRIBUTION


def test_the_realised_variant_calibrates_on_the_scores_of_the_runs_earlier_trials(builtin):
    earlier, later = _two_trial_run(builtin, fm.MIN_REALISED_SCORES, feedback_calibration="realised")
    scores = list(EpisodeFeedback.objects.filter(episode__in=earlier).values_list("score", flat=True))
    snapshot = feedback_for_episode(episode=later, seed=3).params
    assert snapshot["calibrated_on"] == f"{fm.MIN_REALISED_SCORES} realised scores"
    assert tuple(snapshot["distribution"]) == pytest.approx(fm.score_distribution(scores))
    assert tuple(snapshot["distribution"]) != pytest.approx(fm.normalise_distribution(fm.DEFAULT_SCORE_DISTRIBUTION))
    # trial 1 itself had nothing earlier to go on: the paper's reference distribution, with the reason.
    first = EpisodeFeedback.objects.get(episode=earlier[0]).params
    assert first["calibrated_on"] == f"reference distribution (0 realised scores, fewer than {fm.MIN_REALISED_SCORES})"
    assert tuple(first["distribution"]) == fm.DEFAULT_SCORE_DISTRIBUTION


def test_likes_rank_systems_under_the_reference_but_not_when_each_is_calibrated_on_itself():
    better = [9] * 60 + [8] * 25 + [7] * 10 + [3] * 5  # mostly satisfied users
    worse = [9] * 10 + [8] * 15 + [7] * 25 + [4] * 30 + [3] * 20
    reference = fm.calibrate()
    expected = {name: fm.calibrate(fm.score_distribution(scores)).global_rates()[0]
                for name, scores in (("better", better), ("worse", worse))}
    assert expected["better"] == pytest.approx(expected["worse"]) == pytest.approx(fm.LIKE_RATE)  # realised: a tie
    on_reference = {name: np.mean([reference.p_like(s) for s in scores])
                    for name, scores in (("better", better), ("worse", worse))}
    assert on_reference["better"] > 1.5 * on_reference["worse"]


def test_too_few_realised_scores_or_the_reference_variant_keep_the_reference_distribution(builtin):
    earlier, later = _two_trial_run(builtin, 3, feedback_calibration="realised")
    snapshot = feedback_for_episode(episode=later, seed=3).params
    assert snapshot["calibrated_on"].startswith("reference distribution (3 realised scores")
    assert tuple(snapshot["distribution"]) == fm.DEFAULT_SCORE_DISTRIBUTION
    realised = FeedbackParams(distribution=(0, 0, 5, 5, 5, 5, 10, 30, 30, 10), calibrate_on="realised")
    scores = [9] * 15 + [3] * 10
    assert realised.calibrated_to(scores)[0].distribution == pytest.approx(fm.score_distribution(scores))
    assert realised.calibrated_to(scores)[0].binary_low_share == pytest.approx(10 / 25)
    reference = realised.model_copy(update={"calibrate_on": "reference"})
    assert reference.calibrated_to(scores) == (reference, "reference distribution (calibrate_on = reference)")


def test_infeasible_realised_scores_fall_back_with_the_reason():
    realised = FeedbackParams(calibrate_on="realised")
    params, source = realised.calibrated_to([9] * 30)  # nobody near the dislike region
    assert params == realised and "infeasible" in source


def test_the_scorer_is_told_what_each_band_of_the_scale_means(fake_llm, failed_episode):
    fake_llm.use_for("user_simulator", "scorer")
    fake_llm.reply_json(VALID)
    fake_llm.reply_json({"score": 4})
    feedback_for_episode(episode=failed_episode, seed=1)
    system = fake_llm.chat_requests[1]["messages"][0]["content"]
    assert "1 (very dissatisfied) to 10 (completely satisfied)" in system
    for band, meaning in SCORE_BANDS:
        assert f"{band}: {meaning}" in system
    assert [band for band, _ in SCORE_BANDS] == ["1-2", "3-4", "5-6", "7-8", "9-10"]


def test_the_migration_keeps_old_runs_calibration_and_makes_per_reply_profiles_short_families(db):
    run = EvaluationRun.objects.create(name="stored before issue 28", spec={"feedback_enabled": True})
    executor = MigrationExecutor(connection)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # so ALTER TABLE waits on no deferred checks
    before = [("evaluation", "0021_run_status_preparing")]
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    old.get_model("evaluation", "CalibrationSetting").objects.update_or_create(pk=1, defaults={"calibrate_on": "realised"})
    old.get_model("evaluation", "FeedbackProfile").objects.create(
        key="gadgets", name="Gadgets customer", persona="p", domain_expertise="d", evaluation_criteria="e",
        behaviour_rules="b", long_output=None)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    run.refresh_from_db()
    assert run.run_spec.feedback_calibration == "realised"  # what it did: the setting's choice at the time
    assert profile_for(key="gadgets").long_output is False
    assert EvaluationRun.objects.create(name="new").run_spec.feedback_calibration == "reference"
