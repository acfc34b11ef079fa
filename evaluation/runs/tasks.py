"""Celery tasks of evaluation runs: thin wrappers that take ids and call the runs services.
(Celery's autodiscovery imports only `<app>.tasks`; EvaluationConfig.ready() imports this module.)

A worker that starts sweeps every active run (worker_ready): rows a killed worker held are
played again, lost messages re-sent, and the run goes on. Every task is idempotent.
"""
from celery import shared_task
from celery.signals import worker_ready

from evaluation.runs import services
from memweb.celery import worker_claimant_here

# After its own chunk a worker slot keeps claiming and playing the trial's next chunks for this long
# before it lets go: one broker round trip per many quick episodes (polling brokers answer in up to a
# second).
KEEP_GOING_SECONDS = 10.0


def _worker(task) -> str:
    return worker_claimant_here(task.request.hostname)


@shared_task
def run_start(run_id: int) -> None:
    services.run_start(run_id=run_id)


@shared_task(bind=True)
def run_episodes_play(self, run_episode_ids: list[int]) -> None:
    services.run_episodes_execute(run_episode_ids=run_episode_ids, worker=_worker(self),
                                  keep_going=KEEP_GOING_SECONDS)


@shared_task(bind=True)
def trial_finish(self, trial_id: int) -> None:
    services.trial_finish(trial_id=trial_id, worker=_worker(self))


@shared_task
def feedback_curve_step(curve_id: int) -> None:
    services.curve_step(curve_id=curve_id)


@shared_task
def run_sweep(run_id: int) -> None:
    services.run_sweep(run_id=run_id)


@shared_task
def runs_sweep() -> None:
    services.runs_sweep()


@worker_ready.connect
def _sweep_when_a_worker_starts(sender=None, **kwargs) -> None:
    # Only a message is sent here: the parent process of a prefork pool must not open the database.
    runs_sweep.delay()
