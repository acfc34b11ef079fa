"""Custom scores in the JSON API (mounted at /api/evaluation/scores), for operators (session or API key).

Definitions belong to a task set (tasks:read to list, tasks:write to define and archive); scoring a
run starts a background job (runs:launch; 202 with the job's status URL) and its scores are read with
runs:read. Errors are `{"detail": ...}`: 404 unknown task set, score or run; 409 nothing to score;
422 invalid input, one `{"loc": [...], "msg": ...}` per bad field (the shape of django-ninja's own).
"""
from django.http import HttpResponse
from ninja import Query, Router
from ninja.errors import HttpError
from ninja.responses import Status

from evaluation.models import TaskSet
from evaluation.runs.models import EvaluationRun
from evaluation.scores.kinds import ScoreConfigInvalid
from evaluation.scores.models import ScoreDefinition
from evaluation.scores.schemas import (
    DefinitionCreatedOut,
    DefinitionIn,
    DefinitionOut,
    EpisodeScoreListOut,
    ScoreListQuery,
    ScoreSummaryOut,
)
from evaluation.scores.services import (
    ScoringRefused,
    definition_archive,
    definition_create,
    definition_describe,
    run_score_start,
    run_scores,
    run_scores_summary,
    task_set_score_start,
)
from evaluation.vocabulary import EvaluationScope
from memweb.auth import api_auth
from memweb.job_api import job_accepted, job_out
from memweb.roles import Role
from memweb.schemas import ErrorOut, FieldProblemsOut, JobOut

router = Router(tags=["evaluation"])
TASKS_READ = api_auth(Role.OPERATOR, scope=EvaluationScope.TASKS_READ)
TASKS_WRITE = api_auth(Role.OPERATOR, scope=EvaluationScope.TASKS_WRITE)
RUNS_READ = api_auth(Role.OPERATOR, scope=EvaluationScope.RUNS_READ)
RUNS_LAUNCH = api_auth(Role.OPERATOR, scope=EvaluationScope.RUNS_LAUNCH)


def _task_set(task_set_id: int) -> TaskSet:
    found = TaskSet.objects.filter(pk=task_set_id).first()
    if found is None:
        raise HttpError(404, f"No task set #{task_set_id}")
    return found


def _run(run_id: int) -> EvaluationRun:
    found = EvaluationRun.objects.filter(pk=run_id).first()
    if found is None:
        raise HttpError(404, f"No evaluation run #{run_id}")
    return found


def _definition_out(definition: ScoreDefinition) -> dict:
    return {"id": definition.pk, "task_set_id": definition.task_set_id, "task_set": definition.task_set.name,
            "name": definition.name, "slug": definition.slug, "kind": definition.kind, "config": definition.config,
            "describe": definition_describe(definition), "archived": definition.archived,
            "created_at": definition.created_at}


@router.get("/task-sets/{task_set_id}/definitions", response={200: list[DefinitionOut], 404: ErrorOut},
            auth=TASKS_READ)
def definition_list(request, task_set_id: int, archived: bool = False):
    """The task set's custom scores (`archived=true`: also those archived)."""
    definitions = _task_set(task_set_id).score_definitions.select_related("task_set")
    return [_definition_out(d) for d in (definitions if archived else definitions.filter(archived=False))]


@router.post("/task-sets/{task_set_id}/definitions",
             response={201: DefinitionCreatedOut, 404: ErrorOut, 422: FieldProblemsOut}, auth=TASKS_WRITE)
def definition_create_op(request, task_set_id: int, payload: DefinitionIn):
    """Define a custom score on the task set. Unless `score_existing` is false, a background job then
    scores the finished runs' episodes of the set (`job.status_url` says when it is done)."""
    task_set = _task_set(task_set_id)
    try:
        definition = definition_create(task_set=task_set, name=payload.name, kind=payload.kind,
                                       config=payload.config, user=request.auth)
    except ScoreConfigInvalid as invalid:
        where = {"name": ("body", "name"), "kind": ("body", "kind")}
        return Status(422, {"detail": [{"loc": list(where.get(field, ("body", "config", field))), "msg": message}
                                       for field, message in invalid.errors.items()]})
    job = task_set_score_start(task_set=task_set, user=request.auth) if payload.score_existing else None
    return Status(201, _definition_out(definition) | {"job": job_out(request, job) if job else None})


@router.post("/definitions/{definition_id}/archive", response={200: DefinitionOut, 404: ErrorOut}, auth=TASKS_WRITE)
def definition_archive_op(request, definition_id: int):
    """Archive a score: no longer computed nor shown; the values stored with it are kept."""
    definition = ScoreDefinition.objects.select_related("task_set").filter(pk=definition_id).first()
    if definition is None:
        raise HttpError(404, f"No custom score #{definition_id}")
    return _definition_out(definition_archive(definition=definition))


@router.post("/task-sets/{task_set_id}/score", response={202: JobOut, 404: ErrorOut, 409: ErrorOut},
             auth=RUNS_LAUNCH)
def task_set_score_op(request, response: HttpResponse, task_set_id: int):
    """Score the finished runs' episodes of the task set with its active scores: 202 with the job."""
    try:
        job = task_set_score_start(task_set=_task_set(task_set_id), user=request.auth)
    except ScoringRefused as exc:
        raise HttpError(409, str(exc)) from None
    return job_accepted(request, response, job)


@router.post("/runs/{run_id}/score", response={202: JobOut, 404: ErrorOut, 409: ErrorOut}, auth=RUNS_LAUNCH)
def run_score_op(request, response: HttpResponse, run_id: int):
    """Compute every active custom score of the run's task sets over its finished episodes, as a
    background job: 202 with the job (the same one while it is queued or running); 409 when the run
    is still playing, imported, or its task set has no scores. A re-run replaces the stored values."""
    try:
        job = run_score_start(run=_run(run_id), user=request.auth)
    except ScoringRefused as exc:
        raise HttpError(409, str(exc)) from None
    return job_accepted(request, response, job)


@router.get("/runs/{run_id}/summary", response={200: list[ScoreSummaryOut], 404: ErrorOut}, auth=RUNS_READ)
def run_score_summary(request, run_id: int):
    """Per custom score: mean, pass rate, episodes scored, not judged (offline judge) and errors."""
    return [{key: value for key, value in row.items() if key != "definition"}
            for row in run_scores_summary(run=_run(run_id))]


@router.get("/runs/{run_id}/scores", response={200: EpisodeScoreListOut, 404: ErrorOut}, auth=RUNS_READ)
def run_score_list(request, run_id: int, query: Query[ScoreListQuery]):
    """The run's stored scores, one item per (score, episode), by episode."""
    scores = run_scores(run=_run(run_id))
    page = scores[query.offset:query.offset + query.limit]
    return {"count": scores.count(), "items": [
        {"definition_id": s.definition_id, "name": s.definition.name, "episode_id": s.episode_id,
         "task": s.episode.run_episode.task_key, "trial": s.episode.run_episode.trial.number, "status": s.status,
         "value": s.value, "passed": s.passed, "explanation": s.explanation, "judge": s.judge,
         "scored_at": s.scored_at} for s in page]}
