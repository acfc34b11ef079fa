"""What the memweb API answers, as frozen dataclasses, and the JSON bodies it takes, as TypedDicts.

Field names are the API's own (tests/clients/test_python_client_schema.py checks every one against
the served OpenAPI document). Fields the server adds later are ignored when decoding, so an older
client keeps working against a newer server.
"""
from __future__ import annotations

import dataclasses
import re
import typing
from datetime import datetime
from typing import Any, Optional, TypedDict, TypeVar, Union

Model = TypeVar("Model")


# --- who is asking -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Me:
    username: str
    roles: list[str]


# --- banks --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Bank:
    id: int
    name: str
    slug: str
    description: str
    retrieval_k: int
    approved_only: bool
    min_score: float
    near_duplicate_threshold: float
    auto_approve: str
    auto_approve_min_reward: float
    prompt_token_budget: int
    embedding_model: str
    created_at: datetime
    customer_scope: str = ""
    cross_customer_retrieval: bool = True
    archived_at: Optional[datetime] = None


# --- Orbs -----------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Orb:
    """A policy reflection: `obs` what the customer wanted, `outcome` what to do (or avoid) next time.
    `id` is the Orb's stable id, kept across edits; `revision` counts its edits from 1; `version`
    is what a reviewer's `expected_version` must name."""
    id: int
    content_hash: str
    bank: str
    obs: str
    emotion: str
    outcome: str
    context: dict[str, Any]
    timestamp: datetime
    customer_key: str
    domain: str
    source: str
    source_label: str
    episode_ref: str
    status: str
    version: int
    supersedes_id: Optional[int]
    near_duplicate_of_id: Optional[int]
    near_duplicate_score: Optional[float]
    merged_into_id: Optional[int]
    reviewer: Optional[str]
    reviewed_at: Optional[datetime]
    review_note: str
    embedding_model: str
    emotion_backend: str
    reflector_backend: str
    backend_error: str
    times_retrieved: int
    last_retrieved_at: Optional[datetime]
    created_at: datetime
    revision: int = 1
    revision_id: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class ReviewEvent:
    revision: int
    action: str
    actor: Optional[str]
    before: Any
    after: Any
    note: str
    at: datetime


@dataclasses.dataclass(frozen=True)
class OrbDetail(Orb):
    """An Orb with the text that was embedded and the review history of all its revisions."""
    document: str = ""
    history: list[ReviewEvent] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class OrbRevision(Orb):
    events: list[ReviewEvent] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class OrbRevisions:
    id: int
    current_revision: int
    revisions: list[OrbRevision]


@dataclasses.dataclass(frozen=True)
class OrbPage:
    items: list[Orb]
    count: int


# --- episodes and retrieval -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class EpisodeQueued:
    """An episode accepted for reflection in the background; poll `episode_status` or `wait_for_episode`."""
    ingest_id: int
    status: str
    status_url: str


@dataclasses.dataclass(frozen=True)
class Ingest:
    """Where an episode's reflection into an Orb stands; `orb` once it is done."""
    ingest_id: int
    status: str
    orb: Optional[Orb] = None
    created: Optional[bool] = None
    near_duplicate_of_id: Optional[int] = None
    error: str = ""

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")


@dataclasses.dataclass(frozen=True)
class Hit:
    rank: int
    score: float
    injected: bool  # in the prompt block; false: cut by the bank's token budget
    orb: Orb


@dataclasses.dataclass(frozen=True)
class Retrieval:
    """The Orbs nearest the query, and the prompt block to put in the agent's prompt."""
    retrieval_id: int
    rewritten_query: str
    rewriter_backend: str
    hits: list[Hit]
    injected: int
    prompt_block: str


# --- DMRM experience memory -----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ExperienceEntry:
    id: int
    trajectory_id: str
    step: int
    action: str
    q_value: float
    visits: int


@dataclasses.dataclass(frozen=True)
class TransitionsWritten:
    written: int
    entries: list[ExperienceEntry]


@dataclasses.dataclass(frozen=True)
class ExperienceHit:
    experience_id: int
    memory: str
    raw_score: float
    score: float
    included: bool
    withheld: bool
    block: Optional[int]
    reason: str
    action: str
    q_value: float
    tokens: int


