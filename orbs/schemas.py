"""API schemas of the Orbs app, and the shared trajectory shape (TrajectoryIn)
that the evaluation code and external agents hand to `orb_from_episode`."""
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, AliasChoices, ConfigDict, Field, field_validator, model_validator

from memweb.schemas import JobOut, StrictBody
from orbs.backends.emotion import EmotionLabel
from orbs.budget import MAX_PROMPT_TOKEN_BUDGET, REFLECTION_MAX_TOKENS
from orbs.context_filter import (
    FILTER_MAX_BYTES,
    FILTER_MAX_CONDITIONS,
    FILTER_MAX_DEPTH,
    FILTER_MAX_IN_VALUES,
    context_size_problem,
)

TRAJECTORY_EXAMPLE = {
    "task_id": "appliances-017",
    "domain": "appliances",
    "customer_key": "cust-4821",
    "messages": [
        {"role": "user", "content": "Hi, my dishwasher DW-450 arrived with a cracked door. I want to return it."},
        {"role": "assistant", "content": "Sorry to hear that. Let me look up your order.",
         "tool_calls": [{"name": "get_order", "arguments": {"order_id": "W1001"}}]},
        {"role": "tool", "tool_name": "get_order",
         "content": '{"order_id": "W1001", "items": [{"sku": "DW-450", "price": 499.0}], "status": "delivered"}'},
        {"role": "assistant", "content": "I have cancelled the order for you.",
         "tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "W1001"}}]},
        {"role": "tool", "tool_name": "cancel_order", "content": '{"error": "order already delivered"}'},
        {"role": "user", "content": "Cancel? It is already here and broken. This is ridiculous."},
    ],
    "reward": 0.0,
    "success": False,
    "reward_breakdown": {"return_created": False, "no_hallucination": True},
    "errors": [{"kind": "wrong_tool", "tool": "cancel_order",
                "detail": "delivered orders are returned with return_order, not cancelled"}],
    "metadata": {"sku": "DW-450", "order_id": "W1001", "budget": None},
}


class ToolCallIn(StrictBody, Schema):
    name: str = Field(min_length=1, max_length=100)
    arguments: dict[str, Any] = Field(default_factory=dict)


class MessageIn(StrictBody, Schema):
    role: Literal["user", "assistant", "tool", "system"]
    content: str = Field(default="", max_length=20000)
    tool_calls: list[ToolCallIn] = Field(default_factory=list)
    tool_name: str = Field(default="", max_length=100)


class ErrorIn(StrictBody, Schema):
    kind: Literal["wrong_tool", "wrong_arguments", "result_unused"]
    tool: str = Field(min_length=1, max_length=100)
    detail: str = Field(default="", max_length=2000)


def _context_bounded(context: dict[str, Any]) -> dict[str, Any]:
    if problem := context_size_problem(context):
        raise ValueError(problem)
    return context


# An Orb's context (or an episode's metadata, which becomes one): within ORBS_CONTEXT_MAX_BYTES.
BoundedContext = Annotated[dict[str, Any], AfterValidator(_context_bounded)]


class TrajectoryIn(StrictBody, Schema):
    """A finished customer-service episode: the dialogue with tool calls and results, and how it ended."""

    model_config = ConfigDict(json_schema_extra={"examples": [TRAJECTORY_EXAMPLE]})

    task_id: str = Field(min_length=1, max_length=200)
    domain: str = Field(min_length=1, max_length=64)
    customer_key: str = Field(default="", max_length=200)
    messages: list[MessageIn] = Field(min_length=1, max_length=500)
    reward: float = Field(allow_inf_nan=False)
    success: bool
    reward_breakdown: dict[str, float | bool] = Field(default_factory=dict)
    errors: list[ErrorIn] = Field(default_factory=list)
    metadata: BoundedContext = Field(default_factory=dict)

    @field_validator("messages")
    @classmethod
    def _has_user_utterance(cls, messages: list[MessageIn]) -> list[MessageIn]:
        if not any(m.role == "user" and m.content.strip() for m in messages):
            raise ValueError("needs at least one user message with content (obs is built from user utterances)")
        return messages

    @property
    def user_utterances(self) -> list[str]:
        return [m.content.strip() for m in self.messages if m.role == "user" and m.content.strip()]


class EpisodeIn(StrictBody, Schema):
    trajectory: TrajectoryIn
    source_label: str = Field(default="", max_length=200, description="Where it came from, e.g. an evaluation run.")
    episode_ref: str = Field(default="", max_length=200, description="The caller's own id for the episode.")


class EpisodeQueuedOut(Schema):
    ingest_id: int
    status: str
    status_url: str


class OrbOut(Schema):
    """An Orb as its revision: `id` is the stable id every revision shares; `revision_id` the row of this
    revision; `supersedes_id` the previous revision's row. Other Orbs are named by their stable ids."""

    id: int = Field(description="The Orb's stable id: the same for every revision, kept across edits.")
    revision: int = Field(description="1 for the Orb as created, then one more per edit that changes its text.")
    revision_id: int = Field(description="This revision's own id; any revision's id also names the Orb.")
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
    supersedes_id: int | None = Field(description="The previous revision's revision_id.")
    near_duplicate_of_id: int | None = Field(description="The stable id of the Orb this one nearly duplicates.")
    near_duplicate_score: float | None
    merged_into_id: int | None = Field(description="The stable id of the Orb this one was merged into.")
    reviewer: str | None
    reviewed_at: datetime | None
    review_note: str
    embedding_model: str
    emotion_backend: str
    reflector_backend: str
    backend_error: str
    times_retrieved: int
    last_retrieved_at: datetime | None
    created_at: datetime

    @staticmethod
    def resolve_id(orb) -> int:
        return orb.lineage_id

    @staticmethod
    def resolve_revision_id(orb) -> int:
        return orb.pk

    @staticmethod
    def resolve_near_duplicate_of_id(orb) -> int | None:
        return orb.near_duplicate_of.lineage_id if orb.near_duplicate_of_id else None

    @staticmethod
    def resolve_merged_into_id(orb) -> int | None:
        return orb.merged_into.lineage_id if orb.merged_into_id else None

    @staticmethod
    def resolve_bank(orb) -> str:
        return orb.bank.slug

    @staticmethod
    def resolve_reviewer(orb) -> str | None:
        return orb.reviewer.get_username() if orb.reviewer else None


class EventOut(Schema):
    revision: int = Field(description="The revision of the Orb the event happened to.")
    action: str
    actor: str
    before: dict[str, Any]
    after: dict[str, Any]
    note: str
    at: datetime

    @staticmethod
    def resolve_actor(event) -> str:
        return event.actor_name

    @staticmethod
    def resolve_revision(event) -> int:
        return event.orb.revision


class OrbDetailOut(OrbOut):
    document: str
    history: list[EventOut] = Field(description="Every review event of every revision, oldest first.")


class OrbRevisionOut(OrbOut):
    events: list[EventOut]

    @staticmethod
    def resolve_events(orb) -> list:
        return orb.revision_events


class OrbRevisionsOut(Schema):
    id: int = Field(description="The Orb's stable id.")
    current_revision: int
    revisions: list[OrbRevisionOut] = Field(description="Oldest first, each with its review events: the audit chain.")


class OrbListFilters(Schema):
    bank: str = ""
    status: Literal["", "pending", "approved", "rejected", "superseded", "deleted"] = Field(
        default="", description="deleted: the soft-deleted Orbs, which no other filter lists")
    domain: str = ""
    emotion: str = ""
    source: Literal["", "episode", "api", "remembered"] = ""
    source_label: str = ""
    customer_key: str = ""
    q: str = Field(default="", max_length=200, description="Text in obs or outcome, or a hash prefix.")
    near_duplicates: bool = False
    all_revisions: bool = Field(default=False, description="Every revision; else each Orb once, as its current one.")

    def to_filters(self):
        from orbs.services.queue import OrbFilters

        return OrbFilters(
            bank=self.bank, status=self.status, domain=self.domain, emotion=self.emotion, source=self.source,
            source_label=self.source_label, customer_key=self.customer_key, text=self.q,
            near_duplicates=self.near_duplicates, all_revisions=self.all_revisions,
        )


class IngestOut(Schema):
    ingest_id: int
    status: str
    orb: OrbOut | None = None
    created: bool | None = None
    near_duplicate_of_id: int | None = None
    error: str = ""


CONTEXT_FILTER_EXAMPLE = {"and": [{"field": "sku", "in": ["DW-450", "DW-460"]}, {"field": "priority", "gte": 2}]}


class RetrieveIn(StrictBody, Schema):
    query: str = Field(min_length=1, max_length=5000)
    context: dict[str, Any] = Field(default_factory=dict)
    k: int | None = Field(default=None, ge=1, le=50, description="Defaults to the bank's k (5).")
    approved_only: bool | None = Field(
        default=None, description="Serve approved Orbs only; the bank's setting when empty. A bank that serves approved "
                                  "Orbs only does so whatever the request says.")
    domain: str | None = Field(default=None, max_length=64)
    customer_key: str | None = Field(
        default=None, max_length=200,
        description="Only this customer's Orbs: a same-customer filter (the paper's no-cross-user ablation is k = 1). "
                    "Required by a per-customer bank unless it allows cross-customer retrieval.")
    min_score: float | None = Field(default=None, ge=-1.0, le=1.0)
    client: str = Field(default="", max_length=200)
    filter: dict[str, Any] | None = Field(
        default=None, examples=[CONTEXT_FILTER_EXAMPLE],
        description="Only Orbs whose `context` matches, applied inside the nearest-neighbour search (top k among "
                    "matches). A condition {\"field\": key, op: value} with op `eq`, `in` (a list), or one or more "
                    "of `gt`, `gte`, `lt`, `lte` (numbers only); groups {\"and\": [...]} and {\"or\": [...]}. "
                    f"At most {FILTER_MAX_BYTES} bytes, {FILTER_MAX_CONDITIONS} conditions, {FILTER_MAX_DEPTH} "
                    f"and/or levels, {FILTER_MAX_IN_VALUES} values per `in`. A filter outside the grammar is a 422 "
                    "naming the part, e.g. `filter.and.1.gte`.")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, query: str) -> str:
        # Only spaces would embed as noise and serve whatever sits nearest: refused as "" is.
        if not query.strip():
            raise ValueError("the query is empty: say what the agent is looking for")
        return query


