"""The conversation as the customer saw it, and the ground truth it is judged against.

What is judged: the agent's final reply (its last message with text), with the whole conversation
before it as history. The shop's reward, and so the metric score and the offline critique, exist
only for an episode's end state; judging earlier turns would give the two backends different
shapes. One episode therefore has one feedback tuple.
"""
from dataclasses import dataclass

from evaluation.environments import STOP
from evaluation.models import Episode


@dataclass(frozen=True)
class Judged:
    """The reply being judged and the conversation before it, as the customer saw it."""
    index: int | None
    history: list[tuple[str, str]]
    response: str


def _visible(message: dict) -> tuple[str, str] | None:
    """Customers see text, not tool calls or results."""
    text = (message.get("content") or "").replace(STOP, "").strip()
    if message["role"] == "user" and text:
        return "Customer", text
    if message["role"] == "assistant" and text:
        return "Agent", text
    return None


def episode_judged(episode: Episode) -> Judged:
    transcript = episode.transcript
    replies = [i for i, m in enumerate(transcript) if m["role"] == "assistant" and (m.get("content") or "").strip()]
    index = replies[-1] if replies else None
    before = transcript[:index] if index is not None else transcript
    history = [line for line in map(_visible, before) if line]
    return Judged(index=index, history=history, response=transcript[index]["content"].strip() if replies else "")


def evaluation_context(spec: dict) -> dict:
    """The ground truth the simulated user scores against (the agent never saw it). It holds the
    gold answer, so it feeds the satisfaction score and the annotation study, never a critique that
    goes into memory (see critique_context)."""
    return {
        "requests": [{"kind": i["kind"], **i["slots"]} for i in spec["intents"]],
        "expected_changes": spec["gold_actions"],
        "expected_lookups": [call["name"] for call in spec["gold_lookups"]],
        "facts_the_customer_must_be_told": {o["label"]: o["value"] for o in spec["required_outputs"]},
    }


def critique_context(spec: dict) -> dict:
    """What the simulated customer writing a critique knows: its own requests and which facts it
    wanted told, never the gold changes' arguments nor the facts' values. A critique is folded into
    memory (feedback into memory) and the next trial replays the same task, so any answer value in
    it would hand the agent the answer."""
    return {
        "requests": [{"kind": i["kind"], **i["slots"]} for i in spec["intents"]],
        "facts_the_customer_wants_told": [o["label"] for o in spec["required_outputs"]],
    }


def breakdown_after(episode: Episode, stated: frozenset[str] = frozenset()) -> dict:
    """The reward breakdown once revisions (multi-turn feedback) have stated the required outputs
    labelled in `stated`: outputs count as told when none is missing any more. Revisions are words
    only, so every other component stays as the episode left it."""
    breakdown = dict(episode.reward_breakdown)
    missing = {o["label"] for o in episode.reward_details.get("missing_outputs", [])}
    if stated and "outputs" in breakdown and missing <= stated:
        breakdown["outputs"] = 1.0
    return breakdown


def succeeded_after(episode: Episode, stated: frozenset[str] = frozenset()) -> bool:
    """Success, counting the facts revisions stated (an episode cut short stays failed)."""
    if episode.success or not stated or episode.infra_error:
        return episode.success
    components = ("state", "grounded", "lookups", "outputs")
    breakdown = breakdown_after(episode, stated)
    return all(breakdown[name] == 1.0 for name in components if name in breakdown)