@dataclasses.dataclass(frozen=True)
class ExperienceRetrieval:
    retrieval_id: int
    prompt_block: str
    suppressed: bool
    successful_trajectories: int
    budget_used: int
    c_max: int
    min_similarity: float
    trace: list[ExperienceHit]


@dataclasses.dataclass(frozen=True)
class DMRMSettings:
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
    review_api_writes: bool = True  # API-written experiences wait for a reviewer (set by reviewers only)


@dataclasses.dataclass(frozen=True)
class Experience:
    id: int
    memory: str
    source_memory: Optional[str]
    goal: str
    observation: str
    action: str
    reward: float
    next_observation: str
    q_value: float
    visits: int
    trajectory_id: str
    step: int
    success: Optional[bool]
    domain: str
    status: str
    version: int
    created_at: datetime
    updated_at: datetime
    episode_ref: str = ""


@dataclasses.dataclass(frozen=True)
class ExperiencePage:
    items: list[Experience]
    count: int


# --- background jobs, runs, webhooks --------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Job:
    """Long work (an erasure, a bank copy): poll `job` or `wait_for_job` until `finished`."""
    id: int
    kind: str
    title: str
    status: str  # queued, running, succeeded or failed
    done: int
    total: Optional[int]
    progress_percent: int
    message: str
    error: str
    result: dict[str, Any]
    status_url: str
    created_at: datetime
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    result_url: Optional[str] = None

    @property
    def finished(self) -> bool:
        return self.status in ("succeeded", "failed")


@dataclasses.dataclass(frozen=True)
class RunSummary:
    id: int
    name: str
    status: str
    status_message: str
    scripted: bool  # true: its agent or customer is a scripted (offline) backend, not an LLM
    memory_mode: str
    agent_backend: str
    trials: int
    episodes_total: int
    episodes_finished: int
    episodes_error: int
    successes: int
    bank: Optional[str]
    created_at: datetime
    url: str
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None


@dataclasses.dataclass(frozen=True)
class Run(RunSummary):
    """A run with its metrics (per-trial success, Pass^k) once measured; `progress` per trial."""
    metrics: Optional[dict[str, Any]] = None
    progress: list[Any] = dataclasses.field(default_factory=list)
    seed: int = 0
    max_turns: int = 0


@dataclasses.dataclass(frozen=True)
class RunPage:
    items: list[RunSummary]
    count: int


@dataclasses.dataclass(frozen=True)
class TranscriptRun:
    id: int
    name: str
    status: str
    memory_mode: str
    scripted: bool  # true: offline backends, not an LLM
    agent_uses_gold: bool  # true: the offline agent replays each task's gold calls
    url: str


@dataclasses.dataclass(frozen=True)
class TranscriptEpisode:
    id: int
    status: str
    success: Optional[bool]
    reward: Optional[float]
    turns: int
    ended_by: str
    url: str


@dataclasses.dataclass(frozen=True)
class TranscriptTurn:
    """One turn of one side: `events` in order (customer, tool with its result, reply) and the memory text injected."""
    number: int
    events: list[dict[str, Any]]
    memories: list[str]
    retrieval: Optional[dict[str, Any]] = None


@dataclasses.dataclass(frozen=True)
class TranscriptSide:
    run: TranscriptRun
    episode: Optional[TranscriptEpisode]  # None: no transcript of the task in this trial
    turns: list[TranscriptTurn]


@dataclasses.dataclass(frozen=True)
class TurnDifference:
    number: int
    differs: list[str]


@dataclasses.dataclass(frozen=True)
class Transcripts:
    """Two runs' transcripts of one task in one trial, turn by turn, as the side-by-side page shows them."""
    task: str
    trial: int
    trials: list[int]
    a: TranscriptSide
    b: TranscriptSide
    rows: list[TurnDifference]
    first_difference: Optional[TurnDifference]
    shared: int
    position: int
    previous: Optional[str]
    next: Optional[str]
    url: str


@dataclasses.dataclass(frozen=True)
class Trace:
    """One LLM call beside its episode and run; `cost` is None when its model has no price."""
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
    cost: Optional[float]
    trace_id: Optional[str]
    turn: Optional[int]
    episode_id: Optional[int]
    run_id: Optional[int]


@dataclasses.dataclass(frozen=True)
class TracePage:
    items: list[Trace]
    count: int


@dataclasses.dataclass(frozen=True)
class Webhook:
    id: int
    url: str
    description: str
    events: list[str]
    bank: str
    active: bool
    created_by: Optional[str]
    created_at: datetime


