"""The API schemas of evaluation.feedback.api: request bodies and answers."""
from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import ConfigDict, Field, model_validator

from evaluation.models import Domain
from evaluation.schemas import MAX_SEED
from memweb.schemas import StrictBody


class FeedbackOut(Schema):
    episode_id: int
    judged_index: int | None
    behavior: str
    reasoning: str
    response: str | None = Field(description="null when the user ends the conversation")
    critique_backend: str
    critique_scripted: bool
    score: int
    sampled_score: int
    score_method: str
    score_backend: str
    score_scripted: bool
    action: str
    copied: bool
    errors: list[dict[str, str]]
    seed: int
    params: dict[str, Any]
    created_at: datetime


class GenerateIn(StrictBody, Schema):
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seed of the action draw (mixed with the episode id).")


class CalibrationRowOut(Schema):
    score: int
    p_score: float
    p_like: float
    p_dislike: float
    p_none: float
    p_copy: float


class CalibrationOut(Schema):
    params: dict[str, Any]
    distribution_source: str
    c_like: float
    c_dislike: float
    global_like: float
    global_dislike: float
    rows: list[CalibrationRowOut]
    binary: dict[str, float] | None


class RecalibrateIn(StrictBody, Schema):
    episode_ids: list[int] | None = Field(None, max_length=100_000, description="Episodes whose scores to use.")
    run_id: int | None = Field(None, description="…or all episodes of an evaluation run.")
    latest: int | None = Field(None, ge=1, le=100_000, description="…or the latest N episodes with feedback.")

    @model_validator(mode="after")
    def _one_selection(self):
        if sum(value is not None for value in (self.episode_ids, self.run_id, self.latest)) != 1:
            raise ValueError("give exactly one of episode_ids, run_id or latest")
        return self


class RefitIn(StrictBody, Schema):
    model_config = ConfigDict(extra="forbid", strict=True)

    campaign_id: int = Field(description="An annotation campaign whose people rated its conversations.")
    apply: bool = Field(False, description="Make the fit the active calibration; otherwise only preview it.")


class RefitRowOut(Schema):
    score: int
    n: int = Field(description="Conversations with this simulated score and a majority action of people.")
    before_like: float
    before_dislike: float
    fit_like: float
    fit_dislike: float
    observed_like: float | None = Field(description="null where n is 0")
    observed_dislike: float | None = Field(description="null where n is 0")


class RefitOut(Schema):
    campaign_id: int
    campaign: str
    n: int
    params: dict[str, Any] | None = Field(description="The calibration with the fit in it; null when it cannot be.")
    problem: str | None = Field(description="Why the fit cannot become the calibration; null when it can.")
    applied: bool
    distribution_source: str = Field(description="Of the active calibration, after this request.")
    rows: list[RefitRowOut]


class RatesQuery(Schema):
    run_id: int | None = Field(None, description="All episodes of this run; otherwise the latest ones.")
    latest: int = Field(200, ge=1, le=100_000)
    domain: Domain | None = None


class RatesOut(Schema):
    n: int
    histogram: list[int]
    counts: dict[str, int]
    realised: dict[str, float]
    targets: dict[str, float]
    expected: dict[str, float] | None
