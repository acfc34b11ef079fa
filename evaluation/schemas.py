"""API schemas of the evaluation app (tasks and episodes)."""
from datetime import datetime
from typing import Any
from uuid import UUID

from ninja import Schema
from pydantic import Field

from evaluation.configs import AgentConfig, CustomerConfig, MemoryConfig
from evaluation.environments import DEFAULT_MAX_TURNS
from memweb.schemas import StrictBody

MAX_SEED = 2**31 - 1  # as the play form and run launches allow



class TaskOut(Schema):
    id: int
    task_set: str
    external_id: str
    environment: str = Field(description="The task world it is played in (GET /environments)")
    domain: str
    split: str
    difficulty: str
    error_kinds: list[str]
    summary: str
    version: int = Field(description="Bumped when the instruction, gold actions, look-ups or outputs change")
    content_hash: str = Field(description="SHA-256 of the gradable content (docs/REGRADING.md)")


class EnvironmentOut(Schema):
    name: str
    label: str
    builtin_set: str = Field(description="The task set its built-in tasks load into")
    tools: list[str]
    reward_version: int
    reward_components: list[str]
    error_kinds: list[str] = Field(description="What its scripted agent can be told to get wrong")


class TaskDetailOut(TaskOut):
    spec: dict[str, Any]


class TaskListOut(Schema):
    count: int
    items: list[TaskOut]


class TaskFilters(Schema):
    task_set: str = ""
    domain: str = ""
    split: str = ""
    difficulty: str = ""
    error_kind: str = ""
    q: str = Field(default="", max_length=200)
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0)


class BenchmarkImportIn(StrictBody, Schema):
    benchmark: str = Field(max_length=64, description="A benchmark environment's name, e.g. tau2-retail")
    path: str = Field(max_length=1000, description="A checkout of the benchmark, or its JSON folder, on the server")
    task_set: str = Field(default="", max_length=100, description="The task set to fill; the benchmark's name when empty")


class TaskImportIn(StrictBody, Schema):
    task_set: str = Field(min_length=1, max_length=100, description="Name of the task set to create or extend")
    description: str = Field(default="", max_length=2000)
    jsonl: str = Field(description="One task per line, as produced by the export")
    environment: str = Field(default="shop", max_length=64,
                             description="The environment the tasks are played in (GET /environments lists them)")


class LineErrorOut(Schema):
    line: int
    reason: str


class TaskImportOut(Schema):
    task_set: str
    created: int
    updated: int
    new_versions: int = Field(description="Updated tasks whose gradable content changed (a new version each)")


class TaskImportErrorOut(Schema):
    detail: list[LineErrorOut]


class EpisodePlayIn(StrictBody, Schema):
    task_id: int = Field(description="Database id of the task (see GET /tasks)")
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    max_turns: int = Field(default=DEFAULT_MAX_TURNS, ge=1, le=50)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    customer: CustomerConfig = Field(default_factory=CustomerConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)


class EpisodeFilters(Schema):
    task_id: int | None = None
    limit: int = Field(default=50, ge=1, le=500)


class EpisodeSummaryOut(Schema):
    id: int
    task_id: int
    task_external_id: str
    seed: int
    agent_backend: str
    customer_backend: str
    memory_kind: str
    scripted: bool
    status: str
    ended_by: str
    success: bool
    reward: float
    turns: int
    created_at: datetime


class EpisodeOut(EpisodeSummaryOut):
    reward_breakdown: dict[str, Any]
    reward_details: dict[str, Any]
    errors: list[dict[str, Any]]
    committed_errors: list[str]
    infra_error: str
    tool_calls: int
    tokens_in: int
    tokens_out: int
    latency_ms: int
    agent_config: dict[str, Any]
    customer_config: dict[str, Any]
    memory_config: dict[str, Any]
    transcript: list[dict[str, Any]]
    memories: list[dict[str, Any]]


class MemoryEffectOut(Schema):
    """Success of the episodes a memory was served in minus those it was withheld from (randomised
    withholding); estimate and interval are null below the minimum number of episodes or without an
    episode on each side. `interval_below_zero` is one look at 95 %; the review flag is the run's
    corrected test (`flagged_at`, `flag_note`), whose error rate `harm_error_rate` states."""

    served: int = Field(description="Episodes it reached the prompt in (an Orb cut by the token budget is not served).")
    served_successes: int
    withheld: int = Field(description="Episodes it was withheld from at random.")
    withheld_successes: int
    estimate: float | None = Field(description="Success when served minus when withheld, a fraction.")
    low: float | None = Field(description="95 % Newcombe interval, low end.")
    high: float | None
    interval_below_zero: bool
    harm_p_value: float | None = Field(description="One-sided Fisher exact p-value of 'serving it does not lower "
                                                   "success', uncorrected.")


class OrbEffectOut(Schema):
    orb_id: int
    bank: str
    status: str
    flagged_at: datetime | None
    flag_note: str
    effect: MemoryEffectOut


class BankEffectsOut(Schema):
    bank: str
    min_episodes: int = Field(description="Episodes below which no estimate is given.")
    harm_error_rate: float = Field(description="The most a run's flags err: the chance a run flags any memory "
                                               "that does not lower success.")
    flag_rule: str
    orbs: list[OrbEffectOut] = Field(description="Most harmful first (lowest upper bound), then those without an "
                                                 "estimate, most retrieved first.")


class TraceFiltersIn(Schema):
    """The traces page's filters; each optional."""
    role: str = Field("", description="The LLM role of the call (actor, user_simulator, rewriter, ...)")
    model: str = ""
    status: str = Field("", pattern="^(|ok|repaired|error)$", description="ok, repaired (ok after JSON repair) or error")
    min_latency: int | None = Field(None, ge=0, le=2**31 - 1, description="Milliseconds")
    run: int | None = Field(None, ge=1, le=2**31 - 1, description="Only the calls of this run's episodes")


class TraceOut(Schema):
    id: int
    created_at: datetime
    role: str
    model: str
    status: str
    error: str
    attempts: int
    tokens_in: int
    tokens_out: int
    latency_ms: int
    cost: float | None = Field(description="Dollars; null when the model has no configured price")
    trace_id: UUID | None
    turn: int | None
    episode_id: int | None
    run_id: int | None
