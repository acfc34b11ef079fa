"""Hostile or broken LLM output, from the fake OpenAI server, on every path that takes it: the LLM
agent and customer of an episode, the Orb reflection (emotion tag and reflection), and the
simulated feedback (critique and score). Each path records the problem where a person sees it
(episode row, Orb, feedback row, LLM call log) and goes on; the pages show the text escaped.
"""
import pytest
from django.urls import reverse

from evaluation.feedback.services import feedback_for_episode
from evaluation.models import Episode
from evaluation.services import episode_run, episode_trajectory
from memweb.models import LLMCall
from orbs.models import Orb
from orbs.services import orb_from_episode
from tests.browser import login
from tests.fakes.openai_server import Scripted, json_reply, text_reply, tool_call_reply
from tests.orbs.conftest import bank, success_trajectory  # noqa: F401  (fixture)

# Markup that runs if a page ever renders model text unescaped: a script, and an image handler
# (which also runs when inserted through innerHTML).
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
ENORMOUS = 200_000  # characters: far beyond any reply memweb asks for


def _track_order(builtin):
    return next(t for t in builtin.tasks.order_by("external_id") if t.spec["template"] == "track_order")


def _reply_for(actor: list[Scripted], customer: list[Scripted]):
    """A fake-server answer that tells the roles apart (only the agent's requests carry tools)
    and plays each role's script in order, then repeats the role's last reply."""
    def respond(request: dict) -> Scripted:
        script = actor if request.get("tools") else customer
        return script.pop(0) if len(script) > 1 else script[0]
    return respond


# --- the LLM agent (actor role) -----------------------------------------------------------------

def test_an_agent_s_unknown_tools_bad_arguments_enormous_and_empty_replies_are_played_through(builtin, fake_llm):
    # The customer is the LLM one too: the agenda customer reads each agent reply with a regular
    # expression quadratic in its length (evaluation/shop/nlu.py), about a minute for this reply.
    fake_llm.use_for("actor", "user_simulator")
    fake_llm.set_default(_reply_for(
        actor=[tool_call_reply([("delete_all_orders", {"confirm": True}), ("track_shipment", '{"order_id": ')]),
               tool_call_reply([("track_shipment", {"order_id": 10298})]),
               tool_call_reply([("track_shipment", "[1, 2]")]),
               text_reply(HOSTILE + "x" * ENORMOUS), text_reply("")],
        customer=[text_reply("Where is my oven, order O10298?"), text_reply("Anything else?"),
                  text_reply("Bye. ###STOP###")]))
    episode = episode_run(task=_track_order(builtin), agent_config={"backend": "llm"},
                          customer_config={"backend": "llm"}, seed=0)
    episode.refresh_from_db()
    assert episode.status == Episode.Status.COMPLETED and episode.infra_error == "" and not episode.success
    tools = [m["content"] for m in episode.transcript if m["role"] == "tool"]
    assert tools[0].startswith("Error: unknown tool 'delete_all_orders'; available tools:")
    assert tools[1].startswith("Error: invalid arguments: arguments are not valid JSON")
    assert tools[2] == "Error: argument order_id must be of type string, got int"
    assert tools[3] == "Error: invalid arguments: arguments must be a JSON object, got list"
    said = [m["content"] for m in episode.transcript if m["role"] == "assistant" and "tool_calls" not in m]
    assert said == [HOSTILE + "x" * ENORMOUS, ""] and episode.ended_by == "stop"
    assert {e["kind"] for e in episode.errors} == {"wrong_tool"}


def test_an_episode_with_an_enormous_reply_and_tool_name_still_becomes_an_orb(builtin, fake_llm, bank):
    """The Orbs trajectory caps a message at 20,000 characters and a tool name at 100; the episode
    keeps what the model said, its trajectory is clipped to fit."""
    fake_llm.use_for("actor", "user_simulator")
    fake_llm.set_default(_reply_for(actor=[tool_call_reply([("t" * 300, {})]), text_reply(HOSTILE + "x" * ENORMOUS)],
                                    customer=[text_reply("Where is my order?"), text_reply("Bye. ###STOP###")]))
    episode = episode_run(task=_track_order(builtin), agent_config={"backend": "llm"},
                          customer_config={"backend": "llm"}, seed=0)
    assert episode.transcript[3]["content"] == HOSTILE + "x" * ENORMOUS
    orb = orb_from_episode(bank=bank, trajectory=episode_trajectory(episode)).orb
    said = orb.episode.trajectory["messages"]
    assert said[1]["tool_calls"][0]["name"] == "t" * 99 + "…" and said[2]["tool_name"] == "t" * 99 + "…"
    assert len(said[3]["content"]) == 20_000 and said[3]["content"].startswith(HOSTILE)


