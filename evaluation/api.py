"""The evaluation JSON API: tasks (list, read, export, import), single episodes, and what each Orb is
worth (its measured effect and review flag; memory:read, operators and reviewers).

Tasks and episodes need the operator role (session or API key). Errors are `{"detail": ...}`:
404 unknown task, task set, episode, Orb or bank; 422 invalid input (an import lists each bad line).
"""
from django.core.exceptions import ObjectDoesNotExist
from django.http import HttpResponse
from ninja import Query, Router
from ninja.errors import HttpError
from ninja.pagination import paginate
from ninja.responses import Status
from pydantic import ValidationError

from evaluation import metrics
from evaluation.environments import environments
from evaluation.feedback.api import router as feedback_router
from evaluation.models import Episode, Task, TaskSet
from evaluation.runs.api import router as runs_router
from evaluation.schemas import (
    BankEffectsOut,
    BenchmarkImportIn,
    EnvironmentOut,
    EpisodeFilters,
    EpisodeOut,
    EpisodePlayIn,
    EpisodeSummaryOut,
    OrbEffectOut,
    TaskDetailOut,
    TaskFilters,
    TaskImportErrorOut,
    TaskImportIn,
    TaskImportOut,
    TaskListOut,
    TraceFiltersIn,
    TraceOut,
)
from evaluation.scores.api import router as scores_router
from evaluation.services import (
    EpisodeConfigError,
    bank_effects_rank,
    episode_run,
    episode_trajectory,
    orb_effects_compute,
    tasks_export_jsonl,
    tasks_filtered,
    tasks_import_jsonl,
)
from evaluation.services.benchmarks import BenchmarkImportError, benchmark_import_start
from evaluation.services.traces import TraceFilters, traces_filtered, traces_listed
from evaluation.vocabulary import EvaluationScope
from memweb.auth import api_auth
from memweb.downloads import attachment
from memweb.job_api import job_accepted
from memweb.listing import ApiPagination
from memweb.roles import Role
from memweb.schemas import ErrorOut, JobOut
from orbs.models import Orb
from orbs.services import bank_resolve
from orbs.vocabulary import OrbsScope

router = Router(tags=["evaluation"])
router.add_router("/runs", runs_router)
router.add_router("/feedback", feedback_router)
router.add_router("/scores", scores_router)
TASKS_READ = api_auth(Role.OPERATOR, scope=EvaluationScope.TASKS_READ)
TASKS_WRITE = api_auth(Role.OPERATOR, scope=EvaluationScope.TASKS_WRITE)
MEMORY_READ = api_auth(Role.OPERATOR, Role.REVIEWER, scope=OrbsScope.MEMORY_READ)


def _task_out(task: Task) -> dict:
    return {"id": task.pk, "task_set": task.task_set.name, "external_id": task.external_id,
            "environment": task.environment, "domain": task.domain,
            "split": task.split, "difficulty": task.difficulty, "error_kinds": task.error_kinds,
            "summary": task.summary, "version": task.version, "content_hash": task.content_hash, "spec": task.spec}


def _task_set(request, name: str) -> TaskSet:
    found = TaskSet.objects.filter(name=name).first()
    if found is None:
        raise HttpError(404, f"No task set {name!r}")
    return found


@router.get("/environments", response=list[EnvironmentOut], auth=TASKS_READ)
def environment_list(request):
    """The task worlds tasks can be played in: the built-in ones and those installed packages add."""
    return [{"name": world.name, "label": world.label, "builtin_set": world.builtin_set_name,
             "tools": [schema["function"]["name"] for schema in world.tool_schemas()],
             "reward_version": world.reward_version, "reward_components": list(world.reward_components),
             "error_kinds": list(world.error_kinds)} for world in environments()]


@router.get("/tasks", response=TaskListOut, auth=TASKS_READ)
def task_list(request, filters: Query[TaskFilters]):
    task_set = _task_set(request, filters.task_set) if filters.task_set else None
    tasks = tasks_filtered(workspace=request.workspace, task_set=task_set, domain=filters.domain, split=filters.split,
                           difficulty=filters.difficulty, error_kind=filters.error_kind, q=filters.q)
    page = tasks[filters.offset:filters.offset + filters.limit]
    return {"count": tasks.count(), "items": [_task_out(t) for t in page]}


@router.get("/tasks/export", auth=TASKS_READ, response={404: ErrorOut})
def task_export(request, task_set: str):
    found = _task_set(request, task_set)
    response = HttpResponse(tasks_export_jsonl(task_set=found), content_type="application/x-ndjson; charset=utf-8")
    return attachment(response, filename=f"{found.name}.jsonl")


@router.post("/tasks/import", response={201: TaskImportOut, 422: TaskImportErrorOut}, auth=TASKS_WRITE)
def task_import(request, payload: TaskImportIn):
    report = tasks_import_jsonl(text=payload.jsonl, task_set_name=payload.task_set, description=payload.description,
                                workspace=request.workspace, environment_name=payload.environment)
    if not report.ok:
        return Status(422, {"detail": [{"line": line, "reason": reason} for line, reason in report.errors]})
    return Status(201, {"task_set": report.task_set_name, "created": report.created, "updated": report.updated,
                        "new_versions": report.new_versions})


# Reading a folder of the server's is an administrator's action.
BENCHMARKS_IMPORT = api_auth(Role.ADMIN, scope=EvaluationScope.TASKS_WRITE)


