"""The agent's answer to a critique, for multi-turn feedback (MemoryBench lets the simulated user
give up to three feedback turns, each answered by the system).

The episode's actions are over when it is judged, so a revision can only change what the customer
is told, never the shop's state: a wrong change stays wrong, a missing fact can still be given.
"""
from evaluation.environments import environment
from evaluation.feedback.prompts import REVISION_SYSTEM
from evaluation.models import Episode
from evaluation.vocabulary import EvaluationLLMRole
from memweb.llm import llm_chat

REVISION_ROLE = EvaluationLLMRole.ACTOR
NOTHING_TO_ADD = "I am sorry. I cannot change what has already been done in this conversation."


def revision_scripted(*, episode: Episode, stated: frozenset[str]) -> str:
    """The scripted agent's deterministic rule: when it made every look-up the task needs, it has
    the tool results, so it now states each required fact the reward found missing (and no earlier
    revision stated); otherwise it apologises and adds nothing. It never claims to redo an action."""
    details = episode.reward_details
    missing = [o for o in details.get("missing_outputs", []) if o["label"] not in stated]
    if not missing or details.get("missing_lookups"):
        return NOTHING_TO_ADD
    facts = "; ".join(f"{o['label']}: {o['value']}" for o in missing)
    return f"I am sorry for leaving that out. {facts}."


def revision_llm(*, history: list[tuple[str, str]]) -> str:
    """The LLM agent (actor role) answers the critique, the last customer line of `history`,
    seeing the conversation as the customer saw it."""
    turns = [{"role": "user" if speaker == "Customer" else "assistant", "content": text} for speaker, text in history]
    reply = llm_chat(role=REVISION_ROLE, messages=[{"role": "system", "content": REVISION_SYSTEM}, *turns])
    return (reply.content or "").strip() or NOTHING_TO_ADD


def revision_stated(*, episode: Episode, revision: str) -> frozenset[str]:
    """Labels of the missing required facts the revision states, by the reward's own test."""
    tells = environment(episode.task.environment).tells
    return frozenset(o["label"] for o in episode.reward_details.get("missing_outputs", [])
                     if tells(o["value"], revision))


def agent_is_scripted(episode: Episode) -> bool:
    """A scripted agent's episode is revised by its rule, even where an actor LLM is configured:
    an LLM answering for it would be another agent."""
    return not episode.agent_backend.startswith("llm")
