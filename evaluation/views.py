"""Pages: the task list, a task, task import/export, episodes and their transcripts, the LLM calls
across runs (traces), and what each memory is worth."""
from dataclasses import replace

from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from pydantic import ValidationError

from evaluation.environments import DEFAULT_ENVIRONMENT
from evaluation.forms import (
    BenchmarkImportForm,
    EpisodeFilterForm,
    PlayForm,
    TaskFilterForm,
    TaskImportForm,
    TraceFilterForm,
)
from evaluation.metrics import HARM_ERROR_RATE, MIN_RETRIEVALS
from evaluation.models import Episode, Task, TaskSet
from evaluation.services import (
    EpisodeConfigError,
    bank_effects_rank,
    environments_with_builtin_sets,
    episode_run,
    orb_effects_compute,
    tasks_export_jsonl,
    tasks_filtered,
    tasks_import_jsonl,
    taskset_builtin_load,
)
from evaluation.services.benchmarks import BenchmarkImportError, benchmark_import_start, benchmark_names
from evaluation.services.episode_search import EpisodeFilters, episodes_filtered
from evaluation.services.memory_effects import bank_experience_effects_rank, experience_effects_compute
from evaluation.services.timeline import episode_timeline
from evaluation.services.traces import (
    CALL_TOKENS,
    EPISODE_TOKENS,
    calls_of_workspace,
    episodes_with_usage,
    traces_filtered,
    traces_listed,
    traces_summary,
)
from memweb.downloads import attachment
from memweb.listing import CappedPaginator, Sorting, list_page
from memweb.roles import Role, has_role, role_required
from orbs.dmrm.models import Experience
from orbs.models import Orb
from orbs.services import bank_resolve

# --- tasks ---------------------------------------------------------------------------

TASK_SORTING = Sorting(columns={"task": "external_id", "set": "task_set__name", "domain": "domain", "split": "split",
                                "difficulty": "difficulty", "requests": "summary"})


@require_GET
@role_required(Role.OPERATOR)
def task_list(request):
    form = TaskFilterForm(request.GET or None, workspace=request.workspace)
    tasks = tasks_filtered(workspace=request.workspace, **form.filters())
    has_sets = TaskSet.objects.all().exists()
    return list_page(request, rows=tasks, template="evaluation/task_list.html", partial="evaluation/_task_rows.html",
                     sorting=TASK_SORTING,
                     context={"form": form, "has_sets": has_sets,
                              "builtin_worlds": [] if has_sets else environments_with_builtin_sets()})


@require_POST
@role_required(Role.OPERATOR)
def tasks_load_builtin(request):
    worlds = {world.name: world for world in environments_with_builtin_sets()}
    name = request.POST.get("environment") or DEFAULT_ENVIRONMENT
    if name not in worlds:
        messages.error(request, f"No built-in task set for the environment “{name}”: choose one of "
                                f"{', '.join(sorted(worlds))}.")
        return redirect("evaluation:task_list")
    task_set = taskset_builtin_load(workspace=request.workspace, environment_name=name)
    messages.success(request, f"Loaded the built-in task set {task_set.name} ({task_set.tasks.count()} tasks).")
    return redirect("evaluation:task_list")


@require_GET
@role_required(Role.OPERATOR)
def task_detail(request, task_id: int):
    task = get_object_or_404(Task.objects.select_related("task_set"), pk=task_id)
    context = {"task": task, "spec": task.spec, "form": PlayForm(),
               "episodes": episodes_with_usage(task.episodes.all())[:20]}
    return render(request, "evaluation/task_detail.html", context)


@require_POST
@role_required(Role.OPERATOR)
def task_play(request, task_id: int):
    task = get_object_or_404(Task, pk=task_id)
    form = PlayForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            episode = episode_run(task=task, **form.configs())
        except (EpisodeConfigError, ValidationError) as exc:
            error = str(exc)
        else:
            return redirect(episode)
    context = {"task": task, "spec": task.spec, "form": form, "play_error": error,
               "episodes": episodes_with_usage(task.episodes.all())[:20]}
    return render(request, "evaluation/task_detail.html", context, status=422)


