"""q' = rewrite(q ⊕ C): one standalone search query from the agent's current
question and its conversation context.

Offline: the query normalised (case, spacing, greetings and politeness
dropped) followed by the context's salient facts as `key: value` pairs, in a
fixed order, so equal inputs always give the same query.
"""
import json
import re

from pydantic import BaseModel, Field

from orbs.backends import BackendResult, run_with_fallback
from orbs.vocabulary import OrbsLLMRole

ROLE = OrbsLLMRole.REWRITER
SALIENT_KEYS = (
    "domain", "intent", "issue", "category", "product", "sku", "size", "color", "budget", "order_status", "emotion",
)
_FILLER = re.compile(
    r"^(?:(?:hi|hello|hey|good (?:morning|afternoon|evening))\b[ ,!.]*)|\b(?:please|kindly|thanks|thank you)\b[ ,!.]*"
)
_SPACES = re.compile(r"\s+")
_MAX_VALUE_CHARS = 80
# C in q' = rewrite(q ⊕ C) is the running dialogue; the rewriter sees its latest messages, at most
# this many (three exchanges) and this many characters, so a long episode keeps the call small.
CONTEXT_MESSAGES = 6
CONTEXT_CHARS = 2000


def _normalise(text: str) -> str:
    text = _FILLER.sub(" ", text.strip().lower())
    return _SPACES.sub(" ", text).strip(" ,.")


def _user_text(turn) -> str:
    if isinstance(turn, dict) and turn.get("role") == "user":
        turn = turn.get("content")
    return turn if isinstance(turn, str) else ""


def _last_user_turn(context: dict) -> str:
    """The latest customer turn when the context carries the conversation (strings or chat messages)."""
    history = context.get("history") or context.get("messages") or []
    texts = [_user_text(turn) for turn in history] if isinstance(history, list) else []
    return next((text for text in reversed(texts) if text.strip()), "")


def dialogue_window(messages) -> list[dict]:
    """The dialogue's latest customer and agent messages with text (tool traffic left out), oldest
    first, within CONTEXT_MESSAGES and CONTEXT_CHARS; a message that alone passes the limit is cut."""
    spoken = [{"role": m["role"], "content": m["content"].strip()} for m in messages
              if m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str) and m["content"].strip()]
    window, chars = [], 0
    for message in reversed(spoken[-CONTEXT_MESSAGES:]):
        room = CONTEXT_CHARS - chars
        if room <= 0:
            break
        window.insert(0, {**message, "content": message["content"][-room:]})
        chars += len(window[0]["content"])
    return window


def _salient_facts(context: dict) -> list[str]:
    facts = []
    for key in SALIENT_KEYS:
        value = context.get(key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
            facts.append(f"{key}: {_normalise(str(value))[:_MAX_VALUE_CHARS]}")
    return facts


def rewrite_offline(query: str, context: dict) -> str:
    parts = [_normalise(query)]
    previous = _normalise(_last_user_turn(context))
    if previous and previous != parts[0]:
        parts.append(previous)
    return "; ".join(parts + _salient_facts(context))


class RewriteOut(BaseModel):
    query: str = Field(min_length=1, max_length=2000)


_SYSTEM_PROMPT = (
    "Rewrite an e-commerce support agent's current question and its conversation context into one standalone "
    "search query for a memory of past support episodes. Keep product, SKU, order state, budget and the "
    "customer's problem and mood; drop greetings."
)


def _rewrite_with_llm(query: str, context: dict) -> str:
    from memweb.llm import llm_json

    messages = [
        {"role": "system", "content": _SYSTEM_PROMPT},
        {"role": "user", "content": json.dumps({"query": query, "context": context}, ensure_ascii=False, default=str)},
    ]
    return llm_json(role=ROLE, messages=messages, schema=RewriteOut).query.strip()


def query_rewrite(*, query: str, context: dict) -> BackendResult:
    return run_with_fallback(
        role=ROLE, llm=lambda: _rewrite_with_llm(query, context), offline=lambda: rewrite_offline(query, context)
    )
