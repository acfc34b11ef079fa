"""The runs JSON API (mounted at /api/evaluation/runs), for operators (session or API key).

Errors are `{"detail": ...}`: 404 unknown run; 409 an action that does not apply to the run's
status, or runs that may not be compared (also runs scored against different task or reward versions,
unless `allow_stale=true` or `scores=regraded` makes them alike); 422 invalid input, as a list of
`{"loc": [...], "msg": ...}` naming each field (the shape django-ninja uses for its own validation errors).
"""
from datetime import datetime
from typing import Any, Literal

from django.http import HttpResponse
from django.urls import reverse
from ninja import Body, Query, Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status
from pydantic import Field

from evaluation.runs.models import EvaluationRun, FeedbackCurve
from evaluation.runs.services import (
    DEFAULT_SORT,
    FLIP_SORTS,
    MAX_TRIALS,
    CurveLaunchError,
    RegradeRefused,
    RunActionError,
    RunImportError,
    RunLaunchError,
    RunsNotComparable,
    RunSpec,
    StudyError,
    curve_launch,
    episodes_to_campaign_start,
    run_cancel,
    run_export_csv,
    run_export_json,
    run_import,
    run_launch,
    run_pins_out,
    run_preparation_job,
    run_regrade_current,
    run_regrade_latest,
    run_regrade_start,
    run_resume,
    run_retry_errors,
    run_staleness,
    runs_compare,
    runs_filtered,
    runs_staleness_annotate,
    study_selection,
)
from memweb.auth import api_auth
from memweb.job_api import JobOut, job_accepted
from memweb.models import ApiKey
from memweb.roles import Role
from memweb.schemas import StrictBody
from memweb.workspaces import in_workspace

router = Router(tags=["evaluation runs"])
RUNS_READ = api_auth(Role.OPERATOR, scope=ApiKey.Scope.RUNS_READ)
RUNS_LAUNCH = api_auth(Role.OPERATOR, scope=ApiKey.Scope.RUNS_LAUNCH)


class RunErrorOut(Schema):
    detail: Any


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
    agent_config: dict
    customer_config: dict
    memory_k: int
    memory_approved_only: bool
    memory_same_customer_only: bool
    memory_per_turn: bool
    reflection_style: str
    reflection_input: str
    preset: str
    withhold_probability: float
    dmrm_config: dict
    seed: int
    max_turns: int
    concurrency: int
    review_gate: str
    feedback_enabled: bool
    feedback_memory: str
    feedback_rounds: int
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


def _summary(run: EvaluationRun) -> dict:
    out = {name: getattr(run, name) for name in RunSummaryOut.model_fields if name not in ("id", "bank", "url")}
    return {**out, "id": run.pk, "bank": run.bank.slug if run.bank else None, "url": run.get_absolute_url()}


def _regrade(run: EvaluationRun) -> dict | None:
    regrade = run_regrade_latest(run=run)
    if regrade is None:
        return None
    fields = ("id", "created_at", "episodes", "changed", "task_versions", "reward_version", "metrics", "metrics_trials")
    return {**{name: getattr(regrade, name) for name in fields}, "current": run_regrade_current(run=run) == regrade}


_DERIVED = ("progress", "pins", "staleness", "regrade", "preparation_url")


def _detail(run: EvaluationRun, request) -> dict:
    extra = {name: getattr(run, name) for name in RunOut.model_fields
             if name not in RunSummaryOut.model_fields and name not in _DERIVED}
    progress = [{name: getattr(t, name) for name in TrialOut.model_fields} for t in run.trial_rows.order_by("number")]
    preparation = run_preparation_job(run=run)
    return {**_summary(run), **extra, "progress": progress, "pins": run_pins_out(run=run),
            "staleness": run_staleness(run=run), "regrade": _regrade(run),
            "preparation_url": request.build_absolute_uri(reverse("api:job_status", kwargs={"job_id": preparation.pk}))
            if preparation else None}


def _run(request, run_id: int) -> EvaluationRun:
    run = runs_staleness_annotate(in_workspace(EvaluationRun.objects.select_related("bank"), request.workspace)
                                  ).filter(pk=run_id).first()
    if run is None:
        raise HttpError(404, f"No evaluation run #{run_id}")
    return run


def _problems(problems: list[tuple[str, str]], where: tuple[str, ...]) -> dict:
    return {"detail": [{"loc": [*where, *field.split(".")], "msg": message} for field, message in problems]}


@router.post("/", response={201: RunOut, 202: RunOut, 422: RunErrorOut}, auth=RUNS_LAUNCH)
def run_create(request, response: HttpResponse, payload: RunSpec):
    """Launch a run: validated, written in one transaction and queued for the workers (201). A run that
    starts from a copy of a bank (`bank_source`) answers 202, `preparing`: a background job copies the
    bank, then queues the run; the Location header is that job's status URL (also `preparation_url`)."""
    try:
        run = run_launch(spec=payload, user=request.auth, workspace=request.workspace)
    except RunLaunchError as exc:
        return Status(422, _problems(exc.problems, ("body", "payload")))
    detail = _detail(_run(request, run.pk), request)
    if run.status == EvaluationRun.Status.PREPARING:
        response["Location"] = detail["preparation_url"]
        return Status(202, detail)
    return Status(201, detail)


