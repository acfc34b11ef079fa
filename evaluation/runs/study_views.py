"""From runs to studies: the run page's and the episode page's "add to an annotation campaign"
and "add to a task set" (operators only). The forms load into those pages with htmx."""
from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from evaluation.models import Episode
from evaluation.runs.forms import CampaignTargetForm, TaskSetTargetForm
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import (
    MAX_EPISODES,
    SHOWN_IDS,
    StudyError,
    episodes_to_campaign_start,
    episodes_to_task_set,
    study_episodes,
    study_selection,
)
from evaluation.services import TaskCopyError
from memweb.roles import Role, role_required


@require_GET
@role_required(Role.OPERATOR)
def run_study_forms(request, run_id: int):
    run = get_object_or_404(EvaluationRun, pk=run_id)
    return _forms(request, {"run": run, "trials": range(1, run.run_spec.trials + 1)})


@require_GET
@role_required(Role.OPERATOR)
def episode_study_forms(request, episode_id: int):
    return _forms(request, {"episode": get_object_or_404(Episode, pk=episode_id)})


def _forms(request, context: dict):
    context |= {"campaign_form": CampaignTargetForm(auto_id="campaign-%s", workspace=request.workspace),
                "task_set_form": TaskSetTargetForm(auto_id="task-set-%s", workspace=request.workspace),
                "max_episodes": MAX_EPISODES}
    return render(request, "evaluation/runs/_to_study.html", context)


@require_POST
@role_required(Role.OPERATOR)
def run_keep(request, run_id: int, target: str):
    """The run's selected episodes into a campaign or a task set (`target`)."""
    run = get_object_or_404(EvaluationRun, pk=run_id)
    return _keeper(target)(request, run)


@require_POST
@role_required(Role.OPERATOR)
def episode_keep(request, episode_id: int, target: str):
    episode = get_object_or_404(Episode, pk=episode_id)
    return _keeper(target)(request, episode)


def _keeper(target: str):
    keepers = {"campaign": _to_campaign, "task-set": _to_task_set}
    if target not in keepers:
        raise Http404(f"nothing to add episodes to called {target!r}")
    return keepers[target]


def _selection(source, form) -> dict:
    """The episode, or the run's episodes the posted form selects (failing ones unless it says otherwise)."""
    if isinstance(source, Episode):
        return study_selection(episode=source)
    return study_selection(run=source, which=form.cleaned_data["which"] or "failing", trial=form.cleaned_data["trial"])


def _to_campaign(request, source):
    """Back to the source page with the reason on any refusal; to the job's page once it is queued
    (its card links to the campaign when done)."""
    form = CampaignTargetForm(request.POST, workspace=request.workspace)
    if not form.is_valid():
        messages.error(request, f"Nothing added to a campaign: {form.problems()}")
        return redirect(source)
    try:
        job = episodes_to_campaign_start(selection=_selection(source, form), campaign_id=form.cleaned_data["campaign"],
                                         new_name=form.cleaned_data["new_campaign"], user=request.user,
                                         workspace=request.workspace)
    except StudyError as error:
        messages.error(request, f"Nothing added to a campaign: {error}")
        return redirect(source)
    return redirect("job_detail", job.pk)


def _to_task_set(request, source):
    form = TaskSetTargetForm(request.POST, workspace=request.workspace)
    if not form.is_valid():
        messages.error(request, f"No task copied: {form.problems()}")
        return redirect(source)
    try:
        episodes = study_episodes(selection=_selection(source, form), workspace=request.workspace)
        copied = episodes_to_task_set(episodes=episodes, task_set_name=form.task_set_name, workspace=request.workspace)
    except (StudyError, TaskCopyError) as error:
        messages.error(request, f"No task copied: {error}")
        return redirect(source)
    if copied.created:
        messages.success(request, f"Copied {len(copied.created)} task{'s' if len(copied.created) != 1 else ''} into "
                                  f"the task set “{copied.task_set.name}”: {_named(copied.created)}.")
    if copied.duplicates:
        level = messages.warning if copied.created else messages.error
        level(request, f"Already in “{copied.task_set.name}”, not copied again: {_named(copied.duplicates)}.")
    return redirect(source)


def _named(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_IDS])
    return shown + (f" and {len(names) - SHOWN_IDS} more" if len(names) > SHOWN_IDS else "")
