"""DMRM retrieves at every decision step (issue 28): the episode asks a per-step hook again after
each tool call, both agents use the new block, and the hook queries with the state exactly as the
target memory stores it (the last tool result included)."""
from django.urls import reverse

from evaluation.configs import MemoryConfig
from evaluation.llm_backends import LLMAgent
from evaluation.memory_layers.dmrm import DMRMHook
from evaluation.services import episode_run, episode_trajectory
from evaluation.shop.env import ShopEnv
from evaluation.shop.errors import ADVICE, RESULT_UNUSED
from evaluation.shop.generator import shop_fresh
from memweb.llm.client import ChatReply, ToolCall
from orbs.dmrm.models import DMRMSettings
from orbs.dmrm.services import experiences_from_trajectory, trajectory_steps
from orbs.services import bank_get_or_create
from tests.evaluation.conftest import play
from tests.orbs.dmrm.conftest import shop_trajectory


class _StepMemory:
    """Nothing before the turn; `step_text` before each later decision."""

    def __init__(self, step_text: str):
        self.step_text, self.steps = step_text, []

    def before_turn(self, *, turn, query, calls, dialogue=()):
        return "", {"turn": turn, "query": query}

    def before_step(self, *, turn, step, query, calls, dialogue=()):
        self.steps.append((turn, step, len(calls)))
        return self.step_text, {"turn": turn, "step": step, "query": query}


def test_the_episode_asks_a_per_step_hook_after_every_tool_call(shop_tasks):
    task = next(t for t in shop_tasks if RESULT_UNUSED in t["error_kinds"])
    memory = _StepMemory("")
    outcome = play(task, memory=memory)
    assert len(memory.steps) == len(outcome.calls) > 0
    assert [calls for _, _, calls in memory.steps] == list(range(1, len(outcome.calls) + 1))
    step_records = [m for m in outcome.memories if m.get("step")]
    assert len(step_records) == len(outcome.calls) and len(outcome.memories) == outcome.turns + len(outcome.calls)
    for turn in {t for t, _, _ in memory.steps}:  # steps count from 1 within each turn
        assert [s for t, s, _ in memory.steps if t == turn] == list(range(1, 1 + sum(t == turn for t, _, _ in memory.steps)))


def test_the_scripted_agent_uses_advice_retrieved_between_its_tool_calls(shop_tasks):
    task = next(t for t in shop_tasks if RESULT_UNUSED in t["error_kinds"])
    helped = play(task, rates={RESULT_UNUSED: 1.0}, memory=_StepMemory("Lesson: " + ADVICE[RESULT_UNUSED]))
    unrelated = play(task, rates={RESULT_UNUSED: 1.0}, memory=_StepMemory("Lesson: greet the customer warmly."))
    assert RESULT_UNUSED not in helped.committed and helped.reward.success
    assert RESULT_UNUSED in unrelated.committed


def test_the_llm_agent_asks_for_memory_before_each_decision_after_the_first(monkeypatch, settings):
    sent = []
    replies = iter([
        ChatReply(None, [ToolCall("c1", "list_customer_orders", {"customer_id": "nobody"}, "{}")], 1, 1, 0),
        ChatReply("Done.", [], 1, 1, 0)])

    def chat(*, messages, **_):
        sent.append(messages[0]["content"])
        return next(replies)
    monkeypatch.setattr("evaluation.llm_backends.llm_chat", chat)
    blocks = iter(["step-1 block"])
    answer = LLMAgent().respond(text="hi", memory="turn block", env=ShopEnv(shop_fresh(1)), recall=lambda: next(blocks))
    assert answer == "Done." and len(sent) == 2
    assert "turn block" in sent[0] and "step-1 block" in sent[1] and "turn block" not in sent[1]


def test_the_hook_queries_with_the_state_the_target_memory_stored(db):
    bank = bank_get_or_create(name="DMRM steps")
    DMRMSettings.objects.create(bank=bank, min_similarity=-1.0)
    trajectory = shop_trajectory("stored")
    experiences_from_trajectory(bank=bank, trajectory=trajectory, trajectory_id="stored")
    stored = trajectory_steps(trajectory)
    task = {"id": "t", "domain": "clothing", "customer_id": "c1"}
    hook = DMRMHook(config=MemoryConfig(kind="dmrm", bank=bank.slug), task=task, bank=bank)
    messages = trajectory["messages"]
    call = {"name": "get_order", "arguments": {"order_id": "W7"}, "content": messages[2]["content"]}
    _, first = hook.before_turn(turn=1, query=messages[0]["content"], calls=[])
    _, second = hook.before_turn(turn=2, query=messages[3]["content"], calls=[call])
    for record, (goal, observation, action) in zip([first, second], stored):
        assert record["dmrm"]["observation"] == observation and hook.goal == goal
        best = record["dmrm"]["hits"][0]
        assert best["action"] == action and best["score"] > 0.999


def test_the_episode_page_shows_every_step_retrieval(builtin, client, operator_user):
    bank = bank_get_or_create(name="DMRM page")
    DMRMSettings.objects.create(bank=bank, min_similarity=-1.0)
    task = next(t for t in builtin.tasks.order_by("external_id") if t.spec["template"] == "track_order_no_id")
    seed = episode_run(task=task, seed=1)
    experiences_from_trajectory(bank=bank, trajectory=episode_trajectory(seed), trajectory_id="seed")
    episode = episode_run(task=task, memory_config={"kind": "dmrm", "bank": bank.slug}, seed=2)
    steps = [m for m in episode.memories if m.get("step")]
    assert len(steps) == episode.tool_calls > 0 and any(m["dmrm"]["hits"] for m in steps)
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:episode_detail", args=[episode.pk])).content.decode()
    assert page.count('data-memory="dmrm"') == len(episode.memories)
    assert page.count('data-step="') == len(steps) and "Before decision 2 of this turn (1 tool call so far)" in page
