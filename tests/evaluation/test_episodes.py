"""The episode runner service: storage, determinism, the shared trajectory, and the LLM backends."""
import pytest

from evaluation.models import Episode
from evaluation.services import EpisodeConfigError, episode_run, episode_simulate, episode_trajectory
from orbs.schemas import TrajectoryIn


def _task(builtin, template: str):
    return next(t for t in builtin.tasks.order_by("external_id") if t.spec["template"] == template)


def test_it_stores_a_scripted_episode_with_its_transcript_and_reward(builtin):
    task = _task(builtin, "track_order_no_id")
    episode = episode_run(task=task, agent_config={"error_rates": {"wrong_tool": 1.0}}, seed=5)
    episode.refresh_from_db()
    assert episode.status == Episode.Status.COMPLETED and not episode.success and episode.reward == 0.0
    assert episode.agent_backend == "scripted" and episode.agent_scripted and episode.customer_scripted
    assert episode.reward_breakdown["lookups"] == 0.0
    assert episode.reward_details["missing_lookups"][0]["name"] == "list_customer_orders"
    assert episode.committed_errors == ["wrong_tool"] and episode.errors[0]["kind"] == "wrong_tool"
    assert episode.transcript[0]["role"] == "user" and episode.turns >= 2
    assert episode.tool_calls == sum(len(m.get("tool_calls", ())) for m in episode.transcript)
    assert episode.task_snapshot == task.spec and episode.memory_kind == "none"


def test_the_same_seed_gives_the_same_episode(builtin):
    task = _task(builtin, "exchange_then_track")
    config = {"error_rates": {"wrong_arguments": 0.5, "result_unused": 0.5}}
    runs = [episode_run(task=task, agent_config=config, seed=seed) for seed in (11, 11, 12)]
    assert runs[0].transcript == runs[1].transcript and runs[0].reward_breakdown == runs[1].reward_breakdown
    assert runs[0].pk != runs[1].pk


def test_it_turns_an_episode_into_the_shared_trajectory(builtin):
    task = _task(builtin, "return_item_no_id")
    episode = episode_run(task=task, agent_config={"error_rates": {"result_unused": 1.0}}, seed=0)
    trajectory = episode_trajectory(episode)
    parsed = TrajectoryIn.model_validate(trajectory)
    assert parsed.task_id == task.external_id and parsed.customer_key == task.spec["customer_id"]
    assert parsed.domain == "clothing" and parsed.success is False
    assert [e.kind for e in parsed.errors] == ["result_unused"]
    assert all("###STOP###" not in u for u in parsed.user_utterances)
    calls = [c.name for m in parsed.messages for c in m.tool_calls]
    assert "list_customer_orders" in calls and "return_items" in calls
    assert {m.tool_name for m in parsed.messages if m.role == "tool"} <= set(calls)
    # The gold call's order id is the answer key's: only the oracle reflection input carries it (issue 28).
    assert "order_id" not in trajectory["metadata"]
    oracle = episode_trajectory(episode, reflection_input="oracle")
    assert oracle["metadata"]["order_id"] == task.spec["gold_actions"][0]["arguments"]["order_id"]


def test_it_refuses_configurations_that_cannot_run(builtin):
    task = builtin.tasks.first()
    with pytest.raises(EpisodeConfigError, match="memory bank 'no-such-bank' does not exist"):
        episode_simulate(task=task, memory_config={"kind": "memorb", "bank": "no-such-bank"})
    with pytest.raises(EpisodeConfigError, match="the actor role has no LLM endpoint"):
        episode_simulate(task=task, agent_config={"backend": "llm"})
    with pytest.raises(ValueError, match="error_rates.wrong_tool must be between 0 and 1"):
        episode_simulate(task=task, agent_config={"error_rates": {"wrong_tool": 2}})
    assert not Episode.objects.exists()


# --- the LLM agent and customer against the fake OpenAI server ------------------------------

def _solve_track_order(fake_llm, task):
    spec = task.spec
    identify, track = spec["gold_lookups"][0], spec["gold_lookups"][-1]
    fake_llm.reply_tool_call(identify["name"], identify["arguments"])
    fake_llm.reply_tool_call(track["name"], track["arguments"])
    facts = ", ".join(o["value"] for o in spec["required_outputs"])
    fake_llm.reply_text(f"Your order is on its way: {facts}.")


def test_the_llm_agent_executes_its_tool_calls_and_is_scored(builtin, fake_llm):
    fake_llm.use_for("actor")
    task = _task(builtin, "track_order")
    _solve_track_order(fake_llm, task)
    episode = episode_run(task=task, agent_config={"backend": "llm"}, seed=0)
    assert episode.success and episode.reward_breakdown["lookups"] == 1.0 and episode.reward_breakdown["outputs"] == 1.0
    assert episode.agent_backend == "llm:fake-model" and not episode.agent_scripted
    tool_messages = [m for m in episode.transcript if m["role"] == "tool"]
    assert [m["tool_name"] for m in tool_messages] == [task.spec["gold_lookups"][0]["name"], "track_shipment"]
    assert all(m["ok"] for m in tool_messages)
    first = fake_llm.chat_requests[0]
    assert {t["function"]["name"] for t in first["tools"]} >= {"track_shipment", "cancel_order"}
    assert first["messages"][-1] == {"role": "user", "content": episode.transcript[0]["content"]}
    assert episode.tokens_in > 0 and episode.tokens_out > 0


