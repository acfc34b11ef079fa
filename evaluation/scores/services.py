"""Custom scores: defining them on a task set, scoring episodes as a background job (memweb.jobs), and
the summaries the run, episode and compare pages show beside the reward.

Scoring reads only what is stored (transcript, turns, ending): nothing is played again. Only
finished episodes of finished runs are scored; a run still playing is scored once it has ended.
"""
from statistics import fmean

from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify

from evaluation.models import Episode, Task, TaskSet
from evaluation.runs.models import EvaluationRun, RunEpisode
from evaluation.scores.kinds import ScoreConfigInvalid, config_validated, episode_scored
from evaluation.scores.models import EpisodeScore, ScoreDefinition, ScoreKind
from memweb.jobs import JobContext, JobFailed, job_start
from memweb.models import Job

RUN_SCORE_JOB = "evaluation.run_score"
TASK_SET_SCORE_JOB = "evaluation.task_set_score"
PROGRESS_EVERY = 20  # episodes between two progress reports
FINISHED_RUN = (EvaluationRun.Status.COMPLETED, EvaluationRun.Status.FAILED, EvaluationRun.Status.CANCELLED)
NAME_CHARS = ScoreDefinition._meta.get_field("name").max_length


class ScoringRefused(ValueError):
    """Nothing can be scored (the message says why)."""


# --- definitions -----------------------------------------------------------------------

def _name_checked(task_set: TaskSet, name: str, errors: dict) -> tuple[str, str]:
    name = (name or "").strip()
    slug = slugify(name)[:NAME_CHARS]
    if not name:
        errors["name"] = "a name is required"
    elif len(name) > NAME_CHARS:
        errors["name"] = f"at most {NAME_CHARS} characters"
    elif not slug:
        errors["name"] = "must hold at least one letter or digit"
    elif task_set.score_definitions.filter(Q(name=name) | Q(slug=slug), archived=False).exists():
        errors["name"] = f"the task set {task_set.name} has a score named {name!r} already"
    return name, slug


def definition_create(*, task_set: TaskSet, name: str, kind: str, config: dict, user=None) -> ScoreDefinition:
    """A new score of the task set. ScoreConfigInvalid names every bad field (name, kind or a setting);
    nothing is saved then."""
    errors: dict[str, str] = {}
    name, slug = _name_checked(task_set, name, errors)
    try:
        cleaned = config_validated(kind, config)
    except ScoreConfigInvalid as invalid:
        errors |= invalid.errors
    if errors:
        raise ScoreConfigInvalid(errors)
    return ScoreDefinition.objects.create(task_set=task_set, name=name, slug=slug, kind=kind, config=cleaned,
                                          created_by=user if getattr(user, "is_authenticated", False) else None)


def definition_archive(*, definition: ScoreDefinition) -> ScoreDefinition:
    """Hidden from the pages and no longer computed; its stored scores are kept with it."""
    definition.archived = True
    definition.save(update_fields=["archived"])
    return definition


def definition_describe(definition: ScoreDefinition) -> str:
    """What the score checks, in a line."""
    config = definition.config
    if definition.kind == ScoreKind.REPLY_MATCHES:
        verb = "must" if config["mode"] == "must" else "must not"
        return f"an agent reply {verb} match /{config['pattern']}/"
    if definition.kind == ScoreKind.TOOL_CALLED:
        if config["mode"] == "must_not":
            return f"{config['tool']} must not be called"
        bounds = f"at least {config.get('min_count') or 1}" + (
            f", at most {config['max_count']}" if config.get("max_count") else "")
        return f"{config['tool']} must be called ({bounds} times)"
    if definition.kind == ScoreKind.TURNS_AT_MOST:
        return f"at most {config['turns']} turns"
    if definition.kind == ScoreKind.ENDED_BY:
        return f"ended by {Episode.EndedBy(config['ended_by']).label}"
    scale = "pass / fail" if config["scale"] == "pass_fail" else "1 to 5"
    return f"LLM judge ({scale}): {config['rubric']}"


# --- scoring ---------------------------------------------------------------------------