# --- import / export -------------------------------------------------------------------

@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def task_import(request):
    form = TaskImportForm(request.POST or None, request.FILES or None)
    report, status = None, 200
    if request.method == "POST":
        report, status = _import(form, request.workspace)
    return _import_page(request, form=form, report=report, status=status)


def _import_page(request, *, form=None, report=None, benchmark_form=None, status: int = 200):
    context = {"form": form or TaskImportForm(), "report": report,
               "task_sets": TaskSet.objects.all(),
               "benchmark_form": benchmark_form or BenchmarkImportForm(benchmarks=benchmark_names()),
               "can_import_benchmarks": has_role(request.user, Role.ADMIN)}
    return render(request, "evaluation/task_import.html", context, status=status)


@require_POST
@role_required(Role.ADMIN)  # it reads a folder of the server's: an administrator's action
def benchmark_import(request):
    form = BenchmarkImportForm(request.POST, benchmarks=benchmark_names())
    if form.is_valid():
        try:
            job = benchmark_import_start(benchmark=form.cleaned_data["benchmark"], path=form.cleaned_data["path"],
                                         task_set_name=form.cleaned_data["task_set"], workspace=request.workspace,
                                         user=request.user)
        except BenchmarkImportError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("job_detail", job.pk)
    return _import_page(request, benchmark_form=form, status=422)


def _import(form: TaskImportForm, workspace):
    if not form.is_valid():
        return None, 422
    report = tasks_import_jsonl(text=form.jsonl(), task_set_name=form.cleaned_data["task_set"],
                                description=form.cleaned_data["description"], workspace=workspace,
                                environment_name=form.cleaned_data["environment"])
    return report, 200 if report.ok else 422


@require_GET
@role_required(Role.OPERATOR)
def task_export(request):
    task_set = get_object_or_404(TaskSet, name=request.GET.get("task_set", ""))
    response = HttpResponse(tasks_export_jsonl(task_set=task_set), content_type="application/x-ndjson; charset=utf-8")
    return attachment(response, filename=f"{task_set.name}.jsonl")


# --- episodes ------------------------------------------------------------------------------

EPISODE_SORTING = Sorting(columns={
    "id": "pk", "task": "task__external_id", "outcome": "success", "reward": "reward", "agent": "agent_backend",
    "memory": "memory_kind", "turns": "turns", "ended": "ended_by", "when": "created_at",
    "latency": "latency_ms", "tokens": EPISODE_TOKENS, "cost": "llm_cost"})


@require_GET
@role_required(Role.OPERATOR)
def episode_list(request):
    form = EpisodeFilterForm(request.GET, workspace=request.workspace)
    filters = form.filters()
    return list_page(request, rows=episodes_filtered(filters=filters, workspace=request.workspace),
                     template="evaluation/episode_list.html", partial="evaluation/_episode_rows.html",
                     sorting=EPISODE_SORTING,
                     context={"form": form, "filters": filters, "relax": _relaxations(request, form, filters)})


def _relaxations(request, form: EpisodeFilterForm, filters: EpisodeFilters) -> list[dict]:
    """Each filter in use with the link that drops it and how many episodes match without it (the
    empty state's suggestions; a count is run only where the page shows it)."""
    def count_without(name: str) -> int:
        relaxed = replace(filters, **{name: EpisodeFilters.__dataclass_fields__[name].default})
        return CappedPaginator(episodes_filtered(filters=relaxed, workspace=request.workspace), 1).count

    def query_without(name: str) -> str:
        params = request.GET.copy()
        for dropped in (name, "page"):
            params.pop(dropped, None)
        return params.urlencode()
    return [{"label": form.fields[name].label or name.capitalize(), "value": value, "query": query_without(name),
             "count": lambda name=name: count_without(name)} for name, value in filters.active().items()]