def test_it_caps_the_llm_agents_answers_with_the_runs_max_tokens(builtin, fake_llm):
    fake_llm.use_for("actor", max_tokens=512)
    task = _task(builtin, "track_order")
    _solve_track_order(fake_llm, task)
    episode_run(task=task, agent_config={"backend": "llm", "max_tokens": 77}, seed=0)
    assert {request["max_tokens"] for request in fake_llm.chat_requests} == {77}


def test_the_llm_agent_fails_when_it_never_tells_the_customer(builtin, fake_llm):
    fake_llm.use_for("actor")
    task = _task(builtin, "track_order")
    for call in task.spec["gold_lookups"]:
        fake_llm.reply_tool_call(call["name"], call["arguments"])
    fake_llm.set_default_text("I have checked your order.")
    episode = episode_run(task=task, agent_config={"backend": "llm"}, seed=0)
    assert not episode.success
    assert episode.reward_breakdown["lookups"] == 1.0 and episode.reward_breakdown["outputs"] == 0.0
    assert {e["kind"] for e in episode.errors} == {"result_unused"}


def test_malformed_tool_arguments_give_a_tool_error_and_the_episode_goes_on(builtin, fake_llm):
    fake_llm.use_for("actor")
    task = _task(builtin, "track_order")
    fake_llm.reply_tool_call("track_shipment", '{"order_id": "O1000')
    fake_llm.reply_tool_call("track_shipment", {"order": 5})
    _solve_track_order(fake_llm, task)
    episode = episode_run(task=task, agent_config={"backend": "llm"}, seed=0)
    tools = [m for m in episode.transcript if m["role"] == "tool"]
    assert not tools[0]["ok"] and "invalid arguments: arguments are not valid JSON" in tools[0]["content"]
    assert not tools[1]["ok"] and "unknown argument(s) order" in tools[1]["content"]
    assert episode.transcript[1]["tool_calls"][0]["argument_error"]
    assert episode.status == Episode.Status.COMPLETED and episode.success
    second_request = fake_llm.chat_requests[1]["messages"]
    assert second_request[-1]["role"] == "tool" and second_request[-1]["content"].startswith("Error: invalid arguments")


def test_an_invented_order_id_fails_the_llm_agent(builtin, fake_llm):
    fake_llm.use_for("actor")
    task = _task(builtin, "track_order")
    identify = task.spec["gold_lookups"][0]
    fake_llm.reply_tool_call(identify["name"], identify["arguments"])
    fake_llm.reply_tool_call("track_shipment", {"order_id": "O99999"})
    fake_llm.set_default_text("Order O99999 is in transit and arrives soon.")
    episode = episode_run(task=task, agent_config={"backend": "llm"}, seed=0)
    assert not episode.success and episode.reward_breakdown["grounded"] == 0.0
    assert episode.reward_details["invented_ids"] == ["O99999"]


def test_an_llm_that_fails_for_good_is_recorded_on_the_episode(builtin, fake_llm):
    fake_llm.use_for("actor", max_retries=0)
    fake_llm.fail(500, "model overloaded")
    episode = episode_run(task=_task(builtin, "track_order"), agent_config={"backend": "llm"}, seed=0)
    assert episode.status == Episode.Status.ERROR and episode.ended_by == "error"
    assert "model overloaded" in episode.infra_error and not episode.success


def test_the_llm_customer_plays_its_persona_and_stops(builtin, fake_llm):
    fake_llm.use_for("user_simulator")
    task = _task(builtin, "material_info")
    product = task.spec["intents"][0]["slots"]["product"]
    fake_llm.reply_text(f'Hi! What is the "{product}" made of?')
    fake_llm.reply_text("Great, thanks! ###STOP###")
    episode = episode_run(task=task, customer_config={"backend": "llm"}, seed=0)
    assert episode.success and episode.ended_by == "stop" and episode.customer_backend == "llm:fake-model"
    system = fake_llm.chat_requests[0]["messages"][0]["content"]
    assert task.spec["persona"]["name"] in system and "###STOP###" in system and product in system
    assert fake_llm.chat_requests[1]["messages"][-1]["role"] == "user"


def test_it_keeps_the_outcome_an_episode_recorded_when_its_orb_already_exists(builtin):
    from evaluation.services import episode_ref
    from orbs.models import RetrievalLog
    from orbs.services import bank_get_or_create, orb_from_episode

    bank = bank_get_or_create(name="outcome bank", approved_only=False)
    memory = {"kind": "memorb", "bank": bank.name, "approved_only": False, "per_turn": False}
    episode = episode_run(task=_task(builtin, "track_order"), memory_config=memory, seed=0)
    for _ in range(2):  # the second ingest finds the Orb already stored
        orb_from_episode(bank=bank, trajectory=episode_trajectory(episode), episode_ref=f"{episode_ref(episode)}:copy")
    log = RetrievalLog.objects.get(pk=episode.memories[0]["retrieval_id"])
    assert (log.outcome_success, log.outcome_episode_ref) == (episode.success, episode_ref(episode))
