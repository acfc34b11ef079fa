"""Pages of evaluation runs: list, launch, the run page (live by htmx polling), actions, compare,
export and import. Operators only."""
import json
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import F, FloatField
from django.db.models.functions import Cast, NullIf
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from evaluation.feedback.models import CalibrationSetting
from evaluation.feedback.services import (
    calibration_histogram,
    calibration_table,
    feedback_browse,
    feedback_rates,
    run_episodes,
)
from evaluation.models import TaskSet
from evaluation.runs.forms import FeedbackCurveForm, RunFilterForm, RunImportForm, RunLaunchForm, RunPlanForm
from evaluation.runs.models import EvaluationRun, FeedbackCurve, TaskSplit
from evaluation.runs.services import (
    FLIP_SORTS,
    CurveLaunchError,
    RegradeRefused,
    RunActionError,
    RunImportError,
    RunLaunchError,
    RunsNotComparable,
    curve_chart,
    curve_launch,
    regrade_flips,
    regrade_side_by_side,
    run_cancel,
    run_charts,
    run_detectable_effect,
    run_errors,
    run_export_csv,
    run_export_json,
    run_heatmap,
    run_import,
    run_imported_feedback,
    run_launch,
    run_launch_validate,
    run_measured_text,
    run_pending_memories,
    run_pins_out,
    run_preparation_job,
    run_progress,
    run_regrade_current,
    run_regrade_job_active,
    run_regrade_latest,
    run_regrade_start,
    run_resume,
    run_retry_errors,
    run_staleness,
    runs_compare,
    runs_filtered,
    runs_plan_trials,
)
from evaluation.runs.services.board import memory_layers_board
from evaluation.runs.services.components import run_component_failures
from evaluation.runs.services.results import run_split_summary
from evaluation.runs.services.spec import spec_panel
from evaluation.runs.services.transcripts import TranscriptsNotFound, transcript_runs, transcripts_compare
from evaluation.runs.services.usage import run_usage
from memweb.downloads import attachment
from memweb.listing import Sorting, list_page
from memweb.roles import Role, role_required

MAX_COMPARED = 6
SHARED_OFFERED = 12  # tasks both runs played, linked from a page that could not show the asked-for one
RUN_SORTING = Sorting(columns={
    "run": "pk", "name": "name", "status": "status", "memory": "memory_mode", "agent": "agent_backend",
    "progress": Cast("episodes_finished", FloatField()) / NullIf(F("episodes_total"), 0),
    "success": Cast("successes", FloatField()) / NullIf(F("episodes_finished") - F("episodes_error"), 0),
    "created": "created_at"})


@require_GET
@role_required(Role.OPERATOR)
def run_list(request):
    form = RunFilterForm(request.GET or None)
    runs = runs_filtered(**form.filters())
    return list_page(request, rows=runs, template="evaluation/runs/list.html",
                     partial="evaluation/runs/_rows.html", sorting=RUN_SORTING, context={"form": form})


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def run_new(request):
    form = RunLaunchForm(request.POST or None, initial={"name": "Evaluation run"}, workspace=request.workspace)
    run = _launched(form, request.user, request.workspace) if request.method == "POST" else None
    if run is not None:
        messages.success(request, f"Run #{run.pk} queued: {run.episodes_total} episodes over {run.run_spec.trials} trials.")
        return redirect(run)
    status = 422 if form.errors else 200
    return render(request, "evaluation/runs/launch.html", {"form": form}, status=status)


def _launched(form: RunLaunchForm, user, workspace) -> EvaluationRun | None:
    """The run a valid form launches in `workspace`. An invalid form is still checked on the fields
    that cleaned, so the page names every problem at once instead of in rounds."""
    valid = form.is_valid()
    try:
        if valid:
            return run_launch(spec=form.spec(), user=user, workspace=workspace)
        run_launch_validate(spec=form.spec(), workspace=workspace)
    except RunLaunchError as exc:
        form.add_launch_errors(exc)
    return None


DEFAULT_PLAN_EFFECT = 10.0  # points: what the planner shows before the operator types an effect