@pytest.mark.parametrize(("garbage", "cause"), [
    (Scripted(raw_body=b"<html>502 Bad Gateway</html>", content_type="text/html"), "response is not a chat completion"),
    (Scripted(raw_body=b'{"choices": [', content_type="application/json"), "response body is not JSON"),
    (Scripted(raw_body=b'{"id": "x", "object": "chat.completion", "choices": []}'),
     "response is not a chat completion"),
])
def test_an_agent_endpoint_answering_garbage_ends_the_episode_as_an_error_with_the_cause(builtin, fake_llm, garbage,
                                                                                         cause):
    fake_llm.use_for("actor", max_retries=1)
    fake_llm.set_default(lambda request: garbage)
    episode = episode_run(task=_track_order(builtin), agent_config={"backend": "llm"}, seed=0)
    assert episode.status == Episode.Status.ERROR and episode.ended_by == "error"
    assert cause in episode.infra_error and "attempt 2 of 2" in episode.infra_error
    assert LLMCall.objects.get(role="actor").status == LLMCall.Status.ERROR


# --- the LLM customer (user-simulator role) ------------------------------------------------------

def test_a_customer_s_empty_reply_ends_the_conversation_and_hostile_text_is_kept_as_said(builtin, fake_llm):
    fake_llm.use_for("actor", "user_simulator")
    opening = HOSTILE + " Where is my order O10298?"
    fake_llm.set_default(_reply_for(actor=[text_reply(None)],
                                    customer=[text_reply(opening), text_reply("y" * ENORMOUS), text_reply("")]))
    episode = episode_run(task=_track_order(builtin), agent_config={"backend": "llm"},
                          customer_config={"backend": "llm"}, seed=0)
    said = [m["content"] for m in episode.transcript if m["role"] == "user"]
    assert said == [opening, "y" * ENORMOUS, "###STOP###"]
    assert episode.status == Episode.Status.COMPLETED and episode.ended_by == "stop" and episode.turns == 2
    assert [m["content"] for m in episode.transcript if m["role"] == "assistant"] == ["", ""]


# --- the Orb reflection (reflector role: emotion tag, then reflection) ---------------------------

@pytest.mark.parametrize(("reflections", "why"), [
    ([text_reply("Sure! The agent should have tracked the parcel."), text_reply("Still prose, sorry.")],
     "not valid JSON"),
    ([json_reply({"lesson": "Track the parcel."}), json_reply({"lesson": "Track the parcel."})], "reflection"),
    ([json_reply({"reflection": 42}), json_reply({"reflection": ["a", "b"]})], "reflection"),
    ([text_reply(""), text_reply(None)], "ReflectionOut"),
    ([json_reply({"reflection": "z" * ENORMOUS}), json_reply({"reflection": "z" * 4001})], "at most 4000"),
])
def test_a_broken_reflection_falls_back_to_the_offline_reflector_with_the_error_on_the_orb(fake_llm, bank,
                                                                                         reflections, why):
    fake_llm.use_for("reflector", max_retries=0)
    for reply in [json_reply({"label": "anxious"}), *reflections]:
        fake_llm.enqueue(reply)
    orb = orb_from_episode(bank=bank, trajectory=success_trajectory("Where is my parcel?")).orb
    assert (orb.emotion, orb.emotion_backend) == ("anxious", "llm:fake-model")
    assert orb.reflector_backend == "scripted (LLM failed)" and orb.outcome.startswith("Outcome: resolved")
    assert "even after a repair round" in orb.backend_error and why in orb.backend_error
    assert fake_llm.queued == 0


def test_an_unknown_emotion_label_and_hostile_reflection_text_are_stored_as_text(fake_llm, bank):
    fake_llm.use_for("reflector", max_retries=0)
    fake_llm.enqueue(json_reply({"label": HOSTILE}))
    fake_llm.enqueue(json_reply({"label": "furious!!"}))
    fake_llm.enqueue(json_reply({"reflection": HOSTILE + " Call track_shipment before answering."}))
    orb = orb_from_episode(bank=bank, trajectory=success_trajectory(HOSTILE + " Where is my parcel?")).orb
    assert orb.emotion_backend == "scripted (LLM failed)" and "label" in orb.backend_error
    assert orb.outcome == HOSTILE + " Call track_shipment before answering." and HOSTILE in orb.obs
    assert orb.status == Orb.Status.PENDING


