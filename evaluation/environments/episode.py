"""One episode in any environment: the customer and the agent take turns on the world the
environment made fresh for it, then the environment's reward scores it and its diagnosis names the
errors.

Agents implement `respond(*, text, memory, env) -> str` (tool calls go through `env`, the world);
customers implement `opening() -> str` and `respond(agent_text) -> str`; both expose `label`,
`tokens_in` and `tokens_out`. A memory hook implements `before_turn(*, turn, query, calls, dialogue) -> (prompt_block,
record)`; `dialogue` is the episode's messages before the current customer turn. A hook that also
implements `before_step(*, turn, step, query, calls, dialogue)` (DMRM: the paper retrieves at every
decision) is asked again before each later decision of the turn: the agent gets `recall`, a callable
it calls after its tool results are in, which answers the new block; each step's record joins the
episode's memories.
"""
import itertools
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

from evaluation.environments.protocol import DEFAULT_MAX_TURNS, STOP, RewardResult
from evaluation.environments.world import transcript_replies


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


def conversation_play(*, world, score: Callable[[object, list[str]], RewardResult],
                      diagnose: Callable[[list[dict], RewardResult], list[dict]], agent, customer, memory=None,
                      max_turns: int = DEFAULT_MAX_TURNS, infra_errors: tuple[type[Exception], ...] = (),
                      on_turn: Callable[[int], None] | None = None) -> EpisodeOutcome:
    """Play one episode on `world` (a fresh one) and score it: `score(world, replies)` gives the
    reward, `diagnose(calls, reward)` the error records. Exceptions in `infra_errors` (an LLM
    endpoint that failed for good) end the episode with ended_by="error" instead of propagating."""
    started = time.monotonic()
    messages, memories, ended_by, infra_error = [], [], "max_turns", ""
    timeline = _Timeline(on_turn)
    try:
        ended_by = _converse(agent, customer, memory, world, messages, memories, max_turns, timeline)
    except infra_errors as exc:
        messages += [{**m, "turn": timeline.turn} for m in world.drain()]
        timeline.add(world.drain_tool_spans())
        ended_by, infra_error = "error", str(exc)
    reward = score(world, transcript_replies(messages))
    return EpisodeOutcome(
        messages=messages, memories=memories, calls=world.calls, turns=exchanges_count(messages), ended_by=ended_by,
        reward=reward, errors=diagnose(world.calls, reward),
        committed=sorted(getattr(agent, "committed", ())), infra_error=infra_error,
        tokens_in=agent.tokens_in + customer.tokens_in, tokens_out=agent.tokens_out + customer.tokens_out,
        latency_ms=round((time.monotonic() - started) * 1000), spans=timeline.spans)


def _step_recall(memory, *, turn: int, query: str, world, dialogue: list[dict],
                 memories: list) -> Callable[[], str] | None:
    """What the agent calls before each later decision of this turn, when the hook retrieves per step."""
    if memory is None or not hasattr(memory, "before_step"):
        return None
    steps = itertools.count(1)

    def recall() -> str:
        block, record = memory.before_step(turn=turn, step=next(steps), query=query, calls=world.calls,
                                           dialogue=dialogue)
        if record is not None:
            memories.append(record)
        return block
    return recall


def _converse(agent, customer, memory, world, messages: list, memories: list, max_turns: int,
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
                block, record = memory.before_turn(turn=turn, query=text, calls=world.calls, dialogue=messages[:-1])
            if record is not None:
                memories.append(record)
        recall = _step_recall(memory, turn=turn, query=text, world=world, dialogue=messages[:-1], memories=memories)
        with timeline.span("agent", backend=agent.label):
            reply = agent.respond(text=text, memory=block, env=world, **({"recall": recall} if recall else {}))
        timeline.add(world.drain_tool_spans())
        messages += [{**m, "turn": turn} for m in world.drain()]
        messages.append({"role": "assistant", "content": reply, "turn": turn})
        if world.transferred():
            return "transfer"
        if turn < max_turns:
            timeline.enter(turn + 1)  # the customer's answer opens the next turn
            with timeline.span("customer", backend=customer.label):
                text = customer.respond(reply)
    return "max_turns"