@router.get("/", response=RunListOut, auth=RUNS_READ)
def run_list(request, filters: Query[RunFilters]):
    runs = in_workspace(runs_filtered(status=filters.status, memory_mode=filters.memory_mode,
                                      agent_backend=filters.agent_backend, q=filters.q), request.workspace)
    return {"count": runs.count(), "items": [_summary(r) for r in runs[filters.offset:filters.offset + filters.limit]]}


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


class RunPairOut(Schema):
    run: int
    baseline: int
    success: DifferenceOut
    verdict: str
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
    pairs: list[RunPairOut]


class CompareQuery(Schema):
    runs: list[int] = Field(min_length=2, max_length=6, description="Run ids; the oldest is the baseline")
    sort: Literal[tuple(FLIP_SORTS)] = DEFAULT_SORT
    scores: Literal["original", "regraded"] = Field(
        default="original", description="regraded: a stale run's current re-grade instead of its original scores")
    allow_stale: bool = Field(default=False, description="Compare runs scored against different task or reward "
                                                         "versions anyway (refused with 409 otherwise)")


def _flip(row: dict) -> dict:
    sides = {side: {**row[side], "episodes": [cell[1] for cell in row[side]["cells"]]} for side in ("a", "b")}
    return {**row, **sides}


def _pair(pair: dict) -> dict:
    return {**pair, "run": pair["run"].pk, "baseline": pair["baseline"].pk, "flips": [_flip(r) for r in pair["flips"]]}


# Declared before /{run_id}, whose pattern would otherwise take the path.
@router.get("/compare", response={200: CompareOut, 404: RunErrorOut, 409: RunErrorOut, 422: RunErrorOut},
            auth=RUNS_READ)
def run_compare(request, query: Query[CompareQuery]):
    """Each run against the oldest (the baseline): paired intervals, p-values, verdict and the flip table.
    409 when the runs may not be compared (different tasks, agents, customers; no finished trial), and
    when their scores answer to different task or reward versions (a stale run beside a fresh one):
    the detail names the stale runs and what changed; `scores=regraded` compares their re-grades,
    `allow_stale=true` compares anyway (`stale` still lists them)."""
    runs = [_run(request, run_id) for run_id in sorted(set(query.runs))]
    if len(runs) < 2:
        raise HttpError(422, "compare needs two different runs")
    try:
        comparison = runs_compare(runs=runs, sort=query.sort, scores=query.scores)
    except RunsNotComparable as exc:
        raise HttpError(409, f"These runs cannot be compared: {exc}") from None
    scoring = comparison["scoring"]
    if scoring["mixed"] and not query.allow_stale:
        raise HttpError(409, _stale_refusal(scoring))
    return {"runs": [run.pk for run in runs], "baseline": runs[0].pk, "sort": comparison["sort"],
            "scores": scoring["scores"], "mixed": scoring["mixed"], "stale": scoring["stale"],
            "pairs": [_pair(pair) for pair in comparison["pairs"]]}


def _stale_refusal(scoring: dict) -> str:
    named = "; ".join(f"run #{entry['run']} ({entry['changes']})" for entry in scoring["stale"])
    remedy = "Compare their re-grades with scores=regraded" if scoring["regraded_available"] else \
        "Re-grade them (POST /api/evaluation/runs/{id}/regrade)"
    return (f"These runs were scored against different versions of their tasks or reward: stale {named}. "
            f"{remedy}, or compare the original scores anyway with allow_stale=true.")


@router.post("/import", response={201: RunOut, 422: RunErrorOut}, auth=RUNS_LAUNCH)
def run_import_op(request, payload: dict = Body(...)):
    """Import a run exported as JSON (here or elsewhere); all or nothing, marked imported."""
    try:
        run = run_import(data=payload, user=request.auth, workspace=request.workspace)
    except RunImportError as exc:
        return Status(422, _problems(exc.problems, ("body",)))
    return Status(201, _detail(_run(request, run.pk), request))


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


def _curve_out(curve: FeedbackCurve) -> dict:
    fields = ("status", "status_message", "scripted", "batch_size", "batches", "progress_percent", "points",
              "created_at", "finished_at")
    return {**{name: getattr(curve, name) for name in fields}, "id": curve.pk, "run": curve.run_id,
            "bank": curve.bank.slug if curve.bank else None, "url": curve.get_absolute_url(),
            "status_url": f"/api/evaluation/runs/feedback-curves/{curve.pk}"}


# Declared before /{run_id}.
@router.get("/feedback-curves/{curve_id}", response={200: FeedbackCurveOut, 404: RunErrorOut}, auth=RUNS_READ)
def feedback_curve_get(request, curve_id: int):
    """An off-policy learning curve: its status and the points measured so far."""
    curve = in_workspace(FeedbackCurve.objects.select_related("bank"), request.workspace).filter(pk=curve_id).first()
    if curve is None:
        raise HttpError(404, f"No learning curve #{curve_id}")
    return _curve_out(curve)


