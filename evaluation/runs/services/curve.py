"""Off-policy feedback learning curves (MemoryBench): the feedback logs of a finished run are
written into a fresh bank in batches, and the run's tasks are played against the bank before the
first batch and after each one. Success against the number of batches written is the curve.

Each point is one Celery message (`curve_step`): a point claims its step with a conditional
update, writes its batch, plays the tasks and stores the point, then queues the next, so the page
shows progress point by point. Every point plays the tasks with the same seeds, so points differ
only in what memory holds.
"""
import logging
import math

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evaluation.configs import MemoryConfig, MemoryKind
from evaluation.feedback.services import feedback_to_orbs
from evaluation.metrics import wilson_interval
from evaluation.models import Episode, Task
from evaluation.runs.models import EvaluationRun, FeedbackCurve, TaskSplit
from evaluation.runs.services.dispatch import inline_drain, inline_work, work_send
from evaluation.runs.services.spec import RunLaunchError
from evaluation.runs.services.splits import learning_rows
from evaluation.services import episode_run
from orbs.services import bank_get_or_create

logger = logging.getLogger(__name__)
Status = FeedbackCurve.Status
MAX_CURVE_BATCHES = 20  # each point replays every task: more points than this is a long job for little shape
CURVE_SEED_OFFSET = 999  # the curve's episodes use their own seed, apart from the run's trials (seed·1000 + trial)


class CurveLaunchError(RunLaunchError):
    """A curve refused; `problems` names the field (run_id or batch_size), nothing was written."""


def _feedback_logs(run: EvaluationRun) -> list[int]:
    """The run's judged episodes in the order they happened: trial by trial, task by task; a
    held-out run's train split only (MemoryBench feeds feedback on training cases only)."""
    rows = learning_rows(run.run_episodes.filter(episode__simulated_feedback__isnull=False))
    return list(rows.order_by("trial__number", "task_key").values_list("episode_id", flat=True))


def _test_task_pks(run: EvaluationRun) -> list[int]:
    """The tasks each point plays: a held-out run's test split, whose tasks wrote no feedback logs."""
    if not run.held_out:
        return list(run.task_pks)
    tests = [key for key, split in run.task_splits.items() if split == TaskSplit.TEST]
    return list(Task.objects.filter(pk__in=run.task_pks, external_id__in=tests).values_list("pk", flat=True))


def _check(run: EvaluationRun, batch_size: int | None, logs: list[int]) -> int:
    """The batch size to use; CurveLaunchError naming the field otherwise."""
    if run.status != EvaluationRun.Status.COMPLETED or run.imported:
        raise CurveLaunchError([("run_id", f"run #{run.pk} is {run.get_status_display()}"
                                           f"{' (imported)' if run.imported else ''}; a learning curve needs a "
                                           "completed run played here")])
    if not run.run_spec.feedback_enabled or not logs:
        raise CurveLaunchError([("run_id", f"run #{run.pk} has no simulated feedback to write into memory")])
    size = batch_size or len(run.task_pks) - run.split_counts()[TaskSplit.TEST] or 1
    if size < 1 or math.ceil(len(logs) / size) > MAX_CURVE_BATCHES:
        raise CurveLaunchError([("batch_size", f"must be at least {math.ceil(len(logs) / MAX_CURVE_BATCHES)} "
                                               f"(at most {MAX_CURVE_BATCHES} batches of the {len(logs)} feedback "
                                               f"logs), got {size}")])
    return size


def curve_launch(*, run: EvaluationRun, batch_size: int | None = None, user=None) -> FeedbackCurve:
    """Create the curve with its fresh bank and queue its first point. `batch_size` empty: one
    trial's worth of logs (the run's train task count) per batch."""
    logs = _feedback_logs(run)
    size = _check(run, batch_size, logs)
    with transaction.atomic():
        curve = FeedbackCurve.objects.create(
            run=run, batch_size=size, batches=math.ceil(len(logs) / size), feedback_episode_ids=logs,
            test_task_pks=_test_task_pks(run), seed=run.run_spec.seed * 1000 + CURVE_SEED_OFFSET, scripted=run.scripted,
            created_by=user)
        curve.bank = bank_get_or_create(
            name=f"learning curve #{curve.pk} · run #{run.pk}", approved_only=False, retrieval_k=run.run_spec.memory_k,
            description=f"Off-policy feedback of evaluation run #{run.pk}, written in batches of {size}.")
        curve.save(update_fields=["bank"])
        work_send("curve", curve_id=curve.pk)
    return curve


