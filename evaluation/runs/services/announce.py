"""What evaluation runs tell webhooks (memweb.webhooks): a run finished, completed, failed or cancelled."""
from evaluation.runs.models import EvaluationRun
from evaluation.vocabulary import EvaluationEvent
from memweb.webhooks import webhooks_emit


def run_finished_announce(*, run_id: int) -> None:
    """Call after the write that ended the run: the payload is the run as that write left it.
    A run with a bank is that bank's event; one without reaches only webhooks naming no bank."""
    run = EvaluationRun.objects.select_related("bank", "created_by").get(pk=run_id)
    bank = run.bank.slug if run.bank else None
    webhooks_emit(EvaluationEvent.RUN_FINISHED, {
        "run_id": run.pk, "name": run.name, "status": run.status, "status_message": run.status_message,
        "bank": bank, "memory_mode": run.memory_mode, "trials": run.run_spec.trials,
        "episodes_total": run.episodes_total, "episodes_finished": run.episodes_finished,
        "episodes_error": run.episodes_error, "successes": run.successes, "metrics": run.metrics,
        "created_by": run.created_by.get_username() if run.created_by else None,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }, bank=bank, workspace_id=run.workspace_id)
