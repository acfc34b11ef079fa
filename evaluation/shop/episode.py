"""One episode, Django-free: the customer and the agent take turns on a fresh copy of the shop,
then the episode is scored and its errors diagnosed.

Agents implement `respond(*, text, memory, env) -> str` (tool calls go through `env`); customers
implement `opening() -> str` and `respond(agent_text) -> str`; both expose `label`, `tokens_in`
and `tokens_out`. A memory hook implements `before_turn(*, turn, query, calls, dialogue) -> (prompt_block,
record)`; `dialogue` is the episode's messages before the current customer turn. A hook that also
implements `before_step(*, turn, step, query, calls, dialogue)` (DMRM: the paper retrieves at every
decision) is asked again before each later decision of the turn: the agent gets `recall`, a callable
it calls after its tool results are in, which answers the new block; each step's record joins the
episode's memories.
"""
import functools
import itertools
import json
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

from evaluation.shop.customers import STOP
from evaluation.shop.env import ShopEnv
from evaluation.shop.errors import errors_diagnose
from evaluation.shop.generator import shop_fresh
from evaluation.shop.reward import RewardResult, gold_replay, reward_compute, state_fingerprint

DEFAULT_MAX_TURNS = 12


@dataclass
class EpisodeOutcome:
    messages: list[dict]
    memories: list[dict]
    calls: list[dict]
    turns: int
    ended_by: str  # stop | transfer | max_turns | error
    reward: RewardResult
    errors: list[dict]
    committed: list[str] = field(default_factory=list)  # error kinds the scripted agent chose to make
    infra_error: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: int = 0
    spans: list[dict] = field(default_factory=list)  # {"turn", "kind", "ms", ...} per step, in order


@functools.lru_cache(maxsize=1024)
def _gold_hash(seed: int, gold_actions: str) -> str:
    return state_fingerprint(gold_replay({"shop_seed": seed, "gold_lookups": [],
                                         "gold_actions": json.loads(gold_actions)}).state)


def gold_state_hash(task: dict) -> str:
    """The fingerprint of the gold-replayed shop, computed once per distinct solution."""
    return _gold_hash(task["shop_seed"], json.dumps(task["gold_actions"], sort_keys=True))


def exchanges_count(messages: list[dict]) -> int:
    """An episode's turns: the customer turns the agent answered (a reply or a tool call). The one
    definition every page and the API show; a closing customer message (the stop token) or one the
    agent never got to answer is not a turn."""
    return len({m.get("turn") for m in messages if m["role"] == "assistant"})


class _Timeline:
    """The spans of an episode as it plays: each step's kind, turn and milliseconds. `on_turn` is
    told the turn each step belongs to (the LLM call log files its calls under it)."""

    def __init__(self, on_turn: Callable[[int], None] | None):
        self.turn, self.spans, self._on_turn = 1, [], on_turn

    def enter(self, turn: int) -> None:
        self.turn = turn
        if self._on_turn:
            self._on_turn(turn)

    def add(self, spans: list[dict]) -> None:
        self.spans += [{"turn": self.turn, **span} for span in spans]

    @contextmanager
    def span(self, kind: str, **facts):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.spans.append({"turn": self.turn, "kind": kind, "ms": round((time.perf_counter() - start) * 1000, 3),
                               **facts})


