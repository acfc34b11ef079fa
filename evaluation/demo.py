"""Demo data of the evaluation app: the built-in task set, a few scripted episodes to read, and two
finished evaluation runs to chart and compare — the scripted agent without memory and with MemOrb
(a fresh bank), 10 trials over the 130 built-in tasks. The runs are really played, in this
process, through the same service steps the Celery workers take; their results are labelled
scripted. Idempotent: finished demo runs are kept, an interrupted one is continued. Writing each
trial's 130 trajectories as Orbs dominates (see docs/PERFORMANCE.md), so `serve` loads the demo
after the dashboard is up."""
import time

from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_drive, run_launch
from evaluation.services import episode_run, taskset_builtin_load

DEMO_EPISODES = (("shop-clo-008", {}), ("shop-clo-008", {"wrong_tool": 1.0}), ("shop-app-023", {}),
                 ("shop-app-023", {"result_unused": 1.0}))
# Both runs share seed and error rates, so trial t of each plans the same mistakes: the
# difference between them is what memory changed.
DEMO_RATES = {"wrong_tool": 0.3, "wrong_arguments": 0.3, "result_unused": 0.3}
DEMO_RUNS = (
    ("Demo: scripted agent, no memory", {"memory_mode": "none"}),
    ("Demo: scripted agent + MemOrb (fresh bank)", {"memory_mode": "memorb", "memory_k": 5, "per_turn": False}),
)
DEMO_TRIALS = 10


def _demo_episodes(task_set, stdout) -> None:
    made = 0
    for external_id, rates in DEMO_EPISODES:
        task = task_set.tasks.get(external_id=external_id)
        config = {"backend": "scripted", "error_rates": rates}
        if not Episode.objects.filter(task=task, agent_config__error_rates=rates, memory_kind="none").exists():
            episode_run(task=task, agent_config=config, seed=0)
            made += 1
    stdout.write(f"evaluation: {made} scripted demo episode(s) played")


def _demo_run(name: str, memory: dict, stdout, *, task_ids: list[str], trials: int) -> None:
    run = EvaluationRun.objects.filter(name=name, executor=EvaluationRun.Executor.INLINE).first()
    if run is not None and run.status == EvaluationRun.Status.COMPLETED:
        return
    started = time.monotonic()
    if run is None:
        spec = {"name": name, "trials": trials, "task_ids": task_ids, "agent": {"error_rates": DEMO_RATES}, **memory}
        run = run_launch(spec=spec, executor=EvaluationRun.Executor.INLINE)
    run = run_drive(run=run)
    stdout.write(f"evaluation: demo run #{run.pk} {name!r} {run.status}: {run.episodes_finished} episodes, "
                 f"{run.successes} successes, {time.monotonic() - started:.0f} s")


def load_demo(stdout, *, run_tasks: int | None = None, run_trials: int = DEMO_TRIALS) -> None:
    """`run_tasks`/`run_trials` shrink the demo runs (tests)."""
    task_set = taskset_builtin_load()
    stdout.write(f"evaluation: task set {task_set.name} with {task_set.tasks.count()} tasks")
    _demo_episodes(task_set, stdout)
    task_ids = list(task_set.tasks.order_by("external_id").values_list("external_id", flat=True))[:run_tasks]
    for name, memory in DEMO_RUNS:
        _demo_run(name, memory, stdout, task_ids=task_ids, trials=run_trials)
