"""The runs JSON API (mounted at /api/evaluation/runs), for operators (session or API key).

Errors are `{"detail": ...}`: 404 unknown run; 409 an action that does not apply to the run's
status, or runs that may not be compared (also runs scored against different task or reward versions,
unless `allow_stale=true` or `scores=regraded` makes them alike); 422 invalid input, as a list of
`{"loc": [...], "msg": ...}` naming each field (the shape django-ninja uses for its own validation errors).
"""
from typing import Literal
from urllib.parse import urlencode

from django.http import HttpResponse
from django.urls import reverse
from ninja import Body, Query, Router
from ninja.errors import HttpError
from ninja.responses import Status

from evaluation.runs.models import EvaluationRun, FeedbackCurve
from evaluation.runs.schemas import (
    CampaignAddIn,
    CompareOut,
    CompareQuery,
    FeedbackCurveIn,
    FeedbackCurveOut,
    RunFilters,
    RunListOut,
    RunOut,
    RunSummaryOut,
    TranscriptsMissingOut,
    TranscriptsOut,
    TranscriptsQuery,
    TrialOut,
)
from evaluation.runs.services import (
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
    run_measured_text,
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
from evaluation.runs.services.spec import SPEC_VERSION, run_spec_stored, spec_as_columns
from evaluation.runs.services.transcripts import (
    TranscriptsNotFound,
    transcript_runs,
    transcripts_compare,
    turn_parts,
)
from evaluation.vocabulary import EvaluationScope
from memweb.auth import api_auth
from memweb.job_api import job_accepted
from memweb.roles import Role
from memweb.schemas import ErrorOut, FieldProblemsOut, JobOut

router = Router(tags=["evaluation runs"])
RUNS_READ = api_auth(Role.OPERATOR, scope=EvaluationScope.RUNS_READ)
RUNS_LAUNCH = api_auth(Role.OPERATOR, scope=EvaluationScope.RUNS_LAUNCH)






















def _summary(run: EvaluationRun) -> dict:
    """The summary's keys from the run's columns, and from its spec those that were columns once."""
    settings = spec_as_columns(run.run_spec)
    out = {name: settings[name] if name in settings else getattr(run, name) for name in RunSummaryOut.model_fields
           if name not in ("id", "bank", "url")}
    return {**out, "id": run.pk, "bank": run.bank.slug if run.bank else None, "url": run.get_absolute_url()}


def _regrade(run: EvaluationRun) -> dict | None:
    regrade = run_regrade_latest(run=run)
    if regrade is None:
        return None
    fields = ("id", "created_at", "episodes", "changed", "task_versions", "reward_version", "metrics", "metrics_trials")
    return {**{name: getattr(regrade, name) for name in fields}, "current": run_regrade_current(run=run) == regrade}


_DERIVED = ("progress", "pins", "staleness", "regrade", "preparation_url", "measured")


def _detail(run: EvaluationRun, request) -> dict:
    settings = {**spec_as_columns(run.run_spec), "spec": run_spec_stored(run.run_spec), "spec_version": SPEC_VERSION}
    extra = {name: settings[name] if name in settings else getattr(run, name) for name in RunOut.model_fields
             if name not in RunSummaryOut.model_fields and name not in _DERIVED}
    progress = [{name: getattr(t, name) for name in TrialOut.model_fields} for t in run.trial_rows.order_by("number")]
    preparation = run_preparation_job(run=run)
    return {**_summary(run), **extra, "progress": progress, "pins": run_pins_out(run=run),
            "staleness": run_staleness(run=run), "regrade": _regrade(run), "measured": run_measured_text(run),
            "preparation_url": request.build_absolute_uri(reverse("api:job_status", kwargs={"job_id": preparation.pk}))
            if preparation else None}


def _run(request, run_id: int) -> EvaluationRun:
    run = runs_staleness_annotate(EvaluationRun.objects.select_related("bank")
                                  ).filter(pk=run_id).first()
    if run is None:
        raise HttpError(404, f"No evaluation run #{run_id}")
    return run


def _problems(problems: list[tuple[str, str]], where: tuple[str, ...]) -> dict:
    return {"detail": [{"loc": [*where, *field.split(".")], "msg": message} for field, message in problems]}


@router.post("/", response={201: RunOut, 202: RunOut, 422: FieldProblemsOut | ErrorOut}, auth=RUNS_LAUNCH)
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
    runs = runs_filtered(status=filters.status, memory_mode=filters.memory_mode,
                         agent_backend=filters.agent_backend, q=filters.q)
    return {"count": runs.count(), "items": [_summary(r) for r in runs[filters.offset:filters.offset + filters.limit]]}




















def _flip(row: dict) -> dict:
    sides = {side: {**row[side], "episodes": [cell[1] for cell in row[side]["cells"]]} for side in ("a", "b")}
    return {**row, **sides}


def _pair(pair: dict) -> dict:
    return {**pair, "run": pair["run"].pk, "baseline": pair["baseline"].pk, "flips": [_flip(r) for r in pair["flips"]]}


# Declared before /{run_id}, whose pattern would otherwise take the path.
@router.get("/compare", response={200: CompareOut, 404: ErrorOut, 409: ErrorOut, 422: FieldProblemsOut | ErrorOut},
            auth=RUNS_READ)
def run_compare(request, query: Query[CompareQuery]):
    """Each run against the oldest (the baseline): paired intervals, p-values, verdict and the flip table.
    409 when the runs may not be compared (a setting other than memory differs: agent, context window,
    customer, turn limit... unless `accept_differences=true`; different tasks, unless `shared_tasks=true`
    and they share some; no finished trial), and
    when their scores answer to different task or reward versions (a stale run beside a fresh one):
    the detail names the stale runs and what changed; `scores=regraded` compares their re-grades,
    `allow_stale=true` compares anyway (`stale` still lists them)."""
    runs = [_run(request, run_id) for run_id in sorted(set(query.runs))]
    if len(runs) < 2:
        raise HttpError(422, "compare needs two different runs")
    try:
        comparison = runs_compare(runs=runs, sort=query.sort, scores=query.scores, shared=query.shared_tasks,
                                  accept_differences=query.accept_differences, view=query.view)
    except RunsNotComparable as exc:
        raise HttpError(409, f"These runs cannot be compared: {exc}{_comparable_remedy(exc)}") from None
    scoring = comparison["scoring"]
    if scoring["mixed"] and not query.allow_stale:
        raise HttpError(409, _stale_refusal(scoring))
    return {"runs": [run.pk for run in runs], "baseline": runs[0].pk, "sort": comparison["sort"],
            "scores": scoring["scores"], "mixed": scoring["mixed"], "stale": scoring["stale"],
            "measured": comparison["measured"], "view": comparison["view"], "views": comparison["views"],
            "pairs": [_pair(pair) for pair in comparison["pairs"]]}


def _comparable_remedy(exc: RunsNotComparable) -> str:
    if exc.shared_tasks:
        return f". Compare them on the {exc.shared_tasks} shared tasks with shared_tasks=true"
    if exc.acceptable:
        return ". Compare them anyway, with the differences named in the verdict, with accept_differences=true"
    return ""


def _stale_refusal(scoring: dict) -> str:
    named = "; ".join(f"run #{entry['run']} ({entry['changes']})" for entry in scoring["stale"])
    remedy = "Compare their re-grades with scores=regraded" if scoring["regraded_available"] else \
        "Re-grade them (POST /api/evaluation/runs/{id}/regrade)"
    return (f"These runs were scored against different versions of their tasks or reward: stale {named}. "
            f"{remedy}, or compare the original scores anyway with allow_stale=true.")


# Declared before /{run_id}, as /compare is.
@router.get("/compare/transcripts", response={200: TranscriptsOut, 404: TranscriptsMissingOut}, auth=RUNS_READ)
def run_compare_transcripts(request, query: Query[TranscriptsQuery]):
    """Runs A and B's transcripts of one task side by side, as the page shows them: each side's turns
    (the customer's words, the memories injected, the tool calls with their results, the agent's
    reply), what each turn differs in, the first difference, the trials either run played and the
    previous and next task both runs played. 404 names what is missing (a run, the task in a run, the
    trial); `shared` then lists the tasks both runs played."""
    try:
        run_a, run_b = transcript_runs(a=query.a, b=query.b)
        compared = transcripts_compare(run_a=run_a, run_b=run_b, task_key=query.task, trial=query.trial or None)
    except TranscriptsNotFound as exc:
        return Status(404, {"detail": str(exc), "shared": exc.shared})
    page = reverse("evaluation:run_compare_transcripts")
    url = f"{page}?{urlencode({'a': run_a.pk, 'b': run_b.pk, 'task': compared['task'], 'trial': compared['trial']})}"
    rows = [_turn_difference(row) for row in compared["rows"]]
    first = compared["first_difference"]
    return Status(200, {**{name: compared[name] for name in ("task", "trial", "trials", "shared", "position",
                                                             "previous", "next")},
                        "a": _transcript_side(compared["a"]), "b": _transcript_side(compared["b"]), "rows": rows,
                        "first_difference": _turn_difference(first) if first else None, "url": url})


def _turn_difference(row: dict) -> dict:
    return {"number": row["number"], "differs": row["differs"]}


def _transcript_side(side: dict) -> dict:
    run, episode = side["run"], side["episode"]
    return {"run": {"id": run.pk, "name": run.name, "status": run.status, "memory_mode": run.memory_mode,
                    "scripted": run.scripted, "agent_uses_gold": run.agent_uses_gold, "url": run.get_absolute_url()},
            "episode": _transcript_episode(episode) if episode else None,
            "turns": [{"number": turn["number"], "events": turn["events"], "memories": turn_parts(turn)["memories"],
                       "retrieval": turn["retrieval"]} for turn in side["turns"]]}


def _transcript_episode(episode) -> dict:
    return {"id": episode.pk, "status": episode.status, "success": episode.success, "reward": episode.reward,
            "turns": episode.turns, "ended_by": episode.ended_by, "url": episode.get_absolute_url()}


@router.post("/import", response={201: RunOut, 422: FieldProblemsOut | ErrorOut}, auth=RUNS_LAUNCH)
def run_import_op(request, payload: dict = Body(...)):
    """Import a run exported as JSON (here or elsewhere); all or nothing, marked imported."""
    try:
        run = run_import(data=payload, user=request.auth, workspace=request.workspace)
    except RunImportError as exc:
        return Status(422, _problems(exc.problems, ("body",)))
    return Status(201, _detail(_run(request, run.pk), request))








def _curve_out(curve: FeedbackCurve) -> dict:
    fields = ("status", "status_message", "scripted", "batch_size", "batches", "progress_percent", "points",
              "created_at", "finished_at")
    return {**{name: getattr(curve, name) for name in fields}, "id": curve.pk, "run": curve.run_id,
            "bank": curve.bank.slug if curve.bank else None, "url": curve.get_absolute_url(),
            "status_url": f"/api/evaluation/runs/feedback-curves/{curve.pk}"}


# Declared before /{run_id}.
@router.get("/feedback-curves/{curve_id}", response={200: FeedbackCurveOut, 404: ErrorOut}, auth=RUNS_READ)
def feedback_curve_get(request, curve_id: int):
    """An off-policy learning curve: its status and the points measured so far."""
    curve = FeedbackCurve.objects.select_related("bank").filter(pk=curve_id).first()
    if curve is None:
        raise HttpError(404, f"No learning curve #{curve_id}")
    return _curve_out(curve)


@router.post("/{run_id}/feedback-curves",
             response={201: FeedbackCurveOut, 404: ErrorOut, 409: ErrorOut, 422: FieldProblemsOut | ErrorOut}, auth=RUNS_LAUNCH)
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


@router.get("/{run_id}", response={200: RunOut, 404: ErrorOut}, auth=RUNS_READ)
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


@router.post("/{run_id}/cancel", response={200: RunOut, 404: ErrorOut, 409: ErrorOut}, auth=RUNS_LAUNCH)
def run_cancel_op(request, run_id: int):
    return _act(request, run_id, lambda run: run_cancel(run=run, user=request.auth))


@router.post("/{run_id}/resume", response={200: RunOut, 404: ErrorOut, 409: ErrorOut}, auth=RUNS_LAUNCH)
def run_resume_op(request, run_id: int):
    """Continue a cancelled or failed run, or re-check a waiting one."""
    return _act(request, run_id, lambda run: run_resume(run=run))


@router.post("/{run_id}/retry", response={200: RunOut, 404: ErrorOut, 409: ErrorOut}, auth=RUNS_LAUNCH)
def run_retry_op(request, run_id: int):
    """Play the episodes that hit an infrastructure error again."""
    return _act(request, run_id, lambda run: run_retry_errors(run=run))


@router.post("/{run_id}/regrade", response={202: JobOut, 404: ErrorOut, 409: ErrorOut}, auth=RUNS_LAUNCH)
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




@router.post("/{run_id}/campaign", response={202: JobOut, 404: ErrorOut, 422: FieldProblemsOut | ErrorOut}, auth=RUNS_LAUNCH)
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


@router.get("/{run_id}/export", response={200: dict, 404: ErrorOut}, auth=RUNS_READ)
def run_export(request, run_id: int, format: Literal["json", "csv"] = "json",
               part: Literal["episodes", "metrics"] = "episodes"):
    """The run as JSON (settings, episodes, metrics: what import takes) or CSV (episodes or metrics)."""
    run = _run(request, run_id)
    if format == "json":
        return run_export_json(run=run)
    return HttpResponse(run_export_csv(run=run, part=part), content_type="text/csv; charset=utf-8")
