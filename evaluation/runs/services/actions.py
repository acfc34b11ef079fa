"""What an operator does to a run: cancel, resume, retry its infrastructure errors. Each hands
the run back to the workers through a watchdog sweep."""
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from evaluation.runs.services.announce import run_finished_announce
from evaluation.runs.services.dispatch import work_send
from evaluation.runs.services.launch import run_preparation_job
from evaluation.runs.services.protocol import run_cancelled_settle, run_counts_add
from evaluation.runs.services.watchdog import run_claims_release

Status = EvaluationRun.Status


class RunActionError(ValueError):
    """The action does not apply to the run as it is now (the message says why)."""


def run_cancel(*, run: EvaluationRun, user=None) -> None:
    who = f" by {user.get_username()}" if user else ""
    with transaction.atomic():
        if not EvaluationRun.objects.filter(pk=run.pk, status__in=EvaluationRun.ACTIVE).update(
                status=Status.CANCELLED, status_message=f"cancelled{who}", finished_at=timezone.now(),
                watch_until=None):
            raise RunActionError(f"run #{run.pk} is {run.get_status_display()}; only a preparing, queued, running "
                                 "or waiting run can be cancelled")
        run_cancelled_settle(run_id=run.pk)
    run_finished_announce(run_id=run.pk)


RESUMABLE = (Status.CANCELLED, Status.FAILED, Status.RUNNING, Status.WAITING_FOR_REVIEW, Status.QUEUED)


def run_resume(*, run: EvaluationRun) -> None:
    """Continue a cancelled or failed run, re-check a waiting one, or nudge a stuck one: every
    unfinished episode is queued again (duplicates are harmless) and the workers take it from there.
    Claims that no live worker process holds are released now, however recent: the operator saw
    the run stuck, so waiting out a grace period would only keep it stuck."""
    if run.imported or run.status not in RESUMABLE:
        raise RunActionError(f"run #{run.pk} is {'imported' if run.imported else run.get_status_display()}; "
                             "there is nothing to resume")
    if unprepared := _bank_missing(run):
        raise RunActionError(unprepared)
    with transaction.atomic():
        target = Status.QUEUED if run.started_at is None else Status.RUNNING
        EvaluationRun.objects.filter(pk=run.pk).update(status=target, status_message="", finished_at=None,
                                                       executor=EvaluationRun.Executor.CELERY, watch_until=None)
        run_claims_release(run_id=run.pk, grace=timedelta(0))
        run.run_episodes.filter(status__in=(RunEpisode.Status.PENDING, RunEpisode.Status.CANCELLED)).update(
            status=RunEpisode.Status.PENDING, queued_at=None)
        cancelled = run.trial_rows.filter(status=Trial.Status.CANCELLED)
        cancelled.filter(started_at__isnull=True).update(status=Trial.Status.PENDING)
        cancelled.update(status=Trial.Status.RUNNING)
        work_send("sweep", run_id=run.pk)


def _bank_missing(run: EvaluationRun) -> str | None:
    """Why a run cancelled while its starting bank was being copied cannot go on yet (None: it can):
    started without its bank, every episode would fail for want of its memory."""
    if not run.bank_copied_from or run.bank_id is not None:
        return None
    job = run_preparation_job(run=run)
    if job is not None and not job.is_finished:
        return f"run #{run.pk} is still copying its memory bank (job #{job.pk}); resume it once the copy is done"
    return (f"run #{run.pk} never got its memory bank: the copy of {run.bank_copied_from!r} did not finish; "
            "launch the run again")


RETRYABLE = (Status.RUNNING, Status.WAITING_FOR_REVIEW, Status.COMPLETED, Status.FAILED)


def run_retry_errors(*, run: EvaluationRun) -> int:
    """Play the episodes that hit an infrastructure error again; their trials finish (and write
    their memories) again, and a completed run is running until they are done."""
    if run.imported or run.status not in RETRYABLE:
        raise RunActionError(f"run #{run.pk} is {'imported' if run.imported else run.get_status_display()}; "
                             "resume it before retrying its errors")
    with transaction.atomic():
        rows = list(run.run_episodes.select_for_update().filter(status=RunEpisode.Status.ERROR))
        for row in rows:
            run_counts_add(row=row, finished=-1, errors=-1)
        RunEpisode.objects.filter(pk__in=[r.pk for r in rows]).update(
            status=RunEpisode.Status.PENDING, error="", episode=None, claim_token=None, claimed_by="", queued_at=None)
        Episode.objects.filter(pk__in=[r.episode_id for r in rows if r.episode_id]).delete()
        Trial.objects.filter(pk__in={r.trial_id for r in rows}, status=Trial.Status.DONE).update(
            status=Trial.Status.RUNNING)
        if rows:
            EvaluationRun.objects.filter(pk=run.pk, status__in=(Status.COMPLETED, Status.FAILED)).update(
                status=Status.RUNNING, status_message="", finished_at=None, executor=EvaluationRun.Executor.CELERY)
            work_send("sweep", run_id=run.pk)
    return len(rows)
