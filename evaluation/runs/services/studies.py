"""From runs to studies. A run's (or one episode's) conversations go to an annotation campaign
through annotation's services: people write the human feedback first, then judge it blind
against the episode's simulated feedback. A failing episode's task can be kept in a task set,
with where it came from."""
import json
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import QuerySet
from django.urls import reverse

from annotation.services import (
    CampaignStateError,
    ConversationsAdded,
    campaign_create_named,
    campaign_find,
    conversations_add,
)
from evaluation.feedback.formulas import LONG_OUTPUT_TOKENS
from evaluation.feedback.services import episode_judged, evaluation_context
from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, RunEpisode
from evaluation.services import TasksCopied, task_summary, tasks_copy_into

MAX_EPISODES = 200  # per request: 0.5-0.8 s measured on a loaded 2-core machine; bigger runs go a trial at a time
SELECTIONS = (("failing", "failing episodes"), ("all", "all episodes"), ("trial", "one trial's episodes"))
WORDS_PER_TOKEN = 0.75  # a rough English ratio: enough to tell a long input from a short one


class StudyError(ValueError):
    """The selection or the target cannot be used; the message says why."""


def run_episodes_select(*, run: EvaluationRun, which: str, trial: int | None = None) -> QuerySet[Episode]:
    """The run's finished episodes (infrastructure errors aside): failing ones, all, or one trial's."""
    rows = RunEpisode.objects.filter(run=run, status=RunEpisode.Status.DONE, episode__isnull=False)
    if which == "failing":
        rows = rows.filter(success=False)
    elif which == "trial":
        if trial is None or not rows.filter(trial__number=trial).exists():
            raise StudyError(f"run #{run.pk} has no finished episode in trial {trial}")
        rows = rows.filter(trial__number=trial)
    elif which != "all":
        raise StudyError(f"choose one of: {', '.join(label for _, label in SELECTIONS)}")
    episodes = Episode.objects.filter(pk__in=rows.values("episode_id")).order_by("pk")
    if not episodes.exists():
        raise StudyError(f"run #{run.pk} has no {dict(SELECTIONS)[which]} to add")
    return episodes


@dataclass
class StudyAdded:
    campaign: object
    added: ConversationsAdded | None
    without_feedback: list[int] = field(default_factory=list)

    @property
    def created(self) -> int:
        return self.added.report.created if self.added else 0


def episodes_to_campaign(*, episodes: QuerySet[Episode], campaign_id: int | None, workspace, new_name: str = "",
                         user=None) -> StudyAdded:
    """Add the episodes' conversations to the `workspace`'s campaign chosen (or a new draft one).
    Episodes without simulated feedback have nothing to compare with and are named, not added."""
    episodes = list(episodes.select_related("task", "simulated_feedback", "run_episode__trial")[:MAX_EPISODES + 1])
    if len(episodes) > MAX_EPISODES:
        raise StudyError(f"more than {MAX_EPISODES} episodes at once; add one trial at a time")
    with_feedback = [episode for episode in episodes if _feedback_of(episode) is not None]
    without = [episode.pk for episode in episodes if _feedback_of(episode) is None]
    with transaction.atomic():
        campaign = _campaign_target(campaign_id, new_name, user, workspace)
        added = conversations_add(campaign=campaign, conversations=[_conversation(e) for e in with_feedback]) \
            if with_feedback else None
        result = StudyAdded(campaign=campaign, added=added, without_feedback=without)
        if not result.created and new_name.strip():
            transaction.set_rollback(True)  # nothing added: no empty campaign left behind either
    return result


def _campaign_target(campaign_id: int | None, new_name: str, user, workspace):
    if new_name.strip():
        try:
            return campaign_create_named(name=new_name, user=user, workspace=workspace)
        except CampaignStateError as error:
            raise StudyError(str(error)) from None
    campaign = campaign_find(campaign_id=campaign_id, workspace=workspace) if campaign_id else None
    if campaign is None:
        raise StudyError("choose a campaign, or name a new one")
    return campaign


def _feedback_of(episode: Episode):
    return getattr(episode, "simulated_feedback", None)


def _conversation(episode: Episode) -> dict:
    """One annotation item: the conversation as the customer saw it up to the judged reply, and
    the simulated user's feedback on that reply."""
    feedback, judged = episode.simulated_feedback, episode_judged(episode)
    lines = [("user" if who == "Customer" else "assistant", text) for who, text in judged.history]
    if judged.response:
        lines.append(("assistant", judged.response))
    return {
        "source_ref": f"episode:{episode.pk}", "source_label": _source_label(episode),
        "source_url": reverse("evaluation:episode_detail", args=[episode.pk]),
        "conversation": [{"role": role, "content": text} for role, text in lines],
        "task_description": task_summary(episode.task_snapshot),
        "evaluation_context": json.dumps(evaluation_context(episode.task_snapshot), ensure_ascii=False, indent=1),
        "simulated_feedback": feedback.critique, "simulated_scripted": feedback.critique_scripted,
        "simulated_score": feedback.score, "simulated_action": feedback.action,
        "language": "en", "domain": episode.task.domain,
        "task_format": _task_format(judged.history, judged.response, feedback.params.get("long_output")),
    }


def _source_label(episode: Episode) -> str:
    place = getattr(episode, "run_episode", None)
    where = f"run #{place.run_id} · trial {place.trial.number} · " if place else ""
    return f"{where}episode #{episode.pk} ({episode.task.external_id})"


def _task_format(history: list[tuple[str, str]], reply: str, long_output: bool | None) -> str:
    """MemoryBench's input/output length formats, from the conversation before the judged reply
    and the reply (long: over LONG_OUTPUT_TOKENS); the feedback's own long-output flag wins."""
    def long(text: str) -> bool:
        return len(text.split()) / WORDS_PER_TOKEN > LONG_OUTPUT_TOKENS
    long_in = long(" ".join(text for _, text in history))
    long_out = long(reply) if long_output is None else bool(long_output)
    return f"{'Li' if long_in else 'Si'}{'Lo' if long_out else 'So'}"


def episodes_to_task_set(*, episodes: QuerySet[Episode], task_set_name: str, workspace) -> TasksCopied:
    """Each episode's task as it ran (its snapshot) into the `workspace`'s set named, once per task,
    with the run, trial and episode it came from."""
    copies, seen = [], set()
    for episode in episodes.select_related("task", "run_episode__trial")[:MAX_EPISODES]:
        if episode.task_snapshot["id"] in seen:
            continue
        seen.add(episode.task_snapshot["id"])
        copies.append((episode.task_snapshot, _provenance(episode)))
    return tasks_copy_into(task_set_name=task_set_name, copies=copies, workspace=workspace)


def _provenance(episode: Episode) -> dict:
    place = getattr(episode, "run_episode", None)
    return {"episode": episode.pk, "task": str(episode.task), "run": place.run_id if place else None,
            "trial": place.trial.number if place else None}
