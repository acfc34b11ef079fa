"""The watchdog: puts right what a dead worker or a lost message left behind.

A sweep runs when a worker starts, on resume, and every watch interval while a run is active
(protocol.run_watch arms it); memweb's worker heartbeat sends the sweeps whose countdown message
was lost. Rows whose worker process is gone are put back (claims name a worker instance and
process, never just a hostname: memweb.services.claims_stale), lost messages re-sent, and trials
whose finish message was lost are finished.
"""
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from evaluation.runs.services.dispatch import work_send
from evaluation.runs.services.protocol import ADVANCING, run_advance, run_start, run_watch, watch_interval, window_fill
from memweb.services import claims_stale

HARD_CLAIM_TIMEOUT = timedelta(hours=1)  # no episode takes this long, even on a slow LLM


def runs_watch_overdue() -> int:
    """Send a sweep for each run whose next sweep is overdue by a whole interval: its countdown
    message was lost (a broker restarted without persistence, a publish that failed)."""
    now, interval = timezone.now(), watch_interval()
    overdue = EvaluationRun.objects.filter(status__in=ADVANCING, executor=EvaluationRun.Executor.CELERY,
                                           watch_until__lt=now - interval)
    sent = 0
    for run_id in overdue.values_list("pk", flat=True):
        if EvaluationRun.objects.filter(pk=run_id, watch_until__lt=now - interval).update(watch_until=now + interval):
            work_send("sweep", run_id=run_id)
            sent += 1
    return sent


def _stale_claims(*, grace: timedelta) -> Q:
    """Claims no live worker process holds (see claims_stale), or held far longer than any episode takes."""
    return Q(claimed_at__lt=timezone.now() - HARD_CLAIM_TIMEOUT) | claims_stale(grace=grace)


def run_claims_release(*, run_id: int, everything: bool = False, grace: timedelta | None = None) -> int:
    """Put the run's episodes and trial finishes whose worker is gone back to be done again; how
    many. `grace`: how old a claim of a process its live worker no longer lists must be (the watch
    interval by default). `everything`: no other worker can hold a claim (an inline driver resuming
    its own run)."""
    stale = Q() if everything else _stale_claims(grace=watch_interval() if grace is None else grace)
    episodes = RunEpisode.objects.filter(stale, run_id=run_id, status=RunEpisode.Status.RUNNING).update(
        status=RunEpisode.Status.PENDING, claim_token=None, claimed_by="", queued_at=None)
    return episodes + Trial.objects.filter(stale, run_id=run_id, status=Trial.Status.REFLECTING).update(
        status=Trial.Status.RUNNING, claim_token=None)


def run_sweep(*, run_id: int, everything: bool = False) -> None:
    """Put right what a dead worker or a lost message left behind, then advance the run.
    `everything`: no other worker can hold a claim (an inline driver resuming its own run)."""
    run = EvaluationRun.objects.filter(pk=run_id).first()
    if run is None or run.status not in EvaluationRun.ACTIVE:
        return
    if run.status == EvaluationRun.Status.QUEUED:
        run_start(run_id=run_id)
        return
    run_claims_release(run_id=run_id, everything=everything)
    lost_before = timezone.now() - (timedelta(0) if everything else watch_interval())
    run.run_episodes.filter(status=RunEpisode.Status.PENDING, queued_at__lt=lost_before).update(queued_at=None)
    for trial in run.trial_rows.filter(status=Trial.Status.RUNNING):
        window_fill(trial_id=trial.pk)
        if not trial.run_episodes.filter(status__in=RunEpisode.UNFINISHED).exists():
            work_send("finish", trial_id=trial.pk)
    run_advance(run_id=run_id)
    run_watch(run_id=run_id)


def runs_sweep() -> int:
    """Sweep every active run the workers drive (a worker calls this when it starts)."""
    ids = list(EvaluationRun.objects.filter(status__in=EvaluationRun.ACTIVE, executor=EvaluationRun.Executor.CELERY)
               .values_list("pk", flat=True))
    for run_id in ids:
        run_sweep(run_id=run_id)
    return len(ids)
