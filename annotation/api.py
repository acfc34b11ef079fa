"""Annotation JSON API. Operators: campaigns, item import, progress, results.
Annotators: next assignment, the blind pair, judgments. Annotator responses
carry only the opaque token and sides A/B, never which side is human."""
from datetime import datetime
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.shortcuts import get_object_or_404
from ninja import File, Router, Schema
from ninja.files import UploadedFile
from ninja.responses import Status

from annotation import services
from annotation.models import Assignment, Campaign, default_criteria
from memweb.auth import api_auth
from memweb.roles import Role

router = Router(tags=["annotation"])
OPERATORS = api_auth(Role.OPERATOR)
ANNOTATORS = api_auth(Role.ANNOTATOR)


class ErrorOut(Schema):
    detail: str


class FieldErrorOut(Schema):
    detail: str
    field: str


class CriterionSchema(Schema):
    key: str
    label: str
    definition: str = ""


class CampaignIn(Schema):
    name: str
    instructions: str = ""
    criteria: list[CriterionSchema] | None = None
    annotators_per_item: int = 3
    allow_ties: bool = False
    deadline: datetime | None = None
    assignment_timeout_minutes: int = 30


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


class ItemsIn(Schema):
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


class JudgmentIn(Schema):
    choices: dict[str, str]
    comment: str = ""
    time_spent_ms: int = 0


class JudgmentOut(Schema):
    token: UUID
    choices: dict[str, str]
    comment: str
    created: bool


# --- operators ---
@router.get("/campaigns", response=list[CampaignOut], auth=OPERATORS)
def campaign_list(request, status: str = ""):
    campaigns = Campaign.objects.all()
    return campaigns.filter(status=status) if status else campaigns


@router.post("/campaigns", response={201: CampaignOut, 409: ErrorOut, 422: FieldErrorOut}, auth=OPERATORS)
def campaign_create(request, payload: CampaignIn):
    fields = payload.model_dump()
    fields["criteria"] = fields["criteria"] or default_criteria()
    campaign = Campaign(created_by=request.auth, **fields)
    problem = _campaign_problem(campaign)
    if problem:
        return Status(422, {"detail": problem[1], "field": problem[0]})
    try:
        with transaction.atomic():
            campaign.save()
    except IntegrityError:
        return Status(409, {"detail": f"a campaign named {campaign.name!r} exists"})
    return Status(201, campaign)


def _campaign_problem(campaign: Campaign) -> tuple[str, str] | None:
    try:
        campaign.full_clean(validate_unique=False)
    except ValidationError as error:
        name, messages = next(iter(error.message_dict.items()))
        return name, " ".join(messages)
    problem = services.criteria_problem(campaign.criteria)
    return ("criteria", problem) if problem else None


@router.get("/campaigns/{campaign_id}", response=CampaignOut, auth=OPERATORS)
def campaign_detail(request, campaign_id: int):
    return get_object_or_404(Campaign, pk=campaign_id)


class StatusIn(Schema):
    status: str


@router.post("/campaigns/{campaign_id}/status", response={200: CampaignOut, 409: ErrorOut}, auth=OPERATORS)
def campaign_status(request, campaign_id: int, payload: StatusIn):
    """Open, close or reopen a campaign (draft -> open -> closed -> open)."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    try:
        return Status(200, services.campaign_status_change(campaign=campaign, status=payload.status))
    except services.CampaignStateError as error:
        return Status(409, {"detail": str(error)})


@router.post("/campaigns/{campaign_id}/items", response={201: ItemsImportReportOut, 422: ImportRejectedOut},
             auth=OPERATORS)
def items_add(request, campaign_id: int, payload: ItemsIn):
    """Import items from JSON objects (the upload's fields). All-or-nothing."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    return _import_answer(services.items_import(campaign=campaign, records=list(enumerate(payload.items, start=1))))


@router.post("/campaigns/{campaign_id}/upload", response={201: ItemsImportReportOut, 422: ImportRejectedOut},
             auth=OPERATORS)
def items_upload(request, campaign_id: int, file: File[UploadedFile]):
    """Import a .jsonl or .csv file. All-or-nothing."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    records, problems = services.upload_read(upload=file)
    return _import_answer(services.items_import(campaign=campaign, records=records, problems=problems))


def _import_answer(report: services.ImportReport):
    if report.ok:
        return Status(201, report.as_dict())
    detail = f"{len(report.problems)} problem(s) found; nothing was stored"
    return Status(422, {"detail": detail, "report": report.as_dict()})


@router.get("/campaigns/{campaign_id}/progress", response=ProgressOut, auth=OPERATORS)
def campaign_progress(request, campaign_id: int):
    return services.campaign_progress(campaign=get_object_or_404(Campaign, pk=campaign_id))


@router.get("/campaigns/{campaign_id}/results", response=dict, auth=OPERATORS)
def campaign_results(request, campaign_id: int):
    """Kappa and win rates per criterion, breakdowns, annotators, sampling table."""
    return services.campaign_results(campaign=get_object_or_404(Campaign, pk=campaign_id))


# --- annotators ---
@router.post("/campaigns/{campaign_id}/next", response={200: PairOut, 204: None}, auth=ANNOTATORS)
def assignment_next(request, campaign_id: int):
    """Your open assignment, or a new one; 204 when nothing is left for you."""
    campaign = get_object_or_404(Campaign, pk=campaign_id, status=Campaign.Status.OPEN)
    assignment = services.assignment_next(campaign=campaign, annotator=request.auth)
    if assignment is None:
        return Status(204, None)
    return Status(200, pair_payload(assignment))


@router.get("/assignments/{token}", response=PairOut, auth=ANNOTATORS)
def assignment_detail(request, token: UUID):
    assignment = _own_assignment(request, token)
    services.assignment_open(assignment=assignment)
    return pair_payload(assignment)


@router.post("/assignments/{token}/judgment", response={200: JudgmentOut, 201: JudgmentOut, 422: FieldErrorOut},
             auth=ANNOTATORS)
def judgment_create(request, token: UUID, payload: JudgmentIn):
    """Idempotent: a repeated submit answers 200 with the judgment stored first."""
    _own_assignment(request, token)
    try:
        submitted = services.judgment_submit(token=token, annotator=request.auth, choices=payload.choices,
                                             comment=payload.comment, time_spent_ms=payload.time_spent_ms)
    except services.SubmitError as error:
        return Status(422, {"detail": error.reason, "field": error.field})
    judgment = submitted.judgment
    answer = {"token": token, "choices": judgment.choices, "comment": judgment.comment, "created": submitted.created}
    return Status(201 if submitted.created else 200, answer)


def _own_assignment(request, token: UUID) -> Assignment:
    """Another annotator's token is a 404, the same as a token that never existed."""
    return get_object_or_404(Assignment.objects.select_related("item", "campaign"), token=token,
                             annotator=request.auth)


def pair_payload(assignment: Assignment) -> dict:
    """What an annotator may know about an assignment: sides A/B only."""
    item, campaign = assignment.item, assignment.campaign
    judgment = getattr(assignment, "judgment", None)
    return {
        "token": assignment.token, "campaign_id": campaign.pk, "campaign_name": campaign.name,
        "instructions": campaign.instructions, "criteria": campaign.criteria,
        "options": list(services.side_options(campaign)), "conversation": item.conversation,
        "task_description": item.task_description, "evaluation_context": item.evaluation_context,
        "feedback_a": assignment.feedback_for_side("A"), "feedback_b": assignment.feedback_for_side("B"),
        "judged": judgment is not None, "your_choices": judgment.choices if judgment else None,
    }
