"""The API schemas of evaluation.runs.api: request bodies and answers."""
from datetime import datetime
from typing import Literal

from ninja import Schema
from pydantic import Field

from evaluation.runs.services import (
    DEFAULT_SORT,
    FLIP_SORTS,
    MAX_TRIALS,
)
from memweb.schemas import StrictBody


class TrialOut(Schema):
    number: int
    status: str
    episodes_total: int
    episodes_finished: int
    episodes_error: int
    successes: int
    orbs_written: int
    experiences_written: int


class RunSummaryOut(Schema):
    id: int
    name: str
    status: str
    status_message: str
    scripted: bool
    imported: bool
    memory_mode: str
    evaluation_mode: str = Field(description="replay, held_out or train_test: replayed or held-out tasks measured")
    agent_backend: str
    trials: int
    episodes_total: int
    episodes_finished: int
    episodes_error: int
    successes: int
    bank: str | None
    stale: bool = Field(description="Scored against an older version of a task or of the reward code than today's")
    regraded: bool = Field(description="A re-grade against every current version exists (see `regrade`)")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    url: str


class TaskChangeOut(Schema):
    task: str
    task_id: int
    pinned: int | None
    current: int
    fields: list[str] = Field(description="What changed: instruction, gold actions, look-ups, outputs")


class VersionChangeOut(Schema):
    pinned: int | None
    current: int


class StalenessOut(Schema):
    stale: bool
    pinned: bool = Field(description="False for runs launched before pins existed, and imported runs: unknown")
    tasks: list[TaskChangeOut]
    reward: VersionChangeOut | None


class RegradeOut(Schema):
    id: int
    created_at: datetime
    current: bool = Field(description="Scored against every current task and reward version")
    episodes: int
    changed: int = Field(description="Episodes whose success verdict the re-grade changed")
    task_versions: dict[str, int]
    reward_version: int
    metrics: dict | None
    metrics_trials: int


class RunOut(RunSummaryOut):
    spec: dict = Field(description="The run's settings: its RunSpec as launched (the launch body's fields, with what "
                                   "launch resolved filled in), the source of every setting key below")
    spec_version: int = Field(description="The shape of `spec`; older runs' specs are upgraded to this one")
    agent_config: dict
    customer_config: dict
    memory_k: int
    memory_approved_only: bool
    memory_same_customer_only: bool
    memory_per_turn: bool
    reflection_style: str
    reflection_input: str = Field(description="trajectory, or oracle: the run's reflections saw a diagnosis against "
                                                "the tasks' gold answers")
    preset: str
    withhold_probability: float
    measures_memory_effects: bool = Field(description="Launched in the effect-measurement mode (memory_effects): "
                                                      "retrieved memories were withheld at random")
    dmrm_config: dict
    seed: int
    max_turns: int
    concurrency: int
    review_gate: str
    feedback_enabled: bool
    feedback_memory: str
    feedback_rounds: int
    feedback_calibration: str
    split_rule: str = Field(description="Held-out runs: fraction or task_set; empty for replay")
    test_fraction: float
    train_trials: int = Field(description="train_test runs: the trials that played the train split")
    task_splits: dict[str, str] = Field(description="Held-out runs: task id -> train or test")
    measured: str = Field(description="What the run measured, in words: replayed or held-out tasks")
    progress: list[TrialOut]
    metrics: dict | None
    metrics_trials: int
    pins: dict = Field(description="What the run was scored against: task versions and hashes, reward version, "
                                   "agent and customer configuration, starting memory")
    staleness: StalenessOut
    regrade: RegradeOut | None = Field(description="The latest re-grade: new scores beside the original ones")
    preparation_url: str | None = Field(description="A run started from a copy of a bank: the status URL of the "
                                                    "job that copies it (the run is `preparing` until it is done)")


class RunListOut(Schema):
    count: int
    items: list[RunSummaryOut]


class RunFilters(Schema):
    status: str = ""
    memory_mode: str = ""
    agent_backend: str = ""
    q: str = Field(default="", max_length=200)
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0)


class DifferenceOut(Schema):
    estimate: float
    low: float
    high: float
    p_value: float
    tasks: int
    confidence: float
    decided: bool


class PassKDifferenceOut(DifferenceOut):
    k: int


class TrialDifferenceOut(Schema):
    trial: int
    tasks: int
    a_only: int
    b_only: int
    estimate: float | None
    low: float | None
    high: float | None
    p_value: float


class FlipSideOut(Schema):
    successes: int
    trials: int
    errors: int
    verdict: str
    instability: float | None
    episodes: list[int | None] = Field(description="Episode id of each trial (its transcript), null where none")


class FlipOut(Schema):
    task: str
    a: FlipSideOut
    b: FlipSideOut
    changed: bool
    discordant: int
    difference: float | None


class SettingDifferenceOut(Schema):
    setting: str
    run: str = Field(description="The run's value")
    baseline: str = Field(description="The baseline's value")
    refuses: bool = Field(description="A difference that refuses the comparison unless accept_differences=true; "
                                      "otherwise it only widens or dilutes the measured difference (a warning)")


class RunPairOut(Schema):
    run: int
    baseline: int
    success: DifferenceOut
    verdict: str = Field(description="The result, then what was measured: replayed or held-out tasks, all or the "
                                     "shared ones, which settings were equal and which were not")
    measures: str = Field(description="What was measured, the verdict's second sentence")
    equal: list[str] = Field(description="Identity settings both runs had equal")
    differences: list[SettingDifferenceOut] = Field(description="Identity settings the runs differ in")
    shared_tasks: int | None = Field(description="Compared on this many tasks both runs share (shared_tasks=true); "
                                                 "null: on all their tasks")
    test: str
    pass_k: list[PassKDifferenceOut]
    per_trial: list[TrialDifferenceOut]
    changed: int
    flips: list[FlipOut]