# --- simulated feedback (user-simulator critique, scorer) ----------------------------------------

@pytest.fixture
def played(builtin):
    return episode_run(task=_track_order(builtin), seed=0)


@pytest.mark.parametrize(("critiques", "scores", "critique_error", "score_error"), [
    ([text_reply("I am not happy."), text_reply("Really not happy.")], [text_reply("ten"), text_reply("10/10")],
     "not valid JSON", "not valid JSON"),
    ([json_reply({"feedback": "meh"}), json_reply({"feedback": "meh"})], [json_reply({"score": 11}),
                                                                          json_reply({"score": "high"})],
     "reasoning", "score"),
    ([text_reply(""), text_reply(None)], [text_reply(""), text_reply(None)], "VerboseFeedbackOut", "ScoreOut"),
    ([json_reply({"reasoning": "r" * ENORMOUS, "behavior": "end_conversation", "response": None})] * 2,
     [json_reply({"score": 10 ** 40})] * 2, "at most 8000", "less than or equal to 10"),
])
def test_broken_feedback_answers_fall_back_to_the_offline_judges_with_each_error_recorded(
        fake_llm, played, critiques, scores, critique_error, score_error):
    fake_llm.use_for("user_simulator", "scorer", max_retries=0)
    for reply in [*critiques, *scores]:
        fake_llm.enqueue(reply)
    feedback = feedback_for_episode(episode=played, seed=1)
    assert feedback.critique_backend == feedback.score_backend == "scripted (LLM failed)"
    assert [e["stage"] for e in feedback.errors] == ["critique", "score"]
    assert critique_error in feedback.errors[0]["error"] and score_error in feedback.errors[1]["error"]
    assert 1 <= feedback.score <= 10 and fake_llm.queued == 0


def test_hostile_feedback_text_is_stored_as_the_customer_wrote_it(fake_llm, played):
    fake_llm.use_for("user_simulator", "scorer")
    fake_llm.reply_json({"reasoning": HOSTILE, "behavior": "continue_conversation", "response": HOSTILE + " Where?"})
    fake_llm.reply_json({"score": 2})
    feedback = feedback_for_episode(episode=played, seed=1)
    assert (feedback.reasoning, feedback.response, feedback.errors) == (HOSTILE, HOSTILE + " Where?", [])


# --- the pages show all of it as text ------------------------------------------------------------

@pytest.fixture
def hostile_episode_and_orb(builtin, fake_llm, bank):
    """An LLM-agent episode whose every model-written field carries HOSTILE, its feedback, and its Orb."""
    fake_llm.use_for("actor", "user_simulator", "scorer", "reflector")
    fake_llm.set_default(_reply_for(
        actor=[tool_call_reply([(HOSTILE, {"order_id": HOSTILE})]), text_reply(HOSTILE + " Your order is late.")],
        customer=[text_reply(HOSTILE + " Where is my order?"), text_reply("Thanks. ###STOP###")]))
    episode = episode_run(task=_track_order(builtin), agent_config={"backend": "llm"},
                          customer_config={"backend": "llm"}, seed=0)
    fake_llm.set_default(None)
    fake_llm.reply_json({"reasoning": HOSTILE, "behavior": "continue_conversation", "response": HOSTILE})
    fake_llm.reply_json({"score": 3})
    feedback_for_episode(episode=episode, seed=1)
    fake_llm.reply_json({"label": "anxious"})
    fake_llm.reply_json({"reflection": HOSTILE + " Track the parcel first."})
    orb = orb_from_episode(bank=bank, trajectory=episode_trajectory(episode)).orb
    return episode, orb


def _shows_as_text(page) -> None:
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("body").inner_text().count(HOSTILE) >= 2
    assert page.locator("img[src='x']").count() == 0


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_transcript_and_orb_pages_show_model_markup_as_text(browser_page, live_server, role_admin_user,
                                                                 hostile_episode_and_orb):
    episode, orb = hostile_episode_and_orb
    login(browser_page, live_server, role_admin_user)
    browser_page.goto(live_server.url + reverse("evaluation:episode_detail", args=[episode.pk]))
    _shows_as_text(browser_page)
    browser_page.goto(live_server.url + reverse("orbs:detail", args=[orb.pk]))
    _shows_as_text(browser_page)
