"""The API schemas of annotation.api: request bodies and answers."""
from datetime import datetime
from uuid import UUID

from ninja import Schema

from annotation.models import Campaign
from memweb.schemas import StrictBody


class FieldErrorOut(Schema):
    detail: str
    field: str


class CriterionSchema(Schema):
    key: str
    label: str
    definition: str = ""


class CampaignIn(StrictBody, Schema):
    name: str
    instructions: str = ""
    criteria: list[CriterionSchema] | None = None
    annotators_per_item: int = 3
    allow_ties: bool = False
    deadline: datetime | None = None
    assignment_timeout_minutes: int = 30
    assignment_strategy: Campaign.Strategy = Campaign.Strategy.LEAST_ANNOTATED
    max_annotators_per_item: int = 5
    attention_rate: float = 0.0
    attention_warn_below: float = 0.8
    attention_exclude_below: float = 0.6
    attention_min_checks: int = 3


class CampaignOut(Schema):
    id: int
    name: str
    status: str
    instructions: str
    criteria: list[CriterionSchema]
    annotators_per_item: int
    allow_ties: bool
    deadline: datetime | None
    assignment_timeout_minutes: int
    assignment_strategy: str
    max_annotators_per_item: int
    attention_rate: float
    attention_warn_below: float
    attention_exclude_below: float
    attention_min_checks: int


class ItemsIn(StrictBody, Schema):
    items: list[dict]


class ProblemOut(Schema):
    row: int
    field: str
    reason: str


class ItemsImportReportOut(Schema):
    ok: bool
    rows: int
    created: int
    needs_feedback: int
    problems: list[ProblemOut]


class ImportRejectedOut(Schema):
    detail: str
    report: ItemsImportReportOut


class ProgressOut(Schema):
    items: int
    items_ready: int
    judgments_done: int
    judgments_needed: int
    judgments_in_progress: int
    feedback_open: int
    feedback_in_progress: int
    feedback_done: int
    percent: int


class MessageOut(Schema):
    role: str
    content: str


class PairOut(Schema):
    token: UUID
    campaign_id: int
    campaign_name: str
    instructions: str
    criteria: list[CriterionSchema]
    options: list[str]
    conversation: list[MessageOut]
    task_description: str
    evaluation_context: str
    feedback_a: str
    feedback_b: str
    judged: bool
    your_choices: dict[str, str] | None


class JudgmentIn(StrictBody, Schema):
    choices: dict[str, str]
    comment: str = ""
    time_spent_ms: int = 0
    score: int | None = None
    action: str = ""


class JudgmentOut(Schema):
    token: UUID
    choices: dict[str, str]
    comment: str
    created: bool


class WriteTaskOut(Schema):
    token: UUID
    campaign_id: int
    campaign_name: str
    instructions: str
    conversation: list[MessageOut]
    task_description: str
    evaluation_context: str
    done: bool
    your_feedback: str | None
    score_range: list[int]
    actions: list[str]


class WrittenFeedbackIn(StrictBody, Schema):
    text: str
    score: int
    action: str
    time_spent_ms: int = 0


class WrittenFeedbackOut(Schema):
    token: UUID
    text: str
    score: int | None
    action: str
    created: bool


class CampaignImportIn(StrictBody, Schema):
    text: str
    name: str = ""


class CampaignImportOut(Schema):
    campaign_id: int
    report: ItemsImportReportOut


class StandingIn(StrictBody, Schema):
    annotator: str
    decision: str


class StandingOut(Schema):
    annotator: str
    standing: str
    set_by_operator: bool
    attention_correct: int
    attention_total: int


class StatusIn(StrictBody, Schema):
    status: str


# --- operations: roster, skip / flag, flags, adjudication ---
class RosterMemberOut(Schema):
    annotator: str
    annotator_id: int
    added_by: str
    added_at: datetime


class RosterOut(Schema):
    open_to_all: bool
    members: list[RosterMemberOut]
    candidates: list[str]
    released: int = 0


class RosterIn(StrictBody, Schema):
    annotators: list[str]


class SkipIn(StrictBody, Schema):
    reason: str = ""


class FlagIn(StrictBody, Schema):
    reason: str = ""
    note: str = ""


class PassedOut(Schema):
    """A skip or flag taken: the item is no longer the caller's."""
    detail: str


class FlagOut(Schema):
    id: int
    item_id: int
    source_ref: str
    stage: str
    reason: str
    reason_label: str
    note: str
    flagged_by: str
    created_at: datetime
    withdrawable: bool
    locked_reason: str


class FlagsOut(Schema):
    flags: list[FlagOut]
    skips: int


class FlagsClearedOut(Schema):
    item_id: int
    cleared: int


class VoteOut(Schema):
    annotator: str
    label: str


class DecisionOut(Schema):
    id: int
    item_id: int
    criterion: str
    label: str
    note: str
    decided_by: str
    decided_at: datetime


class DisputedCriterionOut(Schema):
    key: str
    label: str
    split: bool
    votes: list[VoteOut]
    final: DecisionOut | None


class DisagreementOut(Schema):
    item_id: int
    source_ref: str
    judgments: int
    split: int
    adjudicated: int
    criteria: list[DisputedCriterionOut]


class AdjudicationIn(StrictBody, Schema):
    labels: dict[str, str]
    note: str


class DecisionHistoryOut(DecisionOut):
    source_ref: str
    current: bool
