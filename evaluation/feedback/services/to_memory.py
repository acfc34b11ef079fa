"""Feedback as procedural memory: episodes with their feedback folded in become Orbs, off-policy
(judge everything, then feed in batches) or on-policy (each batch plays with the memory so far).

Orbs are reached only through orbs.services. It exports no bank type, so a bank is hinted as
`Bank`: the object bank_resolve returns, or a slug or name it accepts.
"""
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from evaluation.feedback.models import EpisodeFeedback
from evaluation.feedback.services.judging import feedback_for_episode
from evaluation.feedback.services.selectors import feedback_of
from evaluation.models import Episode
from evaluation.services import ReflectionInput, episode_ref, episode_trajectory
from orbs.services import OrbIngestResult, bank_resolve, orb_from_episode

Bank = Any
FEEDBACK_SOURCE_LABEL = "simulated feedback"
MAX_CRITIQUE_CHARS = 4000


def feedback_trajectory(*, feedback: EpisodeFeedback, reflection_input: str = ReflectionInput.TRAJECTORY) -> dict:
    """The episode's trajectory with the feedback folded in, for orb_from_episode:
    - the user's response (if it continued) becomes the last user message, so it is part of the
      Orb's obs and its emotion tag is the user's reaction;
    - metadata["user_feedback"] carries critique, score, action and copy into the Orb's context
      (and so into its embedded document and the LLM reflector's input);
    - `reflection_input`: the episode's trajectory without (default) or with the oracle diagnosis;
    - reward_breakdown["user_satisfaction"] = S/10, a component the offline reflector names when unmet."""
    trajectory = episode_trajectory(feedback.episode, reflection_input=reflection_input)
    if feedback.response:
        trajectory["messages"].append({"role": "user", "content": feedback.response[:MAX_CRITIQUE_CHARS]})
    trajectory["metadata"]["user_feedback"] = {
        "critique": feedback.critique[:MAX_CRITIQUE_CHARS], "behavior": feedback.behavior,
        "satisfaction": feedback.score, "action": feedback.action, "copied": feedback.copied,
        "critique_backend": feedback.critique_backend, "score_backend": feedback.score_backend,
    }
    satisfaction = feedback.score
    for later in feedback.rounds:
        _round_append(trajectory, later)
        satisfaction = later["score"]
    # The last round's score: what the user thought once the agent had answered every critique.
    trajectory["reward_breakdown"]["user_satisfaction"] = satisfaction / 10
    return trajectory


def _round_append(trajectory: dict, later: dict) -> None:
    """A later feedback round: the agent's revision, the user's answer to it, and its verdict."""
    trajectory["messages"].append({"role": "assistant", "content": later["revision"][:MAX_CRITIQUE_CHARS]})
    if later["response"]:
        trajectory["messages"].append({"role": "user", "content": later["response"][:MAX_CRITIQUE_CHARS]})
    trajectory["metadata"]["user_feedback"].setdefault("rounds", []).append({
        "round": later["round"], "critique": (later["response"] or later["reasoning"])[:MAX_CRITIQUE_CHARS],
        "satisfaction": later["score"], "action": later["action"], "revision_backend": later["revision_backend"]})


def feedback_to_orbs(*, episodes, bank: Bank | str) -> list[OrbIngestResult]:
    """One Orb per episode from its feedback-enriched trajectory (idempotent on the Orb's hash).
    ValueError, before anything is stored, when an episode has no feedback yet."""
    episodes = list(episodes)
    rows = {f.episode_id: f for f in feedback_of(episodes).select_related("episode")}
    missing = [e.pk for e in episodes if e.pk not in rows]
    if missing:
        raise ValueError(f"episodes without simulated feedback: {missing}; generate it first")
    return [orb_from_episode(bank=bank, trajectory=feedback_trajectory(feedback=rows[e.pk]),
                             source_label=FEEDBACK_SOURCE_LABEL, episode_ref=f"{episode_ref(e)}:feedback")
            for e in episodes]


@dataclass(frozen=True)
class FeedbackBatch:
    index: int
    episode_ids: list[int]
    orb_ids: list[int]


def _feed(index: int, episodes: list[Episode], bank: Bank) -> FeedbackBatch:
    results = feedback_to_orbs(episodes=episodes, bank=bank)
    return FeedbackBatch(index=index, episode_ids=[e.pk for e in episodes], orb_ids=[r.orb.pk for r in results])


def feedback_offpolicy(*, episodes: Iterable[Episode], bank: Bank | str, batch_size: int,
                       seed: int = 0) -> list[FeedbackBatch]:
    """Off-policy: the base agent's episodes are judged once, all of them, before memory sees any
    feedback; the logs then go into memory in batches of `batch_size`, in the given order."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    bank, episodes = bank_resolve(bank), list(episodes)
    for episode in episodes:
        feedback_for_episode(episode=episode, seed=seed)
    batches = [episodes[i:i + batch_size] for i in range(0, len(episodes), batch_size)]
    return [_feed(index, batch, bank) for index, batch in enumerate(batches)]


def feedback_onpolicy(*, batches: Iterable[Callable[[Bank], Iterable[Episode]]], bank: Bank | str,
                      seed: int = 0) -> list[FeedbackBatch]:
    """On-policy: each callable plays a batch with the bank as it is now; that batch's own feedback
    goes into memory before the next callable is called."""
    bank, done = bank_resolve(bank), []
    for index, play in enumerate(batches):
        episodes = list(play(bank))
        for episode in episodes:
            feedback_for_episode(episode=episode, seed=seed)
        done.append(_feed(index, episodes, bank))
    return done