# A remembered lesson fits a prompt entry as the longest reflection does (orbs.budget: at least
# 3 characters per token), so the bank's budget still holds k Orbs.
REMEMBERED_MAX_CHARS = 3 * REFLECTION_MAX_TOKENS


class RememberIn(StrictBody, Schema):
    """A lesson to remember without a trajectory; it becomes a pending Orb like an episode's."""

    text: str = Field(min_length=1, max_length=REMEMBERED_MAX_CHARS,
                      description="The lesson, in the words an agent should read.")
    context: BoundedContext = Field(default_factory=dict, description="Metadata embedded with it, e.g. a SKU; at "
                                    "most ORBS_CONTEXT_MAX_BYTES (16 KB) as JSON. Retrieval filters match its keys.")
    customer_key: str = Field(default="", max_length=200, description="Required by a per-customer bank.")
    domain: str = Field(default="", max_length=64)
    source_label: str = Field(default="", max_length=200, description="Where it came from, e.g. a support ticket.")

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("the lesson to remember is empty")
        return text.strip()


class HitOut(Schema):
    rank: int
    score: float
    injected: bool = Field(description="In the prompt block; false: cut by the bank's token budget")
    orb: OrbOut


class RetrieveOut(Schema):
    retrieval_id: int
    rewritten_query: str
    rewriter_backend: str
    hits: list[HitOut]
    injected: int = Field(description="How many of the hits reached the prompt block")
    prompt_block: str


