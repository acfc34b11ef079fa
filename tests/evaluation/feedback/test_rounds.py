"""Multi-turn feedback: the agent answers each critique (scripted rule or the actor LLM) and the user
judges the answer, for up to three rounds."""
import pytest

from evaluation.feedback.services import MAX_FEEDBACK_ROUNDS, feedback_for_episode, feedback_trajectory
from evaluation.feedback.services.revision import NOTHING_TO_ADD
from tests.evaluation.feedback.conftest import play_episode
from tests.evaluation.feedback.test_llm import VALID


@pytest.fixture
def untold_episode(builtin):
    """The agent looked everything up and made the change, but never told the customer the fee."""
    return play_episode(builtin, "shop-app-023", rates={"result_unused": 1.0})


def test_one_round_is_todays_single_judgement(untold_episode):
    feedback = feedback_for_episode(episode=untold_episode, seed=0)
    assert feedback.rounds == [] and feedback.params["rounds"] == 1


def test_the_scripted_agent_states_the_missing_fact_and_the_user_is_then_satisfied(untold_episode):
    feedback = feedback_for_episode(episode=untold_episode, seed=0, rounds=3)
    assert feedback.behavior == "continue_conversation" and "installation fee" in feedback.response
    assert len(feedback.rounds) == 1  # the user ended after round 2: no third round
    second = feedback.rounds[0]
    assert second["round"] == 2 and second["revision_backend"] == "scripted"
    assert second["revision"] == "I am sorry for leaving that out. installation fee: 79.00."
    assert second["behavior"] == "end_conversation" and second["response"] == ""
    assert second["score"] > feedback.score and second["critique_backend"] == "scripted"
    assert second["action"] in ("like", "dislike", "none") and second["errors"] == []
    trajectory = feedback_trajectory(feedback=feedback)
    assert trajectory["messages"][-1] == {"role": "assistant", "content": second["revision"]}
    assert trajectory["reward_breakdown"]["user_satisfaction"] == second["score"] / 10
    assert trajectory["metadata"]["user_feedback"]["rounds"][0]["satisfaction"] == second["score"]


def test_words_cannot_undo_a_wrong_change_so_the_user_goes_on(failed_episode):
    feedback = feedback_for_episode(episode=failed_episode, seed=0, rounds=3)
    assert [r["round"] for r in feedback.rounds] == [2, 3]
    assert {r["revision"] for r in feedback.rounds} == {NOTHING_TO_ADD}
    assert all(r["behavior"] == "continue_conversation" and r["score"] == feedback.score for r in feedback.rounds)


def test_rounds_are_bounded_by_the_papers_three(untold_episode):
    assert MAX_FEEDBACK_ROUNDS == 3
    with pytest.raises(ValueError, match="rounds must be from 1 to 3, got 4"):
        feedback_for_episode(episode=untold_episode, seed=0, rounds=4)


def test_an_llm_agent_answers_the_critique_through_the_actor_role(fake_llm, failed_episode):
    failed_episode.agent_backend = "llm:fake-model"
    failed_episode.save(update_fields=["agent_backend"])
    fake_llm.use_for("actor", "user_simulator", "scorer")
    fake_llm.reply_json(VALID)
    fake_llm.reply_json({"score": 4})
    fake_llm.reply_text("You are right, I registered the wrong reason; the reason should be: damaged.")
    fake_llm.reply_json({"reasoning": "Still not fixed.", "behavior": "end_conversation", "response": None})
    fake_llm.reply_json({"score": 3})
    feedback = feedback_for_episode(episode=failed_episode, seed=1, rounds=2)
    [second] = feedback.rounds
    assert second["revision_backend"] == "llm:fake-model" and second["revision"].startswith("You are right")
    assert (second["score"], second["behavior"], second["critique_backend"]) == (3, "end_conversation", "llm:fake-model")
    actor = fake_llm.chat_requests[2]["messages"]
    assert "no tools are available" in actor[0]["content"] and actor[-1] == {"role": "user", "content": VALID["response"]}
    assert actor[-2]["role"] == "assistant" and "tools" not in fake_llm.chat_requests[2]
    judged_again = fake_llm.chat_requests[3]["messages"][1]["content"]
    assert "You are right, I registered the wrong reason" in judged_again.split("# Your task")[0]
    assert f"Customer: {VALID['response']}" in judged_again
