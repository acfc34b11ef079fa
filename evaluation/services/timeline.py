"""An episode as a timeline of spans, for its page: per turn, the customer's step, the retrieval
(rewrite / embed / search, Orbs injected or cut by the prompt budget), the agent's step with its
LLM calls and tool calls (arguments, result, ms), and the episode's totals.

Offline steps (scripted agent, agenda customer, heuristic rewriter) are spans labelled scripted:
no LLM call, no tokens, no cost. The stored transcript is shown as the customer saw it: the stop
token is a control signal, so it becomes an end-of-conversation marker instead of text.
"""
from collections import defaultdict

from evaluation.environments import STOP
from evaluation.models import Episode
from evaluation.vocabulary import EvaluationLLMRole
from memweb.llm.backends import TextBackend
from memweb.llm.usage import llm_calls_of_traces, llm_calls_traced, llm_usage_by_role, llm_usage_total
from orbs.vocabulary import OrbsLLMRole

# Which step of a turn makes the calls of each role.
STEP_OF_ROLE = {EvaluationLLMRole.USER_SIMULATOR: "customer", OrbsLLMRole.REWRITER: "memory",
                EvaluationLLMRole.ACTOR: "agent"}


def _scripted(backend: str) -> bool:
    """The agenda customer, the scripted agent and the heuristic rewriter: offline, no LLM."""
    return backend == "agenda" or TextBackend.is_scripted(backend)


def customer_words(text: str) -> tuple[str, bool]:
    """What the customer said, without the stop token, and whether they ended the conversation."""
    return (text or "").replace(STOP, "").strip(), STOP in (text or "")


def episode_timeline(*, episode: Episode) -> dict:
    calls = llm_calls_traced(trace_id=episode.trace_id)
    longest = max([span["ms"] for span in episode.spans] + [call["latency_ms"] for call in calls] + [1e-9])
    turns = _turns(episode, calls, longest)
    usage = llm_usage_by_role(calls=llm_calls_of_traces([episode.trace_id])) if calls else []
    return {"turns": turns, "usage": usage, "totals": _totals(episode, usage),
            "after": [_with_width(call, call["latency_ms"], longest) for call in calls if call["turn"] is None]}


def _with_width(item: dict, ms: float, longest: float) -> dict:
    return {**item, "width": max(1, round(100 * ms / longest))}


def _turns(episode: Episode, calls: list[dict], longest: float) -> list[dict]:
    memories, step_memories = {}, defaultdict(list)
    for record in episode.memories:  # a per-step memory (DMRM) adds a record for each later decision
        if record.get("step"):
            step_memories[record["turn"]].append(record)
        else:
            memories[record["turn"]] = record
    spans, tool_ms, messages = defaultdict(dict), {}, defaultdict(list)
    for span in episode.spans:
        if span["kind"] == "tool":
            tool_ms[span["call_id"]] = span["ms"]
        else:
            spans[span["turn"]][span["kind"]] = _with_width(
                {**span, "scripted": _scripted(span.get("backend", ""))}, span["ms"], longest)
    steps_calls = defaultdict(list)
    for call in calls:
        if call["turn"] is not None:
            steps_calls[(call["turn"], STEP_OF_ROLE.get(call["role"], "agent"))].append(
                _with_width(call, call["latency_ms"], longest))
    for message in episode.transcript:
        messages[message.get("turn", 0)].append(message)
    return [{**_turn(number, messages[number], memories.get(number), spans[number], steps_calls, tool_ms),
             "step_memories": step_memories[number]} for number in sorted(messages)]


def _turn(number: int, messages: list[dict], memory: dict | None, spans: dict, steps_calls, tool_ms) -> dict:
    results = {m.get("tool_call_id"): m for m in messages if m["role"] == "tool"}
    events = [event for message in messages for event in _events(message, results, tool_ms)]
    return {"number": number, "memory": memory, "events": events, "spans": spans,
            "exchange": any(m["role"] == "assistant" for m in messages),
            "calls": {step: steps_calls.get((number, step), []) for step in ("customer", "memory", "agent")},
            "retrieval": _retrieval(memory)}


def _events(message: dict, results: dict, tool_ms: dict) -> list[dict]:
    """A message as what the page draws: the customer's words, the agent's tool calls (each with
    its result and time) and its words. Tool results are drawn with their call."""
    if message["role"] == "user":
        text, ended = customer_words(message.get("content"))
        return [{"type": "customer", "text": text, "ended": ended}]
    if message["role"] != "assistant":
        return []
    tools = [{"type": "tool", **call, "result": results.get(call["id"], {}), "ms": tool_ms.get(call["id"])}
             for call in message.get("tool_calls", ())]
    said = [{"type": "reply", "text": message["content"]}] if message.get("content") else []
    return tools + said


def _retrieval(memory: dict | None) -> dict | None:
    """MemOrb's retrieval facts for the span: the stage timings and what the prompt budget did."""
    if not memory or memory.get("hits") is None:
        return None
    hits = memory["hits"]
    return {"timings": memory.get("timings") or {}, "retrieved": len(hits),
            "injected": sum(bool(h.get("injected")) for h in hits),
            "withheld": sum(bool(h.get("withheld")) for h in hits),
            "cut": sum(h.get("injected") is False and not h.get("withheld") for h in hits),
            "rewriter": memory.get("rewriter_backend", ""),
            "rewriter_scripted": _scripted(memory.get("rewriter_backend", "scripted"))}


def _totals(episode: Episode, usage: list[dict]) -> dict:
    """Tokens, dollars and time of the whole episode. Without LLM calls every step was offline:
    no tokens and no cost, which is known, not missing."""
    total = llm_usage_total(usage)
    if usage:
        tokens_in, tokens_out, cost = total["tokens_in"], total["tokens_out"], total["cost"]
    else:  # an episode stored before calls were traced may have made some: its cost is unknown
        tokens_in, tokens_out, cost = episode.tokens_in, episode.tokens_out, 0.0 if episode.trace_id else None
    return {"tokens_in": tokens_in, "tokens_out": tokens_out, "calls": total["calls"], "cost": cost,
            "latency_ms": episode.latency_ms, "traced": episode.trace_id is not None,
            "memory_ms": sum(s["ms"] for s in episode.spans if s["kind"] == "memory"),
            "tool_ms": sum(s["ms"] for s in episode.spans if s["kind"] == "tool")}