class RetrievalOutcomeIn(StrictBody, Schema):
    success: bool
    reward: float | None = Field(default=None, allow_inf_nan=False)
    episode_ref: str = Field(default="", max_length=200)


class VersionIn(StrictBody, Schema):
    expected_version: int = Field(ge=1, description="The version you saw; a stale one gets 409 and changes nothing.")


# Approve and reject take one shape, {"expected_version", "note"}; a rejection's note is its reason and
# may not be blank. `reason` is still read as the note, for callers written before the two were one.
NOTE_DESCRIPTION = "Why: kept on the Orb's history. Optional to approve; required (not blank) to reject."


def _note(*, default=None):
    extra = {} if default is None else {"default": default}
    return Field(**extra, max_length=2000, validation_alias=AliasChoices("note", "reason"),
                 description=NOTE_DESCRIPTION)


def _reason_given(note: str, what: str) -> str:
    if not note.strip():
        raise ValueError(f"a note (the reason) is required to reject {what}")
    return note.strip()


class ApproveIn(VersionIn):
    note: str = _note(default="")


class RejectIn(VersionIn):
    note: str = _note()

    @field_validator("note")
    @classmethod
    def _not_blank(cls, note: str) -> str:
        return _reason_given(note, "an Orb")


class EditIn(VersionIn):
    obs: str | None = Field(default=None, min_length=1, max_length=20000)
    emotion: EmotionLabel | None = None
    outcome: str | None = Field(default=None, min_length=1, max_length=20000)
    context: BoundedContext | None = None
    note: str = Field(default="", max_length=2000)
    approve: bool = Field(default=True, description="Approve the new revision (else it waits as pending).")

    @model_validator(mode="after")
    def _changes_something(self):
        if all(value is None for value in (self.obs, self.emotion, self.outcome, self.context)):
            raise ValueError("give at least one of obs, emotion, outcome, context to edit")
        return self