def episode_play(*, task: dict, agent, customer, memory=None, max_turns: int = DEFAULT_MAX_TURNS,
                 infra_errors: tuple[type[Exception], ...] = (),
                 on_turn: Callable[[int], None] | None = None) -> EpisodeOutcome:
    """Play one episode and score it. Exceptions in `infra_errors` (an LLM endpoint that failed
    for good) end the episode with ended_by="error" instead of propagating."""
    started = time.monotonic()
    env = ShopEnv(shop_fresh(task["shop_seed"]))
    messages, memories, ended_by, infra_error = [], [], "max_turns", ""
    timeline = _Timeline(on_turn)
    try:
        ended_by = _converse(agent, customer, memory, env, messages, memories, max_turns, timeline)
    except infra_errors as exc:
        messages += [{**m, "turn": timeline.turn} for m in env.drain()]
        timeline.add(env.drain_tool_spans())
        ended_by, infra_error = "error", str(exc)
    replies = [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")]
    reward = reward_compute(task=task, final_state=env.state, calls=env.calls, replies=replies,
                            gold_state_hash=gold_state_hash(task))
    return EpisodeOutcome(
        messages=messages, memories=memories, calls=env.calls, turns=exchanges_count(messages), ended_by=ended_by,
        reward=reward, errors=errors_diagnose(task=task, calls=env.calls, reward=reward),
        committed=sorted(getattr(agent, "committed", ())), infra_error=infra_error,
        tokens_in=agent.tokens_in + customer.tokens_in, tokens_out=agent.tokens_out + customer.tokens_out,
        latency_ms=round((time.monotonic() - started) * 1000), spans=timeline.spans)


def transcript_rescore(*, task: dict, transcript: list[dict], shop_seed: int) -> RewardResult:
    """Score a stored episode again against `task` (a newer gold): its tool calls are replayed in
    order on a fresh copy of the shop it was played on (`shop_seed`), which rebuilds its final state
    (tools are deterministic), and its replies are read from the transcript. Nothing is played again:
    neither customer nor agent is asked anything."""
    env = ShopEnv(shop_fresh(shop_seed))
    for message in transcript:
        if message["role"] == "assistant" and message.get("tool_calls"):
            env.execute([(call.get("id"), call["name"], call.get("arguments"), call.get("argument_error", ""))
                         for call in message["tool_calls"]])
    replies = [m["content"] for m in transcript if m["role"] == "assistant" and m.get("content")]
    return reward_compute(task=task, final_state=env.state, calls=env.calls, replies=replies,
                          gold_state_hash=gold_state_hash(task))


def _step_recall(memory, *, turn: int, query: str, env: ShopEnv, dialogue: list[dict],
                 memories: list) -> Callable[[], str] | None:
    """What the agent calls before each later decision of this turn, when the hook retrieves per step."""
    if memory is None or not hasattr(memory, "before_step"):
        return None
    steps = itertools.count(1)

    def recall() -> str:
        block, record = memory.before_step(turn=turn, step=next(steps), query=query, calls=env.calls,
                                           dialogue=dialogue)
        if record is not None:
            memories.append(record)
        return block
    return recall


def _converse(agent, customer, memory, env: ShopEnv, messages: list, memories: list, max_turns: int,
              timeline: _Timeline) -> str:
    timeline.enter(1)
    with timeline.span("customer", backend=customer.label):
        text = customer.opening()
    for turn in range(1, max_turns + 1):
        messages.append({"role": "user", "content": text, "turn": turn})
        if STOP in text:
            return "stop"
        block = ""
        if memory is not None:
            with timeline.span("memory"):
                block, record = memory.before_turn(turn=turn, query=text, calls=env.calls, dialogue=messages[:-1])
            if record is not None:
                memories.append(record)
        recall = _step_recall(memory, turn=turn, query=text, env=env, dialogue=messages[:-1], memories=memories)
        with timeline.span("agent", backend=agent.label):
            reply = agent.respond(text=text, memory=block, env=env, **({"recall": recall} if recall else {}))
        timeline.add(env.drain_tool_spans())
        messages += [{**m, "turn": turn} for m in env.drain()]
        messages.append({"role": "assistant", "content": reply, "turn": turn})
        if env.transferred():
            return "transfer"
        if turn < max_turns:
            timeline.enter(turn + 1)  # the customer's answer opens the next turn
            with timeline.span("customer", backend=customer.label):
                text = customer.respond(reply)
    return "max_turns"
