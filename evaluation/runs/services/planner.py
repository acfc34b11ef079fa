"""How many trials a comparison needs (the launch form's planner), and a finished run's stored
outcomes for the A/A calibration (`manage.py aa_calibrate --run <id>`, through memweb.registry)."""
from evaluation import metrics
from evaluation.models import Task
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services.results import run_matrix
from evaluation.services import BUILTIN_SET
from memweb.workspaces import in_workspace

PLANNER_RUNS = 10  # the newest finished runs on the task set that the variance is estimated from


def _finished_runs(task_set_name: str, workspace):
    return (in_workspace(EvaluationRun, workspace).filter(task_set__name=task_set_name, metrics_trials__gte=2)
            .order_by("-created_at", "-pk")[:PLANNER_RUNS])


def _selected_tasks(name: str, domain: str, split: str, task_ids: list[str], workspace) -> int:
    tasks = in_workspace(Task, workspace).filter(task_set__name=name)
    tasks = tasks.filter(domain=domain) if domain else tasks
    tasks = tasks.filter(split=split) if split else tasks
    return tasks.filter(external_id__in=task_ids).count() if task_ids else tasks.count()


def runs_plan_trials(*, task_set: str, effect: float, workspace, domain: str = "", split: str = "",
                     task_ids: list[str] = ()) -> dict:
    """Trials per run for a paired comparison to detect `effect` (a fraction) with 80 % power at the
    5 % level over the chosen tasks, from the between-trial variance of earlier runs on the set
    (metrics.between_trial_variance); with none, the stated default 0.25, the largest a 0/1 outcome
    has (more trials than needed, never fewer)."""
    name = task_set or BUILTIN_SET
    tasks = _selected_tasks(name, domain, split, list(task_ids), workspace)
    runs = list(_finished_runs(name, workspace))
    variance = metrics.between_trial_variance(*(run_matrix(run=run, trials=run.metrics_trials) for run in runs))
    estimated = variance is not None
    variance = variance if estimated else metrics.DEFAULT_BETWEEN_TRIAL_VARIANCE
    trials = metrics.trials_needed(effect=effect, tasks=tasks, variance=variance) if tasks else None
    return {"task_set": name, "tasks": tasks, "effect": effect, "variance": variance, "trials": trials,
            "runs": [run.pk for run in runs] if estimated else [], "default_variance": not estimated,
            "power": metrics.DEFAULT_POWER, "alpha": metrics.DEFAULT_ALPHA}


def run_outcomes(*, run_id: int) -> dict[str, list[bool | None]]:
    """The run's stored verdicts over its finished trials (task id -> one result per trial).
    Raises ValueError for an unknown run or one without a finished trial."""
    run = EvaluationRun.objects.filter(pk=run_id).first()
    if run is None:
        raise ValueError(f"no run #{run_id}")
    if run.metrics_trials < 1:
        raise ValueError(f"run #{run_id} has no finished trial yet")
    return run_matrix(run=run, trials=run.metrics_trials)