@dataclasses.dataclass(frozen=True)
class WebhookCreated(Webhook):
    secret: str = ""  # shown once: keep it to check the signatures of deliveries


@dataclasses.dataclass(frozen=True)
class Delivery:
    id: int
    uuid: str
    webhook_id: int
    event: str
    status: str
    attempts: int
    attempt_log: list[Any]
    last_status_code: Optional[int]
    last_error: str
    next_attempt_at: Optional[datetime]
    created_at: datetime
    delivered_at: Optional[datetime]
    payload: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class DeliveryPage:
    items: list[Delivery]
    count: int


# --- request bodies ---------------------------------------------------------------------------------

class Transition(TypedDict, total=False):
    """One decision step of a trajectory, for DMRM's experience memory. The first six keys are required."""
    trajectory_id: str
    step: int
    goal: str
    observation: str
    action: str
    reward: float
    next_observation: str
    done: bool
    success: Optional[bool]
    memory: str  # "target" (default) or "source"
    domain: str
    task_ref: str
    run_ref: str
    episode_ref: str
    customer_key: str


class BankIn(TypedDict, total=False):
    name: str
    description: str
    retrieval_k: int
    approved_only: bool
    min_score: float
    near_duplicate_threshold: float
    auto_approve: str
    auto_approve_min_reward: float
    prompt_token_budget: Optional[int]
    customer_scope: str
    cross_customer_retrieval: bool


class EpisodeIn(TypedDict, total=False):
    trajectory: dict[str, Any]
    source_label: str
    episode_ref: str


class RememberIn(TypedDict, total=False):
    text: str
    context: dict[str, Any]
    customer_key: str
    domain: str
    source_label: str


class RetrieveIn(TypedDict, total=False):
    query: str
    context: dict[str, Any]
    k: Optional[int]
    approved_only: Optional[bool]
    domain: Optional[str]
    customer_key: Optional[str]
    min_score: Optional[float]
    client: str
    filter: Optional[dict[str, Any]]


class RetrievalOutcomeIn(TypedDict, total=False):
    success: bool
    reward: Optional[float]
    episode_ref: str


class ErasureIn(TypedDict, total=False):
    customer_key: str
    reason: str
    every_bank: bool


class TransitionsIn(TypedDict, total=False):
    transitions: list[Transition]


class ExperienceRetrieveIn(TypedDict, total=False):
    goal: str
    observation: str
    recent_actions: list[str]
    domain: str
    client: str
    customer_key: str


class DMRMSettingsIn(TypedDict, total=False):
    alpha: Optional[float]
    gamma: Optional[float]
    c_max: Optional[int]
    n_success: Optional[int]
    suppression_mode: Optional[str]
    source_weight: Optional[float]
    scan_limit: Optional[int]
    min_similarity: Optional[float]
    state_match: Optional[str]
    state_similarity: Optional[float]


class WebhookIn(TypedDict, total=False):
    url: str
    events: list[str]
    bank: str
    description: str


class WebhookSwitchIn(TypedDict, total=False):
    active: bool


# --- decoding ---------------------------------------------------------------------------------------

_FRACTION = re.compile(r"\.(\d+)")


def parse_datetime(text: str) -> datetime:
    """ISO 8601 as the API writes it; before Python 3.11 fromisoformat takes neither "Z" nor a
    fraction of other than 3 or 6 digits."""
    text = text.replace("Z", "+00:00")
    text = _FRACTION.sub(lambda found: "." + found.group(1)[:6].ljust(6, "0"), text, count=1)
    return datetime.fromisoformat(text)


def decode(kind: type[Model], data: typing.Mapping[str, Any]) -> Model:
    """A dataclass from the API's JSON; fields the server adds later are ignored, missing ones take defaults."""
    hints = typing.get_type_hints(kind)
    fields = dataclasses.fields(typing.cast(Any, kind))
    return kind(**{field.name: _convert(hints[field.name], data[field.name]) for field in fields if field.name in data})


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    if typing.get_origin(hint) is Union:  # Optional[X]
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return decode(hint, value)
    if typing.get_origin(hint) is list and dataclasses.is_dataclass(typing.get_args(hint)[0]):
        return [decode(typing.get_args(hint)[0], item) for item in value]
    if hint is datetime:
        return parse_datetime(value)
    return value
