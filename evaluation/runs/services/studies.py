"""From runs to studies. A run's (or one episode's) conversations go to an annotation campaign
through annotation's services, as a background job (memweb.jobs) since a big run's take longer
than a request: people write the human feedback first, then judge it blind against the episode's
simulated feedback. A failing episode's task can be kept in a task set,
with where it came from."""
import json
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import QuerySet
from django.urls import reverse

from annotation.services import (
    CampaignStateError,
    campaign_create_named,
    campaign_find,
    campaigns_addable,
    conversations_add,
)
from evaluation.feedback.formulas import LONG_OUTPUT_TOKENS
from evaluation.feedback.services import episode_judged, evaluation_context
from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, RunEpisode
from evaluation.services import TasksCopied, task_summary, tasks_copy_into
from memweb.jobs import JobContext, JobFailed, job_start
from memweb.models import Job

CAMPAIGN_JOB = "evaluation.episodes_to_campaign"
# Episodes per transaction and progress report: 200 took 0.5-0.8 s on a loaded 2-core machine.
CAMPAIGN_BATCH = 100
MAX_EPISODES = 200  # per task-set copy: the tasks of the first 200 episodes (in the request)
SHOWN_IDS = 10  # episode ids named in a message; the count covers the rest
SELECTIONS = (("failing", "failing episodes"), ("all", "all episodes"), ("trial", "one trial's episodes"))
WORDS_PER_TOKEN = 0.75  # a rough English ratio: enough to tell a long input from a short one


class StudyError(ValueError):
    """The selection or the target cannot be used; the message says why, `field` which input it is."""

    def __init__(self, message: str, *, field: str = "which"):
        super().__init__(message)
        self.field = field


def run_episodes_select(*, run: EvaluationRun, which: str, trial: int | None = None) -> QuerySet[Episode]:
    """The run's finished episodes (infrastructure errors aside): failing ones, all, or one trial's."""
    rows = RunEpisode.objects.filter(run=run, status=RunEpisode.Status.DONE, episode__isnull=False)
    if which == "failing":
        rows = rows.filter(success=False)
    elif which == "trial":
        if trial is None or not rows.filter(trial__number=trial).exists():
            raise StudyError(f"run #{run.pk} has no finished episode in trial {trial}", field="trial")
        rows = rows.filter(trial__number=trial)
    elif which != "all":
        raise StudyError(f"choose one of: {', '.join(label for _, label in SELECTIONS)}")
    episodes = Episode.objects.filter(pk__in=rows.values("episode_id")).order_by("pk")
    if not episodes.exists():
        raise StudyError(f"run #{run.pk} has no {dict(SELECTIONS)[which]} to add")
    return episodes


def study_selection(*, run: EvaluationRun | None = None, episode: Episode | None = None, which: str = "failing",
                    trial: int | None = None) -> dict:
    """A selection of episodes as a job keeps it (ids and names, not the episodes): one episode, or a
    run's failing, all or one trial's episodes. Raises StudyError when it selects nothing."""
    if episode is not None:
        return {"episode_id": episode.pk}
    run_episodes_select(run=run, which=which, trial=trial)
    return {"run_id": run.pk, "which": which, "trial": trial}


def study_episodes(*, selection: dict, workspace) -> QuerySet[Episode]:
    """The `workspace`'s episodes a `study_selection` names. Raises StudyError when they are gone."""
    if "episode_id" in selection:
        return Episode.objects.of(workspace).filter(pk=selection["episode_id"])
    run = EvaluationRun.objects.of(workspace).filter(pk=selection["run_id"]).first()
    if run is None:
        raise StudyError(f"run #{selection['run_id']} no longer exists")
    return run_episodes_select(run=run, which=selection["which"], trial=selection["trial"])


def _with_feedback_check(episodes: QuerySet[Episode]) -> None:
    """Episodes without simulated feedback have nothing to be compared with; a selection with none at
    all is refused before anything is made."""
    if not episodes.filter(simulated_feedback__isnull=False).exists():
        ids = list(episodes.values_list("pk", flat=True)[:SHOWN_IDS + 1])
        named = ", ".join(f"#{pk}" for pk in ids[:SHOWN_IDS]) + (" and more" if len(ids) > SHOWN_IDS else "")
        raise StudyError(f"no simulated feedback to compare with on episode {named}; generate it on the "
                         "episode's page, or run with simulated feedback on")