def _active_job(kind: str, key: str, pk: int) -> Job | None:
    return Job.objects.filter(kind=kind, status__in=(Job.Status.QUEUED, Job.Status.RUNNING),
                              **{f"payload__{key}": pk}).first()


def run_score_job_active(*, run: EvaluationRun) -> Job | None:
    return _active_job(RUN_SCORE_JOB, "run_id", run.pk)


def task_set_score_job_active(*, task_set: TaskSet) -> Job | None:
    return _active_job(TASK_SET_SCORE_JOB, "task_set_id", task_set.pk)


def run_definitions(*, run: EvaluationRun):
    """The active scores of the task sets the run's tasks belong to."""
    task_sets = Task.objects.filter(run_episodes__run=run).values("task_set")
    return ScoreDefinition.objects.filter(task_set__in=task_sets, archived=False)


def run_score_start(*, run: EvaluationRun, user=None) -> Job:
    """Queue the scoring of a finished run (or hand back the job already queued or running).
    Raises ScoringRefused when there is nothing to score."""
    active = run_score_job_active(run=run)
    if active is not None:
        return active
    if run.imported:
        raise ScoringRefused(f"run #{run.pk} was imported: it has no stored transcripts to score")
    if run.is_active:
        raise ScoringRefused(f"run #{run.pk} is still {run.get_status_display()}; score it once it has finished")
    if not run_definitions(run=run).exists():
        raise ScoringRefused(f"the task set of run #{run.pk} has no custom scores yet: define one on its page")
    return job_start(kind=RUN_SCORE_JOB, title=f"Custom scores of run #{run.pk} {run.name}",
                     payload={"run_id": run.pk}, workspace=run.workspace, user=user)


def task_set_score_start(*, task_set: TaskSet, user=None) -> Job:
    """Queue the scoring of every finished run's episodes of the task set (after a score was defined)."""
    active = task_set_score_job_active(task_set=task_set)
    if active is not None:
        return active
    if not task_set.score_definitions.filter(archived=False).exists():
        raise ScoringRefused(f"the task set {task_set.name} has no custom scores to compute")
    return job_start(kind=TASK_SET_SCORE_JOB, title=f"Custom scores of the episodes of {task_set.name}",
                     payload={"task_set_id": task_set.pk}, workspace=task_set.workspace, user=user)


def _finished_episodes(runs):
    return Episode.objects.filter(run_episode__run__in=runs, run_episode__status=RunEpisode.Status.DONE,
                                  run_episode__run__status__in=FINISHED_RUN).select_related("task")


def _episode_write(episode: Episode, definitions: list[ScoreDefinition]) -> None:
    """All of one episode's scores at once, replacing any earlier ones (a re-run leaves one row each).
    A judge is asked before the transaction opens, so no LLM call holds it."""
    results = [(definition, episode_scored(kind=definition.kind, config=definition.config, episode=episode))
               for definition in definitions]
    with transaction.atomic():
        for definition, result in results:
            EpisodeScore.objects.update_or_create(
                definition=definition, episode=episode,
                defaults={"value": result.value, "passed": result.passed, "explanation": result.explanation,
                          "status": result.status, "judge": result.judge, "scored_at": timezone.now()})


def _episodes_score(context: JobContext, episodes, definitions) -> int:
    by_set: dict[int, list[ScoreDefinition]] = {}
    for definition in definitions:
        by_set.setdefault(definition.task_set_id, []).append(definition)
    total = episodes.count()
    context.progress(0, total, f"Scoring {total} episodes.")
    for done, episode in enumerate(episodes.order_by("pk").iterator(chunk_size=PROGRESS_EVERY), start=1):
        _episode_write(episode, by_set.get(episode.task.task_set_id, []))
        if done % PROGRESS_EVERY == 0 or done == total:
            context.progress(done, total, f"{done} of {total} episodes scored.")
    return total


def run_score_job(context: JobContext, *, run_id: int) -> dict:
    """The job: every active custom score of the run's task sets over its finished episodes."""
    run = EvaluationRun.objects.of(context.workspace).filter(pk=run_id).first()
    if run is None:
        raise JobFailed(f"run #{run_id} no longer exists")
    definitions = list(run_definitions(run=run))
    if not definitions:
        raise JobFailed(f"the task set of run #{run_id} has no custom scores (were they archived meanwhile?)")
    scored = _episodes_score(context, _finished_episodes([run]), definitions)
    return {"url": run.get_absolute_url(), "link_text": f"Open run #{run.pk}: {scored} episodes scored",
            "episodes": scored, "scores": len(definitions)}