class MergeIn(VersionIn):
    into_id: int = Field(description="The Orb to keep (its stable id or any revision's id); this one is marked "
                                     "superseded and merged into it.")
    note: str = Field(default="", max_length=2000)


class BulkItemIn(StrictBody, Schema):
    id: int
    expected_version: int = Field(ge=1)


class BulkReviewIn(StrictBody, Schema):
    action: Literal["approve", "reject"]
    items: list[BulkItemIn] = Field(min_length=1, max_length=500)
    note: str = _note(default="")

    @model_validator(mode="after")
    def _reason_to_reject(self):
        if self.action == "reject":
            self.note = _reason_given(self.note, "Orbs")
        return self


class BulkReviewOut(Schema):
    action: str
    orbs: list[OrbOut]


class ConflictOut(Schema):
    detail: str
    orb_id: int | None = None
    current_version: int | None = None
    current_status: str | None = None



class BankIn(StrictBody, Schema):
    name: str = Field(min_length=1, max_length=100)
    description: str = Field(default="", max_length=2000)
    retrieval_k: int = Field(default=5, ge=1, le=50)
    approved_only: bool = True
    min_score: float = Field(default=0.0, ge=-1.0, le=1.0)
    near_duplicate_threshold: float = Field(default=0.95, ge=0.0, le=1.0)
    auto_approve: Literal["never", "always", "by_rule"] = "never"
    auto_approve_min_reward: float = Field(default=1.0, allow_inf_nan=False)
    prompt_token_budget: int | None = Field(
        default=None, ge=50, le=MAX_PROMPT_TOKEN_BUDGET,
        description="Empty: enough for retrieval_k Orbs of the longest reflection (orbs.budget)")
    customer_scope: Literal["shared", "per_customer"] = Field(
        default="shared", description="per_customer: an Orb belongs to its customer (its id and duplicate checks "
                                      "include customer_key) and every retrieval names its customer")
    cross_customer_retrieval: bool = Field(
        default=False, description="Per-customer banks only: a retrieval without customer_key reads every "
                                   "customer's Orbs (marked in the retrieval log)")

    @model_validator(mode="after")
    def _cross_customer_needs_per_customer(self):
        if self.cross_customer_retrieval and self.customer_scope != "per_customer":
            raise ValueError("cross_customer_retrieval: applies to per_customer banks only; a shared bank always "
                             "reads across customers")
        return self


class BankOut(Schema):
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
    customer_scope: str
    cross_customer_retrieval: bool
    embedding_model: str
    created_at: datetime
    archived_at: datetime | None = Field(description="When the bank was deleted (archived); null while in use")


class BankDMRMStatsOut(Schema):
    target_experiences: int
    source_experiences: int
    flagged_experiences: int
    trajectories: int
    successful_trajectories: int
    source_memories: int


class BankStatsOut(Schema):
    bank: str
    total: int
    by_status: dict[str, int]
    by_emotion: dict[str, int]
    by_domain: dict[str, int]
    scripted: int
    near_duplicates_open: int
    retrievals: int
    retrievals_last_24h: int
    mean_search_ms: float | None
    episodes_failed: int
    dmrm: BankDMRMStatsOut


class ImportLineError(Schema):
    line: int
    field: str
    message: str


class ImportReportOut(Schema):
    detail: str = Field(description="How many problems the file has, and how many of them are listed")
    ok: bool
    bank: str
    orbs: int
    events: int
    problems: int = Field(description="Problems in all")
    unlisted: int = Field(description="Problems counted but not listed in `errors` (it holds the first ones)")
    errors: list[ImportLineError]


class BankCopyIn(StrictBody, Schema):
    name: str = Field(min_length=1, max_length=100, description="The new bank's name")
class DeleteIn(VersionIn):
    reason: str = Field(min_length=1, max_length=2000, description="Why it is deleted (kept in its history).")

    @field_validator("reason")
    @classmethod
    def _not_blank(cls, reason: str) -> str:
        if not reason.strip():
            raise ValueError("a reason is required to delete")
        return reason.strip()


class RestoreIn(VersionIn):
    note: str = Field(default="", max_length=2000)


class BankDeleteIn(StrictBody, Schema):
    reason: str = Field(default="", max_length=2000)


class BankRestoreIn(StrictBody, Schema):
    note: str = Field(default="", max_length=2000)


