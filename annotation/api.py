"""Annotation JSON API. Operators: campaigns, item import, progress, results,
lossless export/import, annotator standing. Annotators: the feedback-writing
queue (next task, submit), next assignment, the blind pair, judgments.
Annotator responses carry only opaque tokens and sides A/B, never which side
is human nor anything about the simulated user. The roster, skip / flag, the
flag list and adjudication are in annotation.operations_api, mounted here."""
from uuid import UUID

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from ninja import File, Router
from ninja.files import UploadedFile
from ninja.responses import Status

from annotation import services
from annotation.models import Assignment, Campaign, FeedbackTask, Participant, Reaction, default_criteria
from annotation.operations_api import router as operations_router
from annotation.schemas import (
    CampaignImportIn,
    CampaignImportOut,
    CampaignIn,
    CampaignOut,
    FieldErrorOut,
    ImportRejectedOut,
    ItemsImportReportOut,
    ItemsIn,
    JudgmentIn,
    JudgmentOut,
    PairOut,
    ProgressOut,
    StandingIn,
    StandingOut,
    StatusIn,
    WriteTaskOut,
    WrittenFeedbackIn,
    WrittenFeedbackOut,
)
from annotation.vocabulary import AnnotationScope
from memweb.auth import api_auth
from memweb.downloads import attachment
from memweb.roles import Role
from memweb.schemas import ErrorOut

router = Router(tags=["annotation"])
OPERATORS = api_auth(Role.OPERATOR, scope=AnnotationScope.ANNOTATION)
ANNOTATORS = api_auth(Role.ANNOTATOR, scope=AnnotationScope.ANNOTATION)
router.add_router("", operations_router)  # roster, skip / flag, flags, adjudication


# --- operators ---
@router.get("/campaigns", response=list[CampaignOut], auth=OPERATORS)
def campaign_list(request, status: str = ""):
    campaigns = Campaign.objects.all()
    return campaigns.filter(status=status) if status else campaigns


@router.post("/campaigns", response={201: CampaignOut, 409: ErrorOut, 422: FieldErrorOut}, auth=OPERATORS)
def campaign_create(request, payload: CampaignIn):
    fields = payload.model_dump()
    fields["criteria"] = fields["criteria"] or default_criteria()
    campaign = Campaign(created_by=request.auth, workspace=request.workspace, **fields)
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


@router.get("/campaigns/{campaign_id}/export", auth=OPERATORS)
def campaign_export(request, campaign_id: int):
    """Everything about the campaign as JSON lines, for campaign import here or on another memweb."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    response = HttpResponse(services.campaign_export_render(campaign=campaign),
                            content_type="application/x-ndjson; charset=utf-8")
    return attachment(response, filename=f"campaign-{campaign.pk}.jsonl")


@router.post("/campaign-imports", response={201: CampaignImportOut, 422: ImportRejectedOut}, auth=OPERATORS)
def campaign_import(request, payload: CampaignImportIn):
    """Re-create an exported campaign (under `name` if given). All-or-nothing, problems reported by line."""
    report, campaign = services.campaign_import(text=payload.text, name=payload.name.strip(),
                                                workspace=request.workspace)
    if campaign is None:
        detail = f"{len(report.problems)} problem(s) found; nothing was stored"
        return Status(422, {"detail": detail, "report": report.as_dict()})
    return Status(201, {"campaign_id": campaign.pk, "report": report.as_dict()})


@router.post("/campaigns/{campaign_id}/standing", response={200: StandingOut, 404: ErrorOut, 422: FieldErrorOut},
             auth=OPERATORS)
def participant_standing(request, campaign_id: int, payload: StandingIn):
    """Exclude an annotator's judgments from the results, reinstate them, or return to the automatic rule."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    annotator = get_user_model().objects.filter(username=payload.annotator).first()
    if annotator is None or not Assignment.objects.filter(campaign=campaign, annotator=annotator).exists():
        return Status(404, {"detail": f"{payload.annotator!r} has no assignment in this campaign"})
    if payload.decision not in services.OPERATOR_DECISIONS:
        return Status(422, {"detail": f"choose one of {', '.join(services.OPERATOR_DECISIONS)}", "field": "decision"})
    participant = services.participant_decide(campaign=campaign, annotator=annotator, decision=payload.decision)
    return Status(200, standing_payload(participant))


def standing_payload(participant: Participant) -> dict:
    return {"annotator": participant.annotator.get_username(), "standing": participant.standing,
            "set_by_operator": participant.set_by_operator, "attention_correct": participant.attention_correct,
            "attention_total": participant.attention_total}


# --- annotators: the feedback-writing queue ---
@router.post("/campaigns/{campaign_id}/write-next", response={200: WriteTaskOut, 204: None}, auth=ANNOTATORS)
def feedback_task_next(request, campaign_id: int):
    """Your feedback task in hand, or the next conversation that needs feedback; 204 when none is left."""
    campaign = get_object_or_404(Campaign, pk=campaign_id, status=Campaign.Status.OPEN)
    task = services.feedback_task_next(campaign=campaign, writer=request.auth)
    if task is None:
        return Status(204, None)
    return Status(200, write_payload(task))


@router.get("/feedback-tasks/{token}", response=WriteTaskOut, auth=ANNOTATORS)
def feedback_task_detail(request, token: UUID):
    return write_payload(_own_task(request, token))


@router.post("/feedback-tasks/{token}/feedback", response={200: WrittenFeedbackOut, 201: WrittenFeedbackOut, 422: FieldErrorOut},
             auth=ANNOTATORS)
def feedback_create(request, token: UUID, payload: WrittenFeedbackIn):
    """Your feedback, satisfaction score (1-10) and like/dislike/none. Idempotent: a repeat answers 200."""
    task = _own_task(request, token)
    repeat = task.status == FeedbackTask.Status.DONE
    try:
        task = services.feedback_task_submit(token=token, writer=request.auth, text=payload.text,
                                             score=payload.score, action=payload.action,
                                             time_spent_ms=payload.time_spent_ms, rating_required=True)
    except services.SubmitError as error:
        return Status(422, {"detail": error.reason, "field": error.field})
    answer = {"token": token, "text": task.text, "score": task.score, "action": task.action, "created": not repeat}
    return Status(200 if repeat else 201, answer)


def _own_task(request, token: UUID) -> FeedbackTask:
    """Someone else's task is a 404, the same as a token that never existed."""
    return get_object_or_404(FeedbackTask.objects.select_related("item", "campaign"), token=token,
                             writer=request.auth)


def write_payload(task: FeedbackTask) -> dict:
    """What a feedback writer sees: the conversation and its context, never the simulated feedback or score."""
    item, campaign = task.item, task.campaign
    done = task.status == FeedbackTask.Status.DONE
    return {
        "token": task.token, "campaign_id": campaign.pk, "campaign_name": campaign.name,
        "instructions": campaign.instructions, "conversation": item.conversation,
        "task_description": item.task_description, "evaluation_context": item.evaluation_context,
        "done": done, "your_feedback": task.text if done else None, "score_range": [1, 10],
        "actions": list(Reaction.values),
    }


# --- annotators: judging ---
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
                                             comment=payload.comment, time_spent_ms=payload.time_spent_ms,
                                             score=payload.score, action=payload.action)
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
