from datetime import datetime

from ninja import Schema
from pydantic import Field

from evaluation.scores.models import EpisodeScore, ScoreKind
from memweb.schemas import JobOut, StrictBody


class DefinitionIn(StrictBody, Schema):
    name: str = Field(description="Unique among the task set's active scores")
    kind: ScoreKind
    config: dict = Field(default_factory=dict, description=(
        "reply_matches: pattern, mode (must | must_not); tool_called: tool, mode, min_count, max_count; "
        "turns_at_most: turns; ended_by: ended_by (stop | transfer | max_turns | error); "
        "llm_judge: rubric, scale (pass_fail | one_to_five)"))
    score_existing: bool = Field(default=True, description="Also score the finished runs' episodes of the set "
                                                           "now, as a background job")


class DefinitionOut(Schema):
    id: int
    task_set_id: int
    task_set: str
    name: str
    slug: str
    kind: ScoreKind
    config: dict
    describe: str = Field(description="What it checks, in a line")
    archived: bool
    created_at: datetime


class DefinitionCreatedOut(DefinitionOut):
    job: JobOut | None = Field(description="The job scoring the set's finished episodes; empty when none was started")


class ScoreSummaryOut(Schema):
    id: int = Field(description="The score definition")
    name: str
    kind: ScoreKind
    pass_fail: bool
    mean: float | None = Field(description="Mean value over the scored episodes (1/0 rules: the pass rate)")
    pass_rate: float | None
    scored: int
    not_judged: int = Field(description="Episodes an LLM judge did not judge: no LLM configured (offline)")
    errors: int
    judge: str = Field(description="Who gave the values: a rule, or the LLM judge's model")


class EpisodeScoreOut(Schema):
    definition_id: int
    name: str
    episode_id: int
    task: str
    trial: int
    status: EpisodeScore.Status
    value: float | None
    passed: bool | None
    explanation: str
    judge: str
    scored_at: datetime


class EpisodeScoreListOut(Schema):
    count: int
    items: list[EpisodeScoreOut]


class ScoreListQuery(Schema):
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0)