class ErasureIn(StrictBody, Schema):
    """The customer is named in the body, not the URL, so the key stays out of access logs and of
    the stored idempotent request."""

    customer_key: str = Field(min_length=1, max_length=200)
    reason: str = Field(default="", max_length=2000, description="Why, e.g. the request's ticket number.")
    every_bank: bool = Field(default=False, description="Also erase the customer in every other bank that holds "
                                                        "them (copies of this bank, evaluation runs' banks).")

    @field_validator("customer_key")
    @classmethod
    def _not_blank(cls, key: str) -> str:
        if not key.strip():
            raise ValueError("name the customer whose data is to be erased")
        return key.strip()


class BankEventOut(Schema):
    id: int
    bank: str = Field(description="The bank's name when the event was recorded")
    action: str
    actor: str
    note: str
    customer_key_sha256: str
    counts: dict[str, int]
    at: datetime

    @staticmethod
    def resolve_bank(event) -> str:
        return event.bank_name

    @staticmethod
    def resolve_actor(event) -> str:
        return event.actor_name


class HistoryProblemOut(Schema):
    sequence: int | None = Field(description="The entry that breaks; empty for a row that no entry holds")
    kind: str = Field(description="orb_revision, review_event, source_memory, or a marker (imported, erasure)")
    object_id: int | None
    reason: str = Field(description="entry_missing, link_broken, entry_changed, content_changed, row_missing, "
                                    "unchained_row or unknown_kind")
    message: str


class HistoryCheckOut(Schema):
    ok: bool
    entries: int = Field(description="Entries verified (all of them when ok; those before the problem otherwise)")
    head: str = Field(description="Hash of the last verified entry: record it elsewhere to pin the history")
    problem: HistoryProblemOut | None


class BankHistoryOut(Schema):
    entries: int
    check: HistoryCheckOut | None = Field(description="Made now for a short chain, else the latest check job's "
                                                      "result (empty until one finished)")
    checked_at: datetime | None
    job: JobOut | None = Field(description="The latest check job of a long chain; poll its status_url")


class ProposalIn(StrictBody, Schema):
    """An agent's request to correct or forget an Orb; a reviewer decides it."""

    kind: Literal["edit", "delete"] = Field(description="edit: new text for the Orb; delete: forget it.")
    reason: str = Field(min_length=1, max_length=2000, description="Why; shown to the reviewer and kept in history.")
    obs: str | None = Field(default=None, min_length=1, max_length=20000, description="Edits: new obs.")
    emotion: EmotionLabel | None = Field(default=None, description="Edits: new emotion.")
    outcome: str | None = Field(default=None, min_length=1, max_length=20000, description="Edits: new outcome.")

    @field_validator("reason")
    @classmethod
    def _reason_not_blank(cls, reason: str) -> str:
        if not reason.strip():
            raise ValueError("a reason is required")
        return reason.strip()

    @model_validator(mode="after")
    def _texts_fit_kind(self):
        texts = [self.obs, self.emotion, self.outcome]
        if self.kind == "edit" and all(text is None for text in texts):
            raise ValueError("an edit proposal needs at least one of obs, emotion, outcome")
        if self.kind == "delete" and any(text is not None for text in texts):
            raise ValueError("a delete proposal carries no obs, emotion or outcome")
        return self


class ProposalOut(Schema):
    id: int
    orb_id: int = Field(description="The Orb's stable id.")
    revision: int = Field(description="The Orb's revision the proposal was made against.")
    bank: str
    kind: str
    obs: str
    emotion: str
    outcome: str
    reason: str
    status: str
    proposed_by: str
    api_key_name: str
    reviewer: str | None
    reviewed_at: datetime | None
    review_note: str
    created_at: datetime

    @staticmethod
    def resolve_orb_id(proposal) -> int:
        return proposal.orb.lineage_id

    @staticmethod
    def resolve_revision(proposal) -> int:
        return proposal.orb.revision

    @staticmethod
    def resolve_bank(proposal) -> str:
        return proposal.orb.bank.slug

    @staticmethod
    def resolve_proposed_by(proposal) -> str:
        return proposal.proposed_by_name

    @staticmethod
    def resolve_reviewer(proposal) -> str | None:
        return proposal.reviewer.get_username() if proposal.reviewer else None


class ProposalFilters(Schema):
    status: Literal["pending", "accepted", "rejected"] | None = None
    bank: str | None = Field(default=None, description="A bank's slug.")
    orb: int | None = Field(default=None, description="An Orb's stable id.")