@require_GET
@role_required(Role.OPERATOR)
def run_plan(request):
    """The launch form's planner: trials for 80 % power at an effect size on the chosen tasks."""
    form = RunPlanForm(request.GET or None, initial={"effect": DEFAULT_PLAN_EFFECT})
    plan = runs_plan_trials(workspace=request.workspace, **form.plan_arguments()) if form.is_valid() else None
    context = {"plan_form": form, "plan": plan}
    if request.htmx:
        return render(request, "evaluation/runs/_plan.html", context)
    return render(request, "evaluation/runs/plan.html", context)


FEEDBACK_ROWS = 10  # the newest on the run page; the feedback browser pages through the rest


def _feedback_context(run: EvaluationRun) -> dict:
    """The run's score histogram, realised action rates against the targets, and newest feedback."""
    episodes, params = run_episodes(run=run), CalibrationSetting.current().params()
    rates = (feedback_rates(rows=run_imported_feedback(run=run), params=params) if run.imported
             else feedback_rates(episodes=episodes, params=params))
    histogram = calibration_histogram(table=calibration_table(params=params), rates=rates)
    return {"rates": rates, "histogram_chart": histogram,
            "page": Paginator(feedback_browse(episodes=episodes), FEEDBACK_ROWS).get_page(1),
            "query": urlencode({"run": run.pk})}


def _live_context(run: EvaluationRun) -> dict:
    preparing = run.status == EvaluationRun.Status.PREPARING
    return {"run": run, "trials": run_progress(run=run), "errors": run_errors(run=run),
            "preparation": run_preparation_job(run=run) if preparing else None,
            "pending_memories": run_pending_memories(run=run) if run.bank_id else 0,
            "feedback": _feedback_context(run) if run.run_spec.feedback_enabled else None,
            "detectable": run_detectable_effect(run=run) if run.metrics_trials else None,
            "measured": run_measured_text(run), "splits": run_split_summary(run=run),
            "live": {"charts": run_charts(run=run), "heatmap": run_heatmap(run=run), "active": run.is_active}}


def _scoring_context(run: EvaluationRun) -> dict:
    """The run's pins, whether it is stale, and its latest re-grade beside the original scores."""
    regrade = run_regrade_latest(run=run)
    return {"pinned": run_pins_out(run=run), "staleness": run_staleness(run=run), "regrade": regrade,
            "regrade_current": regrade is not None and run_regrade_current(run=run) == regrade,
            "regrade_job": run_regrade_job_active(run=run),
            "side_by_side": regrade_side_by_side(run=run, regrade=regrade) if regrade else None,
            "regrade_flips": regrade_flips(regrade=regrade) if regrade else []}


@require_GET
@role_required(Role.OPERATOR)
def memory_layers_board_view(request):
    """The memory-layers leaderboard of one task set (the workspace's first with a completed run when
    none is chosen)."""
    task_sets = TaskSet.objects.filter(
        runs__status=EvaluationRun.Status.COMPLETED).distinct().order_by("name")
    asked = request.GET.get("task_set", "").replace("\x00", "")  # a NUL never names a task set
    chosen = task_sets.filter(name=asked).first() or task_sets.first()
    rows = memory_layers_board(workspace=request.workspace, task_set=chosen) if chosen else []
    return render(request, "evaluation/runs/board.html", {"task_sets": task_sets, "chosen": chosen, "rows": rows})


@require_GET
@role_required(Role.OPERATOR)
def run_detail(request, run_id: int):
    run = get_object_or_404(EvaluationRun.objects.select_related("bank", "task_set", "created_by"), pk=run_id)
    context = {**_live_context(run), "curves": run.feedback_curves.all() if run.run_spec.feedback_enabled else [],
               "usage": run_usage(run=run)}
    if request.htmx:
        return render(request, "evaluation/runs/_poll.html", context)
    context["scoring"] = _scoring_context(run)
    context["component_failures"] = run_component_failures(run=run)
    context["settings_panel"] = spec_panel(run.run_spec, unused=run.memory_layer.unused_settings())
    if run.imported:
        context["imported_tasks"] = run.run_episodes.values("task_key").distinct().count()
    return render(request, "evaluation/runs/detail.html", context)


