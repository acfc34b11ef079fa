"""Re-grading a stale run: its stored trajectories scored again against the current gold of its
tasks, as a background job (memweb.jobs), the new verdicts stored beside the originals.

Only scores change. Each episode's tool calls are replayed on a fresh copy of the world it was
played on and its replies read from the transcript (its environment's `rescore`);
nothing is played again, so a changed instruction is not what the customer said in the stored
conversation, and the memory the run wrote (Orbs, DMRM steps) is not written again.
"""
from django.db import transaction

from evaluation.environments import environment
from evaluation.models import Task
from evaluation.runs.models import EvaluationRun, RegradeScore, RunEpisode, RunRegrade
from evaluation.runs.services.pins import run_environment, run_regrade_current, run_staleness
from evaluation.runs.services.results import Verdicts, run_metrics_compute
from memweb.jobs import JobContext, JobFailed, job_start
from memweb.models import Job

REGRADE_JOB = "evaluation.run_regrade"
PROGRESS_EVERY = 50  # episodes between two progress reports


class RegradeRefused(ValueError):
    """The run cannot be re-graded (the message says why)."""


def run_regrade_job_active(*, run: EvaluationRun) -> Job | None:
    return Job.objects.filter(kind=REGRADE_JOB, payload__run_id=run.pk,
                              status__in=(Job.Status.QUEUED, Job.Status.RUNNING)).first()


def _refusal(run: EvaluationRun) -> str:
    if run.imported:
        return f"run #{run.pk} was imported: it has no stored trajectories to score again"
    if run.is_active:
        return f"run #{run.pk} is still {run.get_status_display()}; re-grade it once it has finished or been cancelled"
    if not run_staleness(run=run)["stale"]:
        return f"run #{run.pk} is not stale: it was scored against the current versions of its tasks and reward"
    if run_regrade_current(run=run) is not None:
        return f"run #{run.pk} has been re-graded against the current versions already"
    return ""


def run_regrade_start(*, run: EvaluationRun, user=None) -> Job:
    """Queue the re-grade of a stale run, or hand back the one queued or running already.
    Raises RegradeRefused when the run cannot be re-graded."""
    active = run_regrade_job_active(run=run)
    if active is not None:
        return active
    refusal = _refusal(run)
    if refusal:
        raise RegradeRefused(refusal)
    return job_start(kind=REGRADE_JOB, title=f"Re-grade of run #{run.pk} {run.name}", payload={"run_id": run.pk},
                     workspace=run.workspace, user=user)


def _rescored(row: RunEpisode, task: Task) -> RegradeScore:
    episode = row.episode
    result = environment(task.environment).rescore(task=task.spec, transcript=episode.transcript,
                                                   played=episode.task_snapshot)
    return RegradeScore(run_episode=row, success=result.success, reward=result.reward,
                        reward_breakdown=result.breakdown)


def run_regrade_job(context: JobContext, *, run_id: int) -> dict:
    """The job: score every finished episode of the run again (progress per batch), then write the
    re-grade, its scores and the versions it used in one transaction."""
    run = EvaluationRun.objects.of(context.workspace).filter(pk=run_id).first()
    if run is None:
        raise JobFailed(f"run #{run_id} no longer exists")
    tasks = {task.pk: task for task in Task.objects.filter(pk__in=run.task_pks)}
    rows = run.run_episodes.filter(status=RunEpisode.Status.DONE, episode__isnull=False).select_related("episode")
    total = rows.count()
    context.progress(0, total, f"Scoring {total} stored trajectories again.")
    scores = []
    for done, row in enumerate(rows.order_by("pk").iterator(chunk_size=PROGRESS_EVERY), start=1):
        scores.append(_rescored(row, tasks[row.task_id]))
        if done % PROGRESS_EVERY == 0:
            context.progress(done, total, f"{done} of {total} trajectories scored again.")
    regrade = _regrade_write(run, tasks, scores, context.user)
    link_text = f"Open run #{run.pk}: {regrade.changed} of {regrade.episodes} verdicts changed"
    return {"url": run.get_absolute_url(), "link_text": link_text, "regrade": regrade.pk,
            "episodes": regrade.episodes, "changed": regrade.changed}


@transaction.atomic
def _regrade_write(run: EvaluationRun, tasks: dict[int, Task], scores: list[RegradeScore], user) -> RunRegrade:
    originals = dict(run.run_episodes.filter(pk__in=[s.run_episode_id for s in scores]).values_list("pk", "success"))
    verdicts: Verdicts = {score.run_episode_id: (score.success, score.reward) for score in scores}
    regrade = RunRegrade.objects.create(
        run=run, task_versions={task.external_id: task.version for task in tasks.values()},
        reward_version=run_environment(run).reward_version, episodes=len(scores), created_by=user,
        changed=sum(originals[score.run_episode_id] != score.success for score in scores),
        metrics=run_metrics_compute(run=run, trials=run.metrics_trials, verdicts=verdicts) if run.metrics_trials
        else None, metrics_trials=run.metrics_trials)
    for score in scores:
        score.regrade = regrade
    RegradeScore.objects.bulk_create(scores)
    for task in tasks.values():
        run.task_pins.filter(task=task).update(regraded_version=task.version)
    return regrade


def regrade_verdicts(*, regrade: RunRegrade) -> Verdicts:
    return {pk: (success, reward) for pk, success, reward in
            regrade.scores.values_list("run_episode_id", "success", "reward")}


def regrade_flips(*, regrade: RunRegrade) -> list[dict]:
    """The episodes whose verdict the re-grade changed: task, trial, before, after, episode id."""
    rows = regrade.scores.select_related("run_episode__trial").order_by("run_episode__task_key",
                                                                        "run_episode__trial__number")
    return [{"task": score.run_episode.task_key, "trial": score.run_episode.trial.number,
             "before": score.run_episode.success, "after": score.success, "episode": score.run_episode.episode_id}
            for score in rows if score.run_episode.success != score.success]


def regrade_side_by_side(*, run: EvaluationRun, regrade: RunRegrade) -> dict:
    """Original and re-graded per-trial success and Pass^k, row by row, for the run page."""
    before, after = run.metrics or {}, regrade.metrics or {}
    return {name: [{"x": x, "before": value, "after": new}
                   for x, value, new in zip(before.get(name, {}).get("x", []), before.get(name, {}).get("value", []),
                                            after.get(name, {}).get("value", []))]
            for name in ("per_trial", "pass_k")}