@require_GET
@role_required(Role.OPERATOR)
def episode_detail(request, episode_id: int):
    episode = get_object_or_404(Episode.objects.select_related("task", "task__task_set"),
                                pk=episode_id)
    context = {"episode": episode, "spec": episode.task_snapshot, "timeline": episode_timeline(episode=episode)}
    return render(request, "evaluation/episode_detail.html", context)


# --- traces: every LLM call of the workspace's episodes ---------------------------------------

TRACE_SORTING = Sorting(columns={
    "when": "created_at", "run": "run_id", "episode": "episode_id", "turn": "turn", "role": "role", "model": "model",
    "status": "status", "attempts": "attempts", "tokens": CALL_TOKENS,
    "latency": "latency_ms", "cost": "cost"})


@require_GET
@role_required(Role.OPERATOR)
def trace_list(request):
    form = TraceFilterForm(request.GET, workspace=request.workspace)
    filters = form.filters()
    calls = traces_filtered(filters=filters, workspace=request.workspace)
    context = {"form": form, "filters": filters, "summary": traces_summary(calls),
               "any_calls": bool(filters.active()) or calls_of_workspace(request.workspace).exists()}
    return list_page(request, rows=traces_listed(calls, workspace=request.workspace),
                     template="evaluation/trace_list.html", partial="evaluation/_trace_rows.html",
                     sorting=TRACE_SORTING, context=context)


# --- what each memory is worth (randomised withholding) -----------------------------------------

def _bank_or_404(request, slug: str):
    try:
        return bank_resolve(slug, workspace=request.workspace)
    except ObjectDoesNotExist:
        raise Http404(f"No memory bank {slug!r}") from None


def _harm_table(request, slug: str, *, rank, template: str):
    """A bank's memories of one kind ranked by `rank` (most harmful first)."""
    bank = _bank_or_404(request, slug)
    # Runs outside the effect-measurement mode withheld nothing: their episodes add no comparison group.
    unmeasured = bank.evaluation_runs.filter(spec__withhold_probability=0).order_by("pk")
    context = {"bank": bank, "rows": rank(bank=bank), "min_retrievals": MIN_RETRIEVALS, "unmeasured_runs": unmeasured,
               "harm_error_rate": HARM_ERROR_RATE}
    return render(request, f"evaluation/{template}", context)


def _effect_answer(request, template: str, context: dict):
    """A memory's page loads its effect with htmx (the `_` partial); without htmx it is a page of its own."""
    context = {**context, "min_retrievals": MIN_RETRIEVALS, "harm_error_rate": HARM_ERROR_RATE}
    return render(request, f"evaluation/_{template}" if request.htmx else f"evaluation/{template}", context)


@require_GET
@role_required(Role.OPERATOR, Role.REVIEWER)
def memory_effects(request, slug: str):
    """The bank's Orbs, most harmful first."""
    return _harm_table(request, slug, rank=bank_effects_rank, template="memory_effects.html")


@require_GET
@role_required(Role.OPERATOR, Role.REVIEWER)
def orb_effect(request, orb_id: int):
    orb = get_object_or_404(Orb, pk=orb_id)
    effect = orb_effects_compute(orb_ids=[orb_id])[orb_id]
    return _effect_answer(request, "orb_effect.html", {"orb_id": orb_id, "effect": effect, "flagged_at": orb.flagged_at})


@require_GET
@role_required(Role.OPERATOR, Role.REVIEWER)
def experience_effects(request, slug: str):
    """The bank's DMRM experiences, most harmful first."""
    return _harm_table(request, slug, rank=bank_experience_effects_rank, template="experience_effects.html")


@require_GET
@role_required(Role.OPERATOR, Role.REVIEWER)
def experience_effect(request, experience_id: int):
    experience = get_object_or_404(Experience, pk=experience_id)
    effect = experience_effects_compute(experience_ids=[experience_id])[experience_id]
    return _effect_answer(request, "experience_effect.html", {"experience_id": experience_id, "effect": effect,
                                                              "flagged_at": experience.flagged_at})
