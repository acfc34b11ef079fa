"""The offline backends: the LLM's shape, built from the reward breakdown, labelled scripted;
and one stored row per episode."""
import pytest

from evaluation.feedback.models import EpisodeFeedback
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.services import feedback_for_episode, feedback_rates
from memweb.models import LLMCall
from tests.evaluation.feedback.conftest import play_episode


def test_it_ends_a_successful_conversation_without_a_response(success_episode):
    feedback = feedback_for_episode(episode=success_episode, seed=3)
    assert feedback.behavior == EpisodeFeedback.Behavior.END and feedback.response == ""
    assert feedback.reasoning and feedback.critique == feedback.reasoning
    assert feedback.score == feedback.sampled_score == 10 and feedback.score_method == "shop"
    assert feedback.critique_backend == feedback.score_backend == "scripted"
    assert feedback.critique_scripted and feedback.score_scripted
    assert feedback.action in ("like", "dislike", "none") and feedback.errors == []
    assert feedback.judged_response.startswith("Your order O10298 is in transit")
    assert feedback.params["profile"] == "appliances" and feedback.params["s0_like"] == 7.5
    assert not LLMCall.objects.exists()


def test_it_continues_with_a_complaint_that_restates_the_request(failed_episode):
    feedback = feedback_for_episode(episode=failed_episode, seed=3)
    assert feedback.behavior == EpisodeFeedback.Behavior.CONTINUE
    assert feedback.response.startswith("That is not what I asked for.")
    assert "because it arrived damaged" in feedback.response and "###STOP###" not in feedback.response
    assert "not carried out" in feedback.reasoning and "wrong arguments" in feedback.reasoning
    # state wrong, look-ups and outputs right: 3 + floor(4 * 2/4)
    assert feedback.score == 5 and feedback.critique == feedback.response


def test_it_names_facts_never_told(builtin):
    episode = play_episode(builtin, "shop-app-001", rates={"result_unused": 1.0})
    assert episode.reward_breakdown["outputs"] == 0.0
    feedback = feedback_for_episode(episode=episode, seed=0)
    labels = [o["label"] for o in episode.reward_details["missing_outputs"]]
    assert f"You still have not told me the {', '.join(labels)}." in feedback.response
    assert feedback.score < 7


def test_it_scores_by_correctness_with_the_binary_model(failed_episode, success_episode):
    params = FeedbackParams(metric="correctness")
    failed = feedback_for_episode(episode=failed_episode, seed=0, params=params)
    passed = feedback_for_episode(episode=success_episode, seed=0, params=params)
    assert (failed.score, passed.score) == (3, 9)
    assert failed.score_method == passed.score_method == "correctness"
    # Under the binary model a low score can never be liked, a high one never disliked.
    assert failed.action != "like" and passed.action != "dislike"
    binary = params.binary_model()
    expected = feedback_rates(episodes=[failed_episode, success_episode], params=params).expected
    assert expected == {"like": pytest.approx(binary.p_like_high / 2),
                        "dislike": pytest.approx(binary.p_dislike_low / 2)}


def test_it_stores_one_row_per_episode_and_returns_it_again(failed_episode):
    first = feedback_for_episode(episode=failed_episode, seed=3)
    again = feedback_for_episode(episode=failed_episode, seed=99, params=FeedbackParams(like_rate=0.5))
    assert again.pk == first.pk and again.seed == 3 and EpisodeFeedback.objects.count() == 1


def test_it_refuses_infeasible_parameters_before_writing(failed_episode):
    with pytest.raises(ValueError, match="infeasible"):
        feedback_for_episode(episode=failed_episode, seed=0, params=FeedbackParams(dislike_rate=0.9))
    assert not EpisodeFeedback.objects.exists()