@router.post("/benchmarks/import", response={202: JobOut, 422: ErrorOut}, auth=BENCHMARKS_IMPORT)
def benchmark_import(request, response: HttpResponse, payload: BenchmarkImportIn):
    """Queue an import of a public benchmark (docs/BENCHMARKS.md); the job's status URL follows it."""
    try:
        job = benchmark_import_start(benchmark=payload.benchmark, path=payload.path, task_set_name=payload.task_set,
                                     workspace=request.workspace, user=request.auth)
    except BenchmarkImportError as exc:
        return Status(422, {"detail": str(exc)})
    return job_accepted(request, response, job)


@router.get("/tasks/{task_id}", response={200: TaskDetailOut, 404: ErrorOut}, auth=TASKS_READ)
def task_detail(request, task_id: int):
    task = Task.objects.select_related("task_set").filter(pk=task_id).first()
    if task is None:
        raise HttpError(404, f"No task #{task_id}")
    return _task_out(task)


def _episode_out(episode: Episode) -> dict:
    out = {field: getattr(episode, field) for field in EpisodeOut.model_fields
           if field not in ("task_external_id", "scripted")}
    out["task_external_id"] = episode.task_snapshot["id"]
    out["scripted"] = episode.agent_scripted or episode.customer_scripted
    return out


@router.post("/episodes", response={201: EpisodeOut, 404: ErrorOut, 422: ErrorOut}, auth=TASKS_WRITE)
def episode_create(request, payload: EpisodePlayIn):
    """Play one episode synchronously and return it (offline backends answer in milliseconds)."""
    task = Task.objects.filter(pk=payload.task_id).first()
    if task is None:
        raise HttpError(404, f"No task #{payload.task_id}")
    try:
        episode = episode_run(task=task, agent_config=payload.agent, customer_config=payload.customer,
                              memory_config=payload.memory, seed=payload.seed, max_turns=payload.max_turns)
    except (EpisodeConfigError, ValidationError) as exc:
        return Status(422, {"detail": str(exc)})
    return Status(201, _episode_out(episode))


@router.get("/episodes", response=list[EpisodeSummaryOut], auth=TASKS_READ)
def episode_list(request, filters: Query[EpisodeFilters]):
    """The latest episodes, newest first."""
    episodes = Episode.objects.select_related("task")
    if filters.task_id is not None:
        episodes = episodes.filter(task_id=filters.task_id)
    return [_episode_out(e) for e in episodes[:filters.limit]]


@router.get("/traces", response=list[TraceOut], auth=TASKS_READ)
@paginate(ApiPagination, page_size=50)
def trace_list(request, filters: Query[TraceFiltersIn]):
    """The workspace's LLM calls, newest first, each beside its episode and run, with the traces
    page's filters. Scripted (offline) steps make no call, so an offline run has none here."""
    chosen = TraceFilters(**{name: value for name, value in filters.dict().items() if value not in (None, "")})
    return traces_listed(traces_filtered(filters=chosen, workspace=request.workspace), workspace=request.workspace)


@router.get("/episodes/{episode_id}", response={200: EpisodeOut, 404: ErrorOut}, auth=TASKS_READ)
def episode_detail(request, episode_id: int):
    return _episode_out(_episode(request, episode_id))


@router.get("/episodes/{episode_id}/trajectory", response={200: dict, 404: ErrorOut}, auth=TASKS_READ)
def episode_trajectory_get(request, episode_id: int):
    """The episode in the shared trajectory shape that POST /api/orbs/banks/{slug}/episodes accepts."""
    return episode_trajectory(_episode(request, episode_id))


def _episode(request, episode_id: int) -> Episode:
    episode = Episode.objects.select_related("task").filter(pk=episode_id).first()
    if episode is None:
        raise HttpError(404, f"No episode #{episode_id}")
    return episode


# --- what each Orb is worth (randomised withholding; the pages' /evaluation/memory/ views) -------

def _effect_out(effect: metrics.MemoryEffect) -> dict:
    return {**effect.__dict__, "interval_below_zero": effect.harmful,
            "harm_p_value": metrics.harm_p_values({0: effect}).get(0)}


def _orb_effect_out(orb: Orb, effect: metrics.MemoryEffect) -> dict:
    return {"orb_id": orb.pk, "bank": orb.bank.slug, "status": orb.status, "flagged_at": orb.flagged_at,
            "flag_note": orb.flag_note, "effect": _effect_out(effect)}


@router.get("/memory/orbs/{orb_id}/effect", response={200: OrbEffectOut, 404: ErrorOut}, auth=MEMORY_READ)
def orb_effect(request, orb_id: int):
    """What one Orb is worth: success of the episodes it was served in minus those it was withheld from,
    with its review flag (docs/STATISTICS.md, "What one memory is worth")."""
    orb = Orb.objects.select_related("bank").filter(pk=orb_id).first()
    if orb is None:
        raise HttpError(404, f"No Orb #{orb_id}")
    return _orb_effect_out(orb, orb_effects_compute(orb_ids=[orb.pk])[orb.pk])


@router.get("/memory/banks/{slug}/effects", response={200: BankEffectsOut, 404: ErrorOut}, auth=MEMORY_READ)
def bank_effects(request, slug: str):
    """The bank's Orbs with a measured effect, most harmful first, and the error rate the flag guarantees."""
    try:
        bank = bank_resolve(slug, workspace=request.workspace)
    except ObjectDoesNotExist:
        raise HttpError(404, f"No memory bank {slug!r}") from None
    return {"bank": bank.slug, "min_episodes": metrics.MIN_RETRIEVALS, "harm_error_rate": metrics.HARM_ERROR_RATE,
            "flag_rule": metrics.HARM_FLAG_RULE,
            "orbs": [_orb_effect_out(row["orb"], row["effect"]) for row in bank_effects_rank(bank=bank)]}

