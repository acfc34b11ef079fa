"""The satisfaction score S of one episode: the scorer LLM's, or offline the metric path."""
from dataclasses import dataclass

from pydantic import BaseModel, Field

from evaluation.feedback import formulas as fm
from evaluation.feedback.models import CalibrationSetting, EpisodeFeedback
from evaluation.feedback.prompts import SCORER_SYSTEM, scorer_prompt
from evaluation.feedback.services.conversation import Judged, breakdown_after, evaluation_context, succeeded_after
from evaluation.models import Episode
from evaluation.vocabulary import EvaluationLLMRole
from memweb.llm import llm_json

SCORER_ROLE = EvaluationLLMRole.SCORER


class ScoreOut(BaseModel):
    score: int = Field(ge=1, le=10)


@dataclass(frozen=True)
class Satisfaction:
    score: int
    method: str


def score_llm(*, episode: Episode, judged: Judged) -> Satisfaction:
    prompt = scorer_prompt(history=judged.history, response=judged.response,
                           evaluation_context=evaluation_context(episode.task_snapshot))
    messages = [{"role": "system", "content": SCORER_SYSTEM}, {"role": "user", "content": prompt}]
    return Satisfaction(llm_json(role=SCORER_ROLE, messages=messages, schema=ScoreOut).score,
                        EpisodeFeedback.ScoreMethod.LLM)


def _tool_errors(episode: Episode) -> int:
    return sum(1 for m in episode.transcript if m["role"] == "tool" and m.get("ok") is False)


def score_offline(*, episode: Episode, metric: str, stated: frozenset[str] = frozenset()) -> Satisfaction:
    """The metric path; an episode without the shop's components (an infrastructure error before any
    scoring) falls back to binary correctness. `stated`: facts later feedback rounds' revisions told."""
    breakdown = breakdown_after(episode, stated)
    if metric == CalibrationSetting.Metric.CORRECTNESS or not {"state", "grounded"} <= breakdown.keys():
        return Satisfaction(fm.score_from_correctness(succeeded_after(episode, stated)),
                            EpisodeFeedback.ScoreMethod.CORRECTNESS)
    score = fm.score_from_shop(breakdown=breakdown, turns=episode.turns, max_turns=episode.max_turns,
                               tool_errors=_tool_errors(episode))
    return Satisfaction(score, EpisodeFeedback.ScoreMethod.SHOP)
