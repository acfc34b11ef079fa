"""The API schemas of orbs.dmrm.api: request bodies and answers."""
from datetime import datetime
from typing import Annotated, Literal

from ninja import Field, Schema
from pydantic import field_validator

from memweb.schemas import StrictBody
from orbs.dmrm.forms import DOMAINS
from orbs.dmrm.qlearning import ACTION_MAX_CHARS, GOAL_MAX_CHARS, HISTORY_ACTIONS, OBSERVATION_MAX_CHARS
from orbs.dmrm.services import (
    ExperienceFilters,
)

# The largest |reward| a transition may carry. Shop and benchmark rewards lie in [0, 1] and shaped
# rewards within a few units; with γ < 1 a Q-value stays within MAX_ABS_REWARD / (1 - γ), far from
# where floats overflow and charts become unreadable (issue 32: r = 1e308 blanked the Q-value chart).
MAX_ABS_REWARD = 1000.0
# An agent shows its last few actions; a longer history is never read, so it is refused, not carried.
RECENT_ACTIONS_MAX = 50


class TransitionIn(StrictBody, Schema):
    trajectory_id: str = Field(min_length=1, max_length=200)
    step: int = Field(ge=0, le=2**31 - 1)  # the column is a PostgreSQL integer
    goal: str = Field(min_length=1, max_length=GOAL_MAX_CHARS)
    observation: str = Field(min_length=1, max_length=OBSERVATION_MAX_CHARS)
    action: str = Field(min_length=1, max_length=ACTION_MAX_CHARS)
    reward: float = Field(allow_inf_nan=False)  # and at most MAX_ABS_REWARD in absolute value (below)
    next_observation: str = Field("", max_length=OBSERVATION_MAX_CHARS)
    done: bool = False
    success: bool | None = None
    memory: str = "target"
    domain: str = Field("", max_length=64)
    task_ref: str = Field("", max_length=200)
    run_ref: str = Field("", max_length=200)
    episode_ref: str = Field("", max_length=200)
    customer_key: str = Field("", max_length=200, description="The customer this trajectory served: erasing them "
                                                              "removes the entries it wrote or updated")

    @field_validator("reward")
    @classmethod
    def _reward_bounded(cls, reward: float) -> float:
        if abs(reward) > MAX_ABS_REWARD:
            raise ValueError(f"reward must be at most {MAX_ABS_REWARD:g} in absolute value, got {reward:g}")
        return reward


class TransitionsIn(StrictBody, Schema):
    transitions: list[TransitionIn] = Field(min_length=1, max_length=500)


class EntryOut(Schema):
    id: int
    trajectory_id: str
    step: int
    action: str
    q_value: float
    visits: int


class TransitionsOut(Schema):
    written: int
    entries: list[EntryOut]


class ExperienceRetrieveIn(StrictBody, Schema):
    goal: str = Field(min_length=1, max_length=GOAL_MAX_CHARS)
    observation: str = Field(min_length=1, max_length=OBSERVATION_MAX_CHARS)
    recent_actions: list[Annotated[str, Field(max_length=ACTION_MAX_CHARS)]] = Field(
        [], max_length=RECENT_ACTIONS_MAX,
        description=f"The last actions of the trajectory; the last {HISTORY_ACTIONS} are shown")
    domain: str = Field("", max_length=64, description="The task's domain: the source memory is suppressed once "
                                                         "this domain has enough successful trajectories")
    client: str = Field("", max_length=200)
    customer_key: str = Field("", max_length=200, description="Whose query this is (erasing them removes its log)")


class ExperienceHitOut(Schema):
    experience_id: int
    memory: str
    raw_score: float
    score: float
    included: bool
    withheld: bool
    block: int | None
    reason: str
    action: str
    q_value: float
    tokens: int


class ExperienceRetrieveOut(Schema):
    retrieval_id: int
    prompt_block: str
    suppressed: bool
    successful_trajectories: int
    budget_used: int
    c_max: int
    min_similarity: float
    trace: list[ExperienceHitOut]


class DMRMSettingsOut(Schema):
    alpha: float
    gamma: float
    c_max: int
    n_success: int
    suppression_mode: str
    source_weight: float
    scan_limit: int
    min_similarity: float
    state_match: str
    state_similarity: float
    review_api_writes: bool


class DMRMSettingsIn(StrictBody, Schema):
    """The settings to change; those left out keep their values. Ranges are the settings page's."""

    alpha: float | None = None
    gamma: float | None = None
    c_max: int | None = None
    n_success: int | None = None
    suppression_mode: str | None = Field(None, max_length=16)
    source_weight: float | None = None
    scan_limit: int | None = None
    min_similarity: float | None = None
    state_match: str | None = Field(None, max_length=8)
    state_similarity: float | None = None


class ExperienceListFilters(Schema):
    memory: Literal["", "target", "source"] = ""
    status: Literal["", "pending", "approved", "rejected", "deleted"] = Field(
        default="", description="deleted: the soft-deleted experiences, which no other filter lists")
    source_memory: str = Field("", max_length=100, description="The name of a source memory.")
    domain: str = Field("", max_length=64)
    q: str = Field(default="", max_length=200, description="Text in the action.")
    flagged: bool = False

    def to_filters(self) -> ExperienceFilters:
        return ExperienceFilters(memory=self.memory, status=self.status, source_memory=self.source_memory,
                                 domain=self.domain, text=self.q, flagged=self.flagged)


class ExperienceOut(Schema):
    id: int
    memory: str
    source_memory: str | None
    goal: str
    observation: str
    action: str
    reward: float
    next_observation: str
    q_value: float
    visits: int
    bootstraps: int
    trajectory_id: str
    step: int
    success: bool | None
    domain: str
    task_ref: str
    run_ref: str
    episode_ref: str
    embedding_model: str
    token_length: int
    status: str
    reviewer: str | None
    reviewed_at: datetime | None
    review_note: str
    version: int
    flagged_at: datetime | None
    flag_note: str
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_source_memory(experience) -> str | None:
        return experience.source_memory.name if experience.source_memory else None

    @staticmethod
    def resolve_reviewer(experience) -> str | None:
        return experience.reviewer.get_username() if experience.reviewer else None


class SourceMemoryBuildIn(StrictBody, Schema):
    name: str = Field(min_length=1, max_length=100, description="Unique within the bank")
    source_domain: Literal[tuple(value for value, _ in DOMAINS)] = Field(
        description="Finished episodes of this domain are read")
    gamma: float = Field(0.9, ge=0.0, le=1.0)
    min_reward: float = Field(1.0, allow_inf_nan=False,
                              description="Keep episodes that succeeded or reached this reward")
    min_q: float = Field(0.0, allow_inf_nan=False, description="Keep steps whose discounted return reaches this")


class ExperienceDeleteIn(StrictBody, Schema):
    expected_version: int = Field(ge=1, description="The version you saw; a stale one gets 409 and changes nothing.")
    reason: str = Field(min_length=1, max_length=2000, description="Why it is deleted (kept in its history).")


class ExperienceRestoreIn(StrictBody, Schema):
    expected_version: int = Field(ge=1)
    note: str = Field("", max_length=2000)