def task_set_score_job(context: JobContext, *, task_set_id: int) -> dict:
    """The job: the task set's active scores over the finished episodes of every run played on it."""
    task_set = TaskSet.objects.of(context.workspace).filter(pk=task_set_id).first()
    if task_set is None:
        raise JobFailed(f"task set #{task_set_id} no longer exists")
    definitions = list(task_set.score_definitions.filter(archived=False))
    runs = EvaluationRun.objects.filter(run_episodes__task__task_set=task_set).distinct()
    episodes = _finished_episodes(runs).filter(task__task_set=task_set)
    scored = _episodes_score(context, episodes, definitions)
    return {"url": reverse("evaluation:task_set_scores", args=[task_set.pk]),
            "link_text": f"Open the scores of {task_set.name}: {scored} episodes scored", "episodes": scored}


# --- summaries -------------------------------------------------------------------------

def judge_label(definition: ScoreDefinition, judges: set[str]) -> str:
    """Who gave the values: the rule itself, or the judge model(s)."""
    if definition.kind != ScoreKind.LLM_JUDGE:
        return "rule over the stored transcript"
    return f"LLM judge {', '.join(sorted(judges))}" if judges else "LLM judge"


def _summary(definition: ScoreDefinition, scores: list[EpisodeScore]) -> dict:
    values = [s.value for s in scores if s.status == EpisodeScore.Status.SCORED and s.value is not None]
    passed = [s.passed for s in scores if s.status == EpisodeScore.Status.SCORED and s.passed is not None]
    counts = {status: sum(s.status == status for s in scores) for status in EpisodeScore.Status.values}
    return {"definition": definition, "id": definition.pk, "name": definition.name, "slug": definition.slug,
            "kind": definition.kind, "describe": definition_describe(definition),
            "pass_fail": definition.is_pass_fail, "mean": fmean(values) if values else None,
            "pass_rate": sum(passed) / len(passed) if passed else None,
            "scored": counts["scored"], "not_judged": counts["not_judged"], "errors": counts["error"],
            "judge": judge_label(definition, {s.judge for s in scores if s.judge})}


def run_scores_summary(*, run: EvaluationRun) -> list[dict]:
    """Per active definition of the run's task sets: mean, pass rate, how many episodes were scored,
    not judged (offline judge) or failed to score."""
    scores = EpisodeScore.objects.filter(episode__run_episode__run=run).only(
        "definition_id", "value", "passed", "status", "judge")
    by_definition: dict[int, list[EpisodeScore]] = {}
    for score in scores:
        by_definition.setdefault(score.definition_id, []).append(score)
    return [_summary(d, by_definition.get(d.pk, [])) for d in run_definitions(run=run).order_by("name")]


def run_scores(*, run: EvaluationRun):
    """The run's stored scores, one row per (definition, episode), with what the API lists."""
    return (EpisodeScore.objects.filter(episode__run_episode__run=run, definition__archived=False)
            .select_related("definition", "episode__run_episode__trial").order_by("episode_id", "definition__name"))


def episode_scores(*, episode: Episode) -> list[EpisodeScore]:
    return list(episode.custom_scores.filter(definition__archived=False).select_related("definition")
                .order_by("definition__name"))


def runs_scores_compare(*, runs: list[EvaluationRun]) -> list[dict]:
    """Each score defined on any of the runs' task sets, with its mean (and pass rate) per run, in the
    runs' order; a run with no scored episode of it has None."""
    summaries = [{row["id"]: row for row in run_scores_summary(run=run)} for run in runs]
    definitions = {pk: row for summary in summaries for pk, row in summary.items()}
    return [{"name": row["name"], "pass_fail": row["pass_fail"], "judge": row["judge"],
             "arms": [summary.get(pk) for summary in summaries]}
            for pk, row in sorted(definitions.items(), key=lambda item: item[1]["name"])]
