"""The verbose critique of one episode: the LLM-as-user's, or the offline one of the same shape
built from the reward breakdown of the episode's environment."""
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from evaluation.environments import environment
from evaluation.feedback.models import EpisodeFeedback, FeedbackProfile
from evaluation.feedback.prompts import test_prompt
from evaluation.feedback.services.conversation import Judged, critique_context, succeeded_after
from evaluation.models import Episode
from evaluation.vocabulary import EvaluationLLMRole
from memweb.llm import llm_json

CRITIQUE_ROLE = EvaluationLLMRole.USER_SIMULATOR


class VerboseFeedbackOut(BaseModel):
    reasoning: str = Field(min_length=1, max_length=8000)
    behavior: Literal["continue_conversation", "end_conversation"]
    response: str | None = Field(default=None, max_length=8000)

    @model_validator(mode="after")
    def _response_matches_behavior(self):
        # A broken contract goes back to the model as a repair request rather than being guessed at.
        if self.behavior == "end_conversation" and self.response is not None:
            raise ValueError("response must be null when behavior is end_conversation")
        if self.behavior == "continue_conversation" and not (self.response or "").strip():
            raise ValueError("response must be the next message when behavior is continue_conversation")
        return self


@dataclass(frozen=True)
class Verbose:
    reasoning: str
    behavior: str
    response: str


def critique_llm(*, episode: Episode, judged: Judged, profile: FeedbackProfile) -> Verbose:
    spec = episode.task_snapshot
    prompt = test_prompt(history=judged.history, response=judged.response, task_description=spec["instructions"],
                         evaluation_context=critique_context(spec), language=profile.language)
    messages = [{"role": "system", "content": profile.system_prompt()}, {"role": "user", "content": prompt}]
    answer = llm_json(role=CRITIQUE_ROLE, messages=messages, schema=VerboseFeedbackOut)
    return Verbose(reasoning=answer.reasoning.strip(), behavior=answer.behavior,
                   response=(answer.response or "").strip())


def _problems(episode: Episode, stated: frozenset[str]) -> list[tuple[str, str]]:
    """(reason for the judge's reasoning, what the customer says) per thing that went wrong; facts a
    revision has since stated (`stated`, by label) are no longer missing."""
    breakdown, details, spec = episode.reward_breakdown, episode.reward_details, episode.task_snapshot
    problems = []
    if details.get("invented_ids"):
        ids = ", ".join(details["invented_ids"])
        problems.append((f"the agent mentioned order ids the shop does not have ({ids})",
                         f"Order {ids} does not exist. Please do not make things up."))
    if breakdown.get("state") == 0:
        kinds = ", ".join(sorted({e["kind"].replace("_", " ") for e in episode.errors})) or "no error diagnosed"
        wishes = environment(episode.task.environment).wishes(spec, episode.seed)
        problems.append((f"the request was not carried out as asked ({kinds})",
                         f"That is not what I asked for. Once more: {wishes}"))
    missing = [o for o in details.get("missing_outputs", []) if o["label"] not in stated]
    if missing:
        labels = ", ".join(o["label"] for o in missing)
        problems.append((f"the agent never stated: {labels}", f"You still have not told me the {labels}."))
    # Which look-ups were missing is the answer key's; the customer only sees that none was made.
    if breakdown.get("lookups") == 0 and not problems:
        problems.append(("the agent answered without the look-ups the request needed",
                         "Did you actually check my account and order before answering?"))
    return problems


def _circumstances(episode: Episode) -> list[tuple[str, str]]:
    if episode.infra_error:
        return [("the conversation broke off with an infrastructure error", "The chat stopped working halfway.")]
    if episode.ended_by == Episode.EndedBy.MAX_TURNS:
        return [("the conversation ran out of turns", "This is taking far too long.")]
    return []


def critique_offline(*, episode: Episode, stated: frozenset[str] = frozenset()) -> Verbose:
    """Same shape as the LLM's, built from the reward breakdown and its details (and, in later
    feedback rounds, the facts the agent's revisions have stated)."""
    problems = _problems(episode, stated) + _circumstances(episode)
    if succeeded_after(episode, stated) and not problems:
        reasoning = "The request was carried out as asked, every fact I needed was stated and nothing was invented."
        return Verbose(reasoning=reasoning, behavior=EpisodeFeedback.Behavior.END, response="")
    problems = problems or [("the request was not resolved", "My request is still not resolved.")]
    return Verbose(reasoning="Not satisfied: " + "; ".join(reason for reason, _ in problems) + ".",
                   behavior=EpisodeFeedback.Behavior.CONTINUE, response=" ".join(said for _, said in problems))
