"""The watchdog tells the claims of live worker processes from those of dead ones by worker instance
(one start of a worker) and process, never by hostname: a worker restarted under its old name, or a
pool process replaced after a kill, does not keep the claims of the one that died."""
from datetime import timedelta

from django.utils import timezone

from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from evaluation.runs.services import run_resume, run_start, run_sweep
from evaluation.runs.services.dispatch import inline_work
from memweb.models import WorkerHeartbeat

Running, Pending = RunEpisode.Status.RUNNING, RunEpisode.Status.PENDING


def _claim(row, claimant: str, *, age: timedelta = timedelta(0)) -> RunEpisode:
    RunEpisode.objects.filter(pk=row.pk).update(status=Running, claimed_by=claimant,
                                                claimed_at=timezone.now() - age, queued_at=timezone.now() - age)
    return row


def _status(row) -> str:
    return RunEpisode.objects.get(pk=row.pk).status


def _started(launch) -> tuple[EvaluationRun, list[RunEpisode]]:
    run = launch(trials=1)
    with inline_work() as work:
        run_start(run_id=run.pk)
        work.clear()  # the messages went with the dead worker
    return run, list(run.run_episodes.order_by("pk"))


def test_a_dead_instances_claims_go_back_at_once_though_a_worker_of_its_name_beats(launch):
    run, (dead, live, _) = _started(launch)
    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="celery@samehost", instance="new", pid=10, processes=[11],
                                   started_at=now, seen_at=now)  # the restarted worker, under the same name
    _claim(dead, "celery@samehost#old/21")  # claimed a moment ago by the instance that was killed
    _claim(live, "celery@samehost#new/11", age=timedelta(minutes=5))
    with inline_work():
        run_sweep(run_id=run.pk)
    assert (_status(dead), _status(live)) == (Pending, Running)


def test_a_killed_pool_process_claims_go_back_once_older_than_a_beat_can_explain(launch):
    run, (fresh, old, listed) = _started(launch)
    now = timezone.now()
    # Pool process 11 was killed and 12 replaced it; the main process (10) lives on and beats.
    WorkerHeartbeat.objects.create(hostname="celery@host", instance="i1", pid=10, processes=[12],
                                   started_at=now, seen_at=now)
    _claim(fresh, "celery@host#i1/11")  # as new as a process started after the last beat: given time
    _claim(old, "celery@host#i1/11", age=timedelta(minutes=5))
    _claim(listed, "celery@host#i1/12", age=timedelta(minutes=5))
    with inline_work():
        run_sweep(run_id=run.pk)
    assert (_status(fresh), _status(old), _status(listed)) == (Running, Pending, Running)


def test_resume_releases_claims_no_live_process_holds_however_recent(launch):
    run, (row, *_) = _started(launch)
    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="celery@samehost", pid=10, started_at=now, seen_at=now)
    _claim(row, "celery@samehost", age=timedelta(minutes=1))  # a hostname, as claims were named before
    trial = run.trial_rows.get()
    Trial.objects.filter(pk=trial.pk).update(status=Trial.Status.REFLECTING, claimed_by="celery@samehost",
                                             claimed_at=now)
    with inline_work():
        run_resume(run=run)
    assert _status(row) == Pending and Trial.objects.get(pk=trial.pk).status == Trial.Status.RUNNING