@require_POST
@role_required(Role.OPERATOR)
def feedback_curve_launch_view(request, run_id: int):
    """Off-policy feedback: a learning curve of a completed feedback run (Celery work)."""
    run = get_object_or_404(EvaluationRun, pk=run_id)
    form = FeedbackCurveForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()))
        return redirect(run)
    try:
        curve = curve_launch(run=run, batch_size=form.cleaned_data["batch_size"], user=request.user)
    except CurveLaunchError as exc:
        messages.error(request, f"No learning curve: {exc}")
        return redirect(run)
    messages.success(request, f"Learning curve queued: {curve.batches} batch{'es' if curve.batches != 1 else ''} "
                              f"of {curve.batch_size} feedback logs, {curve.steps} points.")
    return redirect(curve)


@require_GET
@role_required(Role.OPERATOR)
def feedback_curve_detail(request, curve_id: int):
    curve = get_object_or_404(FeedbackCurve.objects.select_related("run", "bank"),
                              pk=curve_id)
    context = {"curve": curve, "chart": curve_chart(curve=curve)}
    if request.htmx:
        return render(request, "evaluation/runs/_curve_live.html", context)
    return render(request, "evaluation/runs/curve.html", context)


def _action(request, run_id: int, act, done: str):
    run = get_object_or_404(EvaluationRun, pk=run_id)
    try:
        result = act(run)
    except RunActionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done.format(result=result))
    if request.htmx:  # a confirmed button (hx-confirm): the browser loads the run page with the message
        return HttpResponseClientRedirect(run.get_absolute_url())
    return redirect(run)


@require_POST
@role_required(Role.OPERATOR)
def run_cancel_view(request, run_id: int):
    return _action(request, run_id, lambda run: run_cancel(run=run, user=request.user),
                   "Run cancelled. Episodes already playing finish and are kept.")


@require_POST
@role_required(Role.OPERATOR)
def run_resume_view(request, run_id: int):
    return _action(request, run_id, lambda run: run_resume(run=run), "Run resumed: unfinished work is queued again.")


@require_POST
@role_required(Role.OPERATOR)
def run_regrade_view(request, run_id: int):
    """Re-grade a stale run in the background: its job page shows the progress."""
    run = get_object_or_404(EvaluationRun, pk=run_id)
    try:
        job = run_regrade_start(run=run, user=request.user)
    except RegradeRefused as exc:
        messages.error(request, f"No re-grade: {exc}.")
        return redirect(run)
    messages.success(request, f"Re-grade of run #{run.pk} queued: its stored trajectories are scored again against "
                              "the current gold; the original scores are kept.")
    return redirect("job_detail", job.pk)


@require_POST
@role_required(Role.OPERATOR)
def run_retry_view(request, run_id: int):
    return _action(request, run_id, lambda run: run_retry_errors(run=run),
                   "{result} episode(s) with an infrastructure error queued again.")


def _download(body: str, content_type: str, filename: str) -> HttpResponse:
    return attachment(HttpResponse(body, content_type=content_type), filename=filename)


@require_GET
@role_required(Role.OPERATOR)
def run_export_json_view(request, run_id: int):
    run = get_object_or_404(EvaluationRun, pk=run_id)
    return _download(json.dumps(run_export_json(run=run), indent=1), "application/json", f"run-{run.pk}.json")


@require_GET
@role_required(Role.OPERATOR)
def run_export_csv_view(request, run_id: int):
    run = get_object_or_404(EvaluationRun, pk=run_id)
    part = "metrics" if request.GET.get("part") == "metrics" else "episodes"
    return _download(run_export_csv(run=run, part=part), "text/csv; charset=utf-8", f"run-{run.pk}-{part}.csv")


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def run_import_view(request):
    form = RunImportForm(request.POST or None, request.FILES or None)
    problems = None
    if request.method == "POST" and form.is_valid():
        try:
            run = run_import(data=form.cleaned_data["file"], user=request.user, workspace=request.workspace)
        except RunImportError as exc:
            problems = exc.problem_report(data=form.cleaned_data["file"])
        else:
            messages.success(request, f"Imported run #{run.pk} ({run.episodes_total} episodes).")
            return redirect(run)
    status = 422 if (form.errors or problems) else 200
    return render(request, "evaluation/runs/import.html", {"form": form, "problems": problems}, status=status)


