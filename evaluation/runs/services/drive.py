"""Driving a run in this process (the demo loader, tests): the same steps the workers take,
through dispatch's local queue instead of Celery messages."""
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services.dispatch import inline_drain, inline_work
from evaluation.runs.services.protocol import run_episodes_execute, run_start, trial_finish
from evaluation.runs.services.watchdog import run_sweep


def _handlers() -> dict:
    return {"start": run_start, "episodes": run_episodes_execute, "finish": trial_finish, "sweep": run_sweep}


def run_drive(*, run: EvaluationRun) -> EvaluationRun:
    """Run (or continue) `run` to its end in this process, through the same steps the workers
    take. Stops early at a closed review gate."""
    with inline_work() as work:
        if run.status == EvaluationRun.Status.QUEUED:
            work.append(("start", {"run_id": run.pk}))
        else:
            work.append(("sweep", {"run_id": run.pk, "everything": True}))
        inline_drain(work, _handlers())
    run.refresh_from_db()
    return run