@router.post("/{run_id}/feedback-curves",
             response={201: FeedbackCurveOut, 404: RunErrorOut, 409: RunErrorOut, 422: RunErrorOut}, auth=RUNS_LAUNCH)
def feedback_curve_create(request, run_id: int, payload: FeedbackCurveIn):
    """Off-policy feedback: write the finished run's feedback logs into a fresh bank in batches and
    play its tasks after each batch (Celery work; poll `status_url`). 409 when the run is not a
    completed feedback run."""
    run = _run(request, run_id)
    try:
        curve = curve_launch(run=run, batch_size=payload.batch_size, user=request.auth)
    except CurveLaunchError as exc:
        if any(field == "run_id" for field, _ in exc.problems):
            raise HttpError(409, str(exc)) from None
        return Status(422, _problems(exc.problems, ("body", "payload")))
    return Status(201, _curve_out(curve))


@router.get("/{run_id}", response={200: RunOut, 404: RunErrorOut}, auth=RUNS_READ)
def run_get(request, run_id: int):
    """A run with its per-trial progress and the metrics of its finished trials."""
    return _detail(_run(request, run_id), request)


def _act(request, run_id: int, act) -> dict:
    run = _run(request, run_id)
    try:
        act(run)
    except RunActionError as exc:
        raise HttpError(409, str(exc)) from None
    return _detail(_run(request, run_id), request)


@router.post("/{run_id}/cancel", response={200: RunOut, 404: RunErrorOut, 409: RunErrorOut}, auth=RUNS_LAUNCH)
def run_cancel_op(request, run_id: int):
    return _act(request, run_id, lambda run: run_cancel(run=run, user=request.auth))


@router.post("/{run_id}/resume", response={200: RunOut, 404: RunErrorOut, 409: RunErrorOut}, auth=RUNS_LAUNCH)
def run_resume_op(request, run_id: int):
    """Continue a cancelled or failed run, or re-check a waiting one."""
    return _act(request, run_id, lambda run: run_resume(run=run))


@router.post("/{run_id}/retry", response={200: RunOut, 404: RunErrorOut, 409: RunErrorOut}, auth=RUNS_LAUNCH)
def run_retry_op(request, run_id: int):
    """Play the episodes that hit an infrastructure error again."""
    return _act(request, run_id, lambda run: run_retry_errors(run=run))


@router.post("/{run_id}/regrade", response={202: JobOut, 404: RunErrorOut, 409: RunErrorOut}, auth=RUNS_LAUNCH)
def run_regrade_op(request, response: HttpResponse, run_id: int):
    """Re-grade a stale run: a background job scores its stored trajectories again against the current
    gold (nothing is played again; the memory it wrote is not re-played) and stores the new scores beside
    the originals. 202 with the job, whose `status_url` (also the Location header) says when it is done;
    the same job while one is queued or running; 409 when the run is not stale, still active, imported
    or already re-graded against the current versions."""
    try:
        job = run_regrade_start(run=_run(request, run_id), user=request.auth)
    except RegradeRefused as exc:
        raise HttpError(409, str(exc)) from None
    return job_accepted(request, response, job)


class CampaignAddIn(StrictBody):
    which: Literal["failing", "all", "trial"] = Field(default="failing", description="Which finished episodes")
    trial: int | None = Field(default=None, ge=1, le=MAX_TRIALS, description="The trial, with which=trial")
    campaign_id: int | None = Field(default=None, ge=1, le=2**63 - 1,
                                    description="An open or draft campaign of this workspace")
    new_campaign: str = Field(default="", max_length=200, description="Or the name of a new draft campaign")


@router.post("/{run_id}/campaign", response={202: JobOut, 404: RunErrorOut, 422: RunErrorOut}, auth=RUNS_LAUNCH)
def run_to_campaign(request, response: HttpResponse, run_id: int, payload: CampaignAddIn):
    """Add the run's failing, all or one trial's episodes to an annotation campaign, any number of them,
    as a background job: 202 with the job, whose `status_url` (also the Location header) gives its
    progress, then the counts added, already there and without simulated feedback. 422 when the
    selection is empty or has no simulated feedback, or the campaign is unknown, closed or taken."""
    run = _run(request, run_id)
    try:
        job = episodes_to_campaign_start(
            selection=study_selection(run=run, which=payload.which, trial=payload.trial),
            campaign_id=payload.campaign_id, new_name=payload.new_campaign, user=request.auth,
            workspace=request.workspace)
    except StudyError as exc:
        return Status(422, _problems([(exc.field, str(exc))], ("body", "payload")))
    return job_accepted(request, response, job)


@router.get("/{run_id}/export", response={200: dict, 404: RunErrorOut}, auth=RUNS_READ)
def run_export(request, run_id: int, format: Literal["json", "csv"] = "json",
               part: Literal["episodes", "metrics"] = "episodes"):
    """The run as JSON (settings, episodes, metrics: what import takes) or CSV (episodes or metrics)."""
    run = _run(request, run_id)
    if format == "json":
        return run_export_json(run=run)
    return HttpResponse(run_export_csv(run=run, part=part), content_type="text/csv; charset=utf-8")