def episodes_to_campaign_start(*, selection: dict, campaign_id: int | None, workspace, new_name: str = "",
                               user=None) -> Job:
    """Check the selection (`study_selection`) and the target now, make the new draft campaign if one
    is named, and queue the adding as a job (any number of episodes, in batches). Raises StudyError."""
    episodes = study_episodes(selection=selection, workspace=workspace)
    _with_feedback_check(episodes)
    with transaction.atomic():
        campaign = _campaign_target(campaign_id, new_name, user, workspace)
        n = episodes.count()
        return job_start(kind=CAMPAIGN_JOB, title=f"{n} episode{'s' if n != 1 else ''} into campaign “{campaign.name}”",
                         payload={"selection": selection, "campaign_id": campaign.pk}, user=user, workspace=workspace)


@dataclass
class _Tally:
    created: int = 0
    duplicates: int = 0
    without_feedback: list[int] = field(default_factory=list)

    def link_text(self, name: str) -> str:
        parts = [f"{self.created} added"] + ([f"{self.duplicates} already in it"] if self.duplicates else []) + (
            [f"{len(self.without_feedback)} without simulated feedback left out "
             f"({', '.join(f'#{pk}' for pk in self.without_feedback[:SHOWN_IDS])}"
             f"{' …' if len(self.without_feedback) > SHOWN_IDS else ''})"] if self.without_feedback else [])
        return f"Open campaign “{name}”: {', '.join(parts)}"


def _batch_add(campaign, episode_ids: list[int], tally: _Tally) -> None:
    """One batch in one transaction: added whole or not at all. Episodes the campaign holds already
    (a re-delivered job's earlier batches) are counted, never added twice."""
    episodes = Episode.objects.filter(pk__in=episode_ids).select_related(
        "task", "simulated_feedback", "run_episode__trial").order_by("pk")
    with_feedback = [episode for episode in episodes if _feedback_of(episode) is not None]
    tally.without_feedback += [episode.pk for episode in episodes if _feedback_of(episode) is None]
    if not with_feedback:
        return
    with transaction.atomic():
        added = conversations_add(campaign=campaign, conversations=[_conversation(e) for e in with_feedback])
    if not added.ok:
        problems = "; ".join(f"row {p.row} {p.field}: {p.reason}" for p in added.report.problems[:SHOWN_IDS])
        raise JobFailed(f"{tally.created} added before a batch was refused: {problems}")
    tally.created += added.report.created
    tally.duplicates += len(added.duplicates)


def episodes_to_campaign_job(context: JobContext, *, selection: dict, campaign_id: int) -> dict:
    """The job: the selected episodes' conversations into the campaign, CAMPAIGN_BATCH at a time."""
    campaign = campaign_find(campaign_id=campaign_id, workspace=context.workspace)
    if campaign is None:
        raise JobFailed(f"campaign #{campaign_id} no longer exists; nothing was added")
    try:
        ids = list(study_episodes(selection=selection, workspace=context.workspace).values_list("pk", flat=True))
    except StudyError as error:
        raise JobFailed(f"Nothing added: {error}") from None
    tally = _Tally()
    context.progress(0, len(ids), f"Adding {len(ids)} episodes to “{campaign.name}”.")
    for start in range(0, len(ids), CAMPAIGN_BATCH):
        _batch_add(campaign, ids[start:start + CAMPAIGN_BATCH], tally)
        done = min(start + CAMPAIGN_BATCH, len(ids))
        context.progress(done, len(ids), f"{done} of {len(ids)} episodes done; {tally.created} added.")
    return {"url": reverse("annotation:campaign_detail", args=[campaign.pk]), "link_text": tally.link_text(campaign.name),
            "campaign": campaign.pk, "created": tally.created, "duplicates": tally.duplicates,
            "without_feedback": tally.without_feedback}


def _campaign_target(campaign_id: int | None, new_name: str, user, workspace):
    if new_name.strip():
        try:
            return campaign_create_named(name=new_name, user=user, workspace=workspace)
        except CampaignStateError as error:
            raise StudyError(str(error), field="new_campaign") from None
    if campaign_id is None:
        raise StudyError("choose a campaign, or name a new one", field="campaign_id")
    campaign = campaigns_addable(workspace=workspace).filter(pk=campaign_id).first()
    if campaign is None:
        raise StudyError(f"no open or draft campaign #{campaign_id} here; choose another, or name a new one",
                         field="campaign_id")
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
        copies.append((episode.task_snapshot, _provenance(episode), episode.task.environment))
    return tasks_copy_into(task_set_name=task_set_name, copies=copies, workspace=workspace)


def _provenance(episode: Episode) -> dict:
    place = getattr(episode, "run_episode", None)
    return {"episode": episode.pk, "task": str(episode.task), "run": place.run_id if place else None,
            "trial": place.trial.number if place else None}
