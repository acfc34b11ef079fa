"""How many trials a comparison needs (the launch form's planner), and a finished run's stored
outcomes for the A/A calibration (`manage.py aa_calibrate --run <id>`, through memweb.registry)."""
from evaluation import metrics
from evaluation.models import Task
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services.results import run_matrix
from evaluation.services import BUILTIN_SET

PLANNER_RUNS = 10  # the newest finished runs on the task set that the variance is estimated from


def _finished_runs(task_set_name: str, workspace):
    return (EvaluationRun.objects.of(workspace).filter(task_set__name=task_set_name, metrics_trials__gte=2)
            .order_by("-created_at", "-pk")[:PLANNER_RUNS])


def _selected_tasks(name: str, domain: str, split: str, task_ids: list[str], workspace) -> int:
    tasks = Task.objects.of(workspace).filter(task_set__name=name)
    tasks = tasks.filter(domain=domain) if domain else tasks
    tasks = tasks.filter(split=split) if split else tasks
    return tasks.filter(external_id__in=task_ids).count() if task_ids else tasks.count()


def runs_plan_trials(*, task_set: str, effect: float, workspace, domain: str = "", split: str = "",
                     task_ids: list[str] = ()) -> dict:
    """Trials per run for a paired comparison to detect a lift of `effect` (a fraction) with 80 % power
    at the 5 % level over the chosen tasks (metrics.trials_needed), from how often the tasks succeeded
    in earlier runs on the set (metrics.TaskRates); with none, every task at even odds, the largest
    between-trial variance (more trials than needed, never fewer). `trials` is None with `reason` when
    the selection is empty or the lift cannot be detected over these tasks."""
    name = task_set or BUILTIN_SET
    tasks = _selected_tasks(name, domain, split, list(task_ids), workspace)
    runs = list(_finished_runs(name, workspace))
    rates = metrics.TaskRates.of(*(run_matrix(run=run, trials=run.metrics_trials) for run in runs))
    estimated = rates is not None
    rates = rates if estimated else metrics.TaskRates.default()
    trials, reason = _trials(effect=effect, tasks=tasks, rates=rates)
    return {"task_set": name, "tasks": tasks, "effect": effect, "variance": rates.variance, "success": rates.mean,
            "trials": trials, "reason": reason, "runs": [run.pk for run in runs] if estimated else [],
            "default_variance": not estimated, "power": metrics.DEFAULT_POWER, "alpha": metrics.DEFAULT_ALPHA}


def _trials(*, effect: float, tasks: int, rates: metrics.TaskRates) -> tuple[int | None, str]:
    if not tasks:
        return None, "The task selection is empty."
    try:
        trials = metrics.trials_needed(effect=effect, tasks=tasks, rates=rates)
    except ValueError as exc:  # a lift larger than the failures it could turn into successes
        return None, f"{str(exc)[0].upper()}{str(exc)[1:]}."
    if trials is None:
        return None, (f"No number of trials (up to {metrics.MAX_PLANNED_TRIALS}) detects {100 * effect:.1f} points "
                      f"over {tasks} task{'s' if tasks != 1 else ''}: the sign-flip test over so few tasks cannot "
                      "get below 5 %; select more tasks.")
    return trials, ""


def run_outcomes(*, run_id: int) -> dict[str, list[bool | None]]:
    """The run's stored verdicts over its finished trials (task id -> one result per trial).
    Raises ValueError for an unknown run or one without a finished trial."""
    run = EvaluationRun.objects.filter(pk=run_id).first()
    if run is None:
        raise ValueError(f"no run #{run_id}")
    if run.metrics_trials < 1:
        raise ValueError(f"run #{run_id} has no finished trial yet")
    return run_matrix(run=run, trials=run.metrics_trials)