FLIP_COLUMNS = (("task", "Task"), ("a", "This run"), ("b", "Baseline"), ("changed", "Changed"),
                ("instability", "Instability"), ("discordant", "Disagreeing trials"), ("difference", "Difference"))


def _compared_runs(request) -> list[EvaluationRun]:
    ids = sorted({int(value) for value in request.GET.getlist("runs") if value.isdigit()})[:MAX_COMPARED]
    runs = EvaluationRun.objects.select_related("task_set")
    return list(runs.filter(pk__in=ids).order_by("pk"))


def _scores_param(comparison: dict | None) -> list[tuple[str, str]]:
    """Links within a comparison of re-graded scores (sorting) keep comparing them, and those within
    a held-out comparison's train view stay on it (a later `view` in the link wins)."""
    regraded = [("scores", "regraded")] if comparison and comparison["scoring"]["regrades"] else []
    train = [("view", TaskSplit.TRAIN)] if comparison and comparison["view"] == TaskSplit.TRAIN else []
    return regraded + train


# Asked-for ways to compare runs that would be refused: on their shared tasks, despite named differences.
COMPARE_OPTIONS = (("shared", "shared"), ("accept", "accept_differences"))


def _compare_options(request) -> dict[str, bool]:
    return {argument: request.GET.get(param) == "1" for param, argument in COMPARE_OPTIONS}


@require_GET
@role_required(Role.OPERATOR)
def run_compare(request):
    """The oldest chosen run is the baseline; runs that may not be compared are refused with the reason."""
    runs, comparison, refused, options = _compared_runs(request), None, None, _compare_options(request)
    if len(runs) >= 2:
        try:
            comparison = runs_compare(runs=runs, sort=request.GET.get("sort", ""), scores=request.GET.get("scores", ""),
                                      view=request.GET.get("view", ""), **options)
        except RunsNotComparable as exc:
            refused = exc
    choices = EvaluationRun.objects.filter(metrics__isnull=False)[:100]
    runs_query = urlencode([("runs", run.pk) for run in runs] + _scores_param(comparison) +
                           [(param, "1") for param, argument in COMPARE_OPTIONS if options[argument]])
    context = {"runs": runs, "choices": choices,
               "comparison": comparison, "refusal": str(refused or ""), "refused": refused, "sorts": FLIP_SORTS,
               "flip_columns": FLIP_COLUMNS,
               "runs_query": runs_query}
    return render(request, "evaluation/runs/compare.html", context, status=409 if refused else 200)


@require_GET
@role_required(Role.OPERATOR)
def run_compare_transcripts(request):
    """Runs A and B's transcripts of one task side by side, turn by turn (?a=&b=&task=&trial=); what
    is missing (a run, the task in one run, the trial) is said on the page, with status 404."""
    params = request.GET
    runs, context = (), {}
    try:
        runs = transcript_runs(a=params.get("a", ""), b=params.get("b", ""))
        context = {"compared": transcripts_compare(run_a=runs[0], run_b=runs[1], task_key=params.get("task", ""),
                                                   trial=params.get("trial"))}
    except TranscriptsNotFound as exc:
        context = {"error": str(exc), "shared": exc.shared[:SHARED_OFFERED], "shared_count": len(exc.shared)}
    pair_query = urlencode({"a": runs[0].pk, "b": runs[1].pk}) if runs else ""
    context |= {"runs": runs, "pair_query": pair_query,
                "compare_query": urlencode([("runs", run.pk) for run in runs] + [("shared", "1")])}
    return render(request, "evaluation/runs/compare_transcripts.html", context, status=404 if "error" in context else 200)
