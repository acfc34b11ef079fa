"""Custom-score pages: a task set's scores (list, create, archive, score its finished episodes) and
scoring a run; the run, episode and compare pages show the values through
evaluation.templatetags.custom_scores."""
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from evaluation.models import TaskSet
from evaluation.runs.models import EvaluationRun
from evaluation.scores.forms import ScoreDefinitionForm
from evaluation.scores.kinds import ScoreConfigInvalid
from evaluation.scores.models import ScoreDefinition
from evaluation.scores.services import (
    ScoringRefused,
    definition_archive,
    definition_create,
    definition_describe,
    run_score_start,
    task_set_score_job_active,
    task_set_score_start,
)
from memweb.roles import Role, role_required


def _page(request, task_set: TaskSet, form: ScoreDefinitionForm, status: int = 200):
    definitions = task_set.score_definitions.filter(archived=False).order_by("name")
    context = {"task_set": task_set, "form": form, "job": task_set_score_job_active(task_set=task_set),
               "definitions": [{"definition": d, "describe": definition_describe(d), "scored": d.scores.count()}
                               for d in definitions]}
    return render(request, "evaluation/scores/task_set_scores.html", context, status=status)


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def task_set_scores(request, task_set_id: int):
    """The task set's custom scores, and the form that defines one; a new score's values for the
    finished runs' episodes are computed by a job whose progress this page shows."""
    task_set = get_object_or_404(TaskSet, pk=task_set_id)
    form = ScoreDefinitionForm(request.POST or None)
    if request.method == "GET":
        return _page(request, task_set, form)
    if form.is_valid():
        try:
            definition = definition_create(task_set=task_set, name=form.cleaned_data["name"],
                                           kind=form.cleaned_data["kind"], config=form.config(), user=request.user)
        except ScoreConfigInvalid as invalid:
            form.add_config_errors(invalid.errors)
        else:
            task_set_score_start(task_set=task_set, user=request.user)
            messages.success(request, f"Score “{definition.name}” defined; the finished runs' episodes of "
                                      f"{task_set.name} are being scored.")
            return redirect("evaluation:task_set_scores", task_set.pk)
    return _page(request, task_set, form, status=422)


@require_POST
@role_required(Role.OPERATOR)
def score_definition_archive(request, definition_id: int):
    definition = get_object_or_404(ScoreDefinition.objects.select_related("task_set"), pk=definition_id)
    definition_archive(definition=definition)
    messages.success(request, f"Score “{definition.name}” archived: it is no longer computed nor shown.")
    return redirect("evaluation:task_set_scores", definition.task_set_id)


@require_POST
@role_required(Role.OPERATOR)
def task_set_score(request, task_set_id: int):
    task_set = get_object_or_404(TaskSet, pk=task_set_id)
    try:
        task_set_score_start(task_set=task_set, user=request.user)
    except ScoringRefused as exc:
        messages.error(request, f"Nothing scored: {exc}.")
    return redirect("evaluation:task_set_scores", task_set.pk)


@require_POST
@role_required(Role.OPERATOR)
def run_score(request, run_id: int):
    """Score the run in the background: its page shows the job's progress in the custom-scores card."""
    run = get_object_or_404(EvaluationRun, pk=run_id)
    try:
        run_score_start(run=run, user=request.user)
    except ScoringRefused as exc:
        messages.error(request, f"Nothing scored: {exc}.")
    return redirect(f"{run.get_absolute_url()}#custom-scores")