def curve_step(*, curve_id: int) -> None:
    """Measure the next point (a second delivery of the same message finds it claimed)."""
    curve = FeedbackCurve.objects.select_related("run", "bank").filter(pk=curve_id, status__in=FeedbackCurve.ACTIVE).first()
    if curve is None:
        return
    step = curve.steps_started
    if step >= curve.steps or not FeedbackCurve.objects.filter(pk=curve.pk, steps_started=step).update(
            steps_started=F("steps_started") + 1, status=Status.RUNNING):
        return
    try:
        point = _point(curve, step)
    except Exception as exc:  # recorded on the curve for the operator, as a run records a failed trial end
        logger.exception("learning curve %s failed at point %s", curve.pk, step)
        FeedbackCurve.objects.filter(pk=curve.pk).update(status=Status.FAILED, finished_at=timezone.now(),
                                                         status_message=f"point {step}: {type(exc).__name__}: {exc}")
        return
    _point_store(curve, point)


def _point(curve: FeedbackCurve, step: int) -> dict:
    """Write batch `step` (none at step 0), then play every test task against the bank."""
    if curve.bank is None:
        raise ValueError("the curve's memory bank no longer exists")
    written = curve.feedback_episode_ids[:step * curve.batch_size]
    batch = curve.feedback_episode_ids[(step - 1) * curve.batch_size:step * curve.batch_size] if step else []
    results = feedback_to_orbs(episodes=Episode.objects.filter(pk__in=batch).order_by("pk"), bank=curve.bank)
    orbs = (curve.points[-1]["orbs"] if curve.points else 0) + sum(result.created for result in results)
    episodes = [_play(curve, task) for task in Task.objects.filter(pk__in=curve.test_task_pks).order_by("external_id")]
    successes = sum(e.success for e in episodes)
    low, high = wilson_interval(successes, len(episodes))
    return {"batches": step, "feedback_logs": len(written), "orbs": orbs, "tasks": len(episodes),
            "successes": successes, "success_rate": successes / len(episodes) if episodes else None,
            "low": low, "high": high, "episode_ids": [e.pk for e in episodes]}


def _play(curve: FeedbackCurve, task: Task) -> Episode:
    spec = curve.run.run_spec
    memory = MemoryConfig(kind=MemoryKind.MEMORB, bank=curve.bank.slug, k=spec.memory_k, approved_only=False,
                          per_turn=spec.per_turn)
    return episode_run(task=task, agent_config=spec.agent.model_dump(mode="json"),
                       customer_config=spec.customer.model_dump(mode="json"),
                       memory_config=memory, seed=curve.seed, max_turns=spec.max_turns)


def _point_store(curve: FeedbackCurve, point: dict) -> None:
    with transaction.atomic():
        locked = FeedbackCurve.objects.select_for_update().get(pk=curve.pk)
        points = sorted([*locked.points, point], key=lambda p: p["batches"])
        done = len(points) == locked.steps
        locked.points = points
        locked.status = Status.COMPLETED if done else Status.RUNNING
        locked.finished_at = timezone.now() if done else None
        locked.save(update_fields=["points", "status", "finished_at"])
        if not done:
            work_send("curve", curve_id=curve.pk)


def curve_drive(*, curve: FeedbackCurve) -> FeedbackCurve:
    """Measure every remaining point in this process (the demo loader, tests), through the same
    steps the workers take."""
    with inline_work() as work:
        work.append(("curve", {"curve_id": curve.pk}))
        inline_drain(work, {"curve": curve_step})
    curve.refresh_from_db()
    return curve


def curve_launch_inline(*, run: EvaluationRun, batch_size: int | None = None) -> FeedbackCurve:
    """Launch a curve and measure it in this process (the demo loader): no Celery message leaves."""
    with inline_work() as work:
        curve = curve_launch(run=run, batch_size=batch_size)
        inline_drain(work, {"curve": curve_step})
    curve.refresh_from_db()
    return curve


def curve_chart(*, curve: FeedbackCurve) -> dict:
    """Success rate (with its 95 % Wilson interval) against the number of batches written."""
    points = curve.points
    return {"label": f"run #{curve.run_id}" + (" (scripted)" if curve.scripted else ""),
            "x": [p["batches"] for p in points], "value": [p["success_rate"] for p in points],
            "low": [p["low"] for p in points], "high": [p["high"] for p in points], "scripted": curve.scripted}