class StaleRunOut(Schema):
    run: int
    name: str
    changes: str = Field(description="What changed since the run was scored, in one line")
    tasks: list[TaskChangeOut]
    reward: VersionChangeOut | None
    regrade_available: bool = Field(description="A re-grade against the current versions exists: scores=regraded")


class CompareOut(Schema):
    runs: list[int]
    baseline: int
    sort: str
    scores: str = Field(description="original, or regraded: stale runs compared by their current re-grade")
    mixed: bool = Field(description="The compared scores answer to different task or reward versions")
    stale: list[StaleRunOut] = Field(description="Runs whose compared scores are against older versions")
    measured: str = Field(description="What the runs measured: replayed tasks, or held-out tasks and their split")
    view: str = Field(description="Held-out runs: the split compared (test or train); empty for replay runs")
    views: list[str] = Field(description="The splits these runs can be compared on")
    pairs: list[RunPairOut]


class CompareQuery(Schema):
    runs: list[int] = Field(min_length=2, max_length=6, description="Run ids; the oldest is the baseline")
    sort: Literal[tuple(FLIP_SORTS)] = DEFAULT_SORT
    scores: Literal["original", "regraded"] = Field(
        default="original", description="regraded: a stale run's current re-grade instead of its original scores")
    allow_stale: bool = Field(default=False, description="Compare runs scored against different task or reward "
                                                         "versions anyway (refused with 409 otherwise)")
    shared_tasks: bool = Field(default=False, description="Runs with different task lists: compare them on the "
                                                          "tasks all of them share (refused with 409 otherwise)")
    accept_differences: bool = Field(
        default=False, description="Compare runs that differ in a setting other than their memory (context window, "
                                   "turn limit, agent, customer...) anyway; each verdict names the differences")
    view: Literal["", "test", "train"] = Field(
        default="", description="Held-out runs: compare the test split (the default) or the train split")


class FeedbackCurveIn(StrictBody, Schema):
    batch_size: int | None = Field(None, ge=1, description="Feedback logs per batch; empty: the run's task count")


class FeedbackCurvePointOut(Schema):
    batches: int = Field(description="Feedback batches written before the tasks were played")
    feedback_logs: int
    orbs: int
    tasks: int
    successes: int
    success_rate: float | None
    low: float
    high: float
    episode_ids: list[int]


class FeedbackCurveOut(Schema):
    id: int
    run: int
    status: str
    status_message: str
    scripted: bool
    batch_size: int
    batches: int
    progress_percent: int
    bank: str | None
    points: list[FeedbackCurvePointOut]
    created_at: datetime
    finished_at: datetime | None
    url: str = Field(description="The curve's page")
    status_url: str = Field(description="This resource: poll it for progress")


class CampaignAddIn(StrictBody):
    which: Literal["failing", "all", "trial"] = Field(default="failing", description="Which finished episodes")
    trial: int | None = Field(default=None, ge=1, le=MAX_TRIALS, description="The trial, with which=trial")
    campaign_id: int | None = Field(default=None, ge=1, le=2**63 - 1,
                                    description="An open or draft campaign of this workspace")
    new_campaign: str = Field(default="", max_length=200, description="Or the name of a new draft campaign")


class TranscriptRunOut(Schema):
    id: int
    name: str
    status: str
    memory_mode: str
    scripted: bool = Field(description="Produced by offline backends (scripted agent or agenda customer), not an LLM")
    agent_uses_gold: bool = Field(description="The offline agent replays each task's gold calls: not an LLM result")
    url: str


class TranscriptEpisodeOut(Schema):
    id: int
    status: str
    success: bool | None
    reward: float | None
    turns: int
    ended_by: str
    url: str


class TranscriptTurnOut(Schema):
    number: int
    events: list[dict] = Field(description="In order: customer {text, ended}, tool {id, name, arguments, result, ms}, "
                                            "reply {text}")
    memories: list[str] = Field(description="The memory text injected into the agent's prompt on this turn")
    retrieval: dict | None = Field(description="MemOrb's retrieval facts: timings, retrieved, injected, cut")


class TranscriptSideOut(Schema):
    run: TranscriptRunOut
    episode: TranscriptEpisodeOut | None = Field(description="None: the run has no transcript of the task in this trial")
    turns: list[TranscriptTurnOut]


class TurnDifferenceOut(Schema):
    number: int
    differs: list[str] = Field(description="What turn `number` differs in: customer, memories, tool calls, reply; "
                                           "or 'A had ended' / 'B had ended'")


class TranscriptsOut(Schema):
    task: str
    trial: int
    trials: list[int] = Field(description="Every trial either run played of the task")
    a: TranscriptSideOut
    b: TranscriptSideOut
    rows: list[TurnDifferenceOut]
    first_difference: TurnDifferenceOut | None
    shared: int = Field(description="How many tasks both runs played")
    position: int
    previous: str | None
    next: str | None
    url: str


class TranscriptsQuery(Schema):
    a: str = Field("", description="Run A's id")
    b: str = Field("", description="Run B's id")
    task: str = Field("", description="The task's external id")
    trial: str = Field("", description="A trial number; by default the first whose verdicts differ")


class TranscriptsMissingOut(Schema):
    detail: str
    shared: list[str] = Field(description="Tasks both runs played (empty when a run is unknown)")
