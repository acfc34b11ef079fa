"""The LLM-as-user path against the fake OpenAI server: prompts, JSON repair, recorded failures."""
import json

from django.template.loader import render_to_string

from evaluation.feedback.models import EpisodeFeedback
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.services import critique_offline, feedback_for_episode
from memweb.models import LLMCall

VALID = {"reasoning": "The return was booked with the wrong reason.", "behavior": "continue_conversation",
         "response": "I said it arrived damaged, not that it does not fit. Please fix the reason."}


def system_and_user(request: dict) -> tuple[str, str]:
    messages = request["messages"]
    return messages[0]["content"], messages[1]["content"]


def test_it_asks_the_user_simulator_with_profile_and_test_prompt_and_repairs_bad_json(fake_llm, failed_episode):
    fake_llm.use_for("user_simulator", "scorer")
    fake_llm.reply_malformed_json('{"reasoning": "cut off')
    fake_llm.reply_json(VALID)
    fake_llm.reply_json({"score": 4})
    feedback = feedback_for_episode(episode=failed_episode, seed=1)
    assert (feedback.behavior, feedback.response, feedback.reasoning) == \
           (VALID["behavior"], VALID["response"], VALID["reasoning"])
    assert feedback.critique_backend == feedback.score_backend == "llm:fake-model"
    assert not feedback.critique_scripted and (feedback.score, feedback.score_method) == (4, "llm")
    assert feedback.errors == [] and fake_llm.queued == 0
    system, user = system_and_user(fake_llm.chat_requests[0])
    assert "# Persona" in system and "online clothing shop" in system and "Never repeat a question" in system
    # The critique goes into memory: the customer's own requests and the facts it wants, not their values (issue 28).
    context = user.split("# What you asked for")[1].split("# Language")[0]
    assert '"refund amount"' in context and "170.00" not in context and '"reason": "damaged"' in context
    assert "expected_changes" not in context
    assert "Customer: Hello, I hope you can help me quickly." in user and "###STOP###" not in user
    assert "Return RET-O10267-1 is registered" in user and "in English" in user
    assert "end_conversation" in user and "return_items" not in user.split("# Your task")[0]  # tools hidden
    repair = fake_llm.chat_requests[1]["messages"]
    assert repair[-2]["content"] == '{"reasoning": "cut off'
    assert "previous answer could not be used" in repair[-1]["content"]
    assert '"refund amount": "170.00"' in system_and_user(fake_llm.chat_requests[2])[1]
    assert list(LLMCall.objects.order_by("pk").values_list("role", "status")) == \
           [("user_simulator", "repaired"), ("scorer", "ok")]


def test_it_accepts_a_null_response_when_the_user_ends(fake_llm, success_episode):
    fake_llm.use_for("user_simulator", "scorer")
    fake_llm.reply_json({"reasoning": "All done.", "behavior": "end_conversation", "response": None})
    fake_llm.reply_json({"score": 9})
    feedback = feedback_for_episode(episode=success_episode, seed=1)
    assert feedback.behavior == EpisodeFeedback.Behavior.END and feedback.response == ""
    assert feedback.critique == "All done." and feedback.score == 9


def test_it_records_a_failed_call_and_answers_offline(fake_llm, failed_episode):
    fake_llm.use_for("user_simulator", "scorer", max_retries=0)
    fake_llm.fail(500, "model overloaded")
    fake_llm.reply_json({"score": 2})
    feedback = feedback_for_episode(episode=failed_episode, seed=1)
    assert feedback.critique_backend == "scripted (LLM failed)" and feedback.critique_scripted
    assert feedback.response == critique_offline(episode=failed_episode).response
    assert len(feedback.errors) == 1 and feedback.errors[0]["stage"] == "critique"
    assert "model overloaded" in feedback.errors[0]["error"]
    assert (feedback.score, feedback.score_backend) == (2, "llm:fake-model")
    failed_episode.refresh_from_db()
    html = render_to_string("evaluation/feedback/_episode_feedback.html", {"episode": failed_episode})
    assert "scripted (LLM failed) critique</span>" in html and "score</span>" not in html
    assert "critique: LLM role &#x27;user_simulator&#x27;" in html and "model overloaded" in html


def test_a_broken_json_contract_after_repair_is_recorded_not_raised(fake_llm, failed_episode):
    fake_llm.use_for("user_simulator", "scorer", max_retries=0)
    ending_but_talking = {"reasoning": "Fine.", "behavior": "end_conversation", "response": "Bye!"}
    fake_llm.reply_json(ending_but_talking)
    fake_llm.reply_json(ending_but_talking)
    fake_llm.reply_text("ten")
    fake_llm.reply_text("still not a number")
    feedback = feedback_for_episode(episode=failed_episode, seed=1)
    assert [e["stage"] for e in feedback.errors] == ["critique", "score"]
    assert "response must be null" in feedback.errors[0]["error"]
    assert feedback.critique_backend == feedback.score_backend == "scripted (LLM failed)"
    assert feedback.score == 5 and feedback.score_method == "shop"
    assert list(LLMCall.objects.values_list("status", flat=True)) == ["error", "error"]


def test_use_llm_off_keeps_the_offline_backends_even_with_endpoints(fake_llm, failed_episode):
    fake_llm.use_for("user_simulator", "scorer")
    feedback = feedback_for_episode(episode=failed_episode, seed=1, params=FeedbackParams(use_llm=False))
    assert feedback.critique_backend == feedback.score_backend == "scripted"
    assert fake_llm.chat_requests == [] and json.loads(json.dumps(feedback.params))["use_llm"] is False
