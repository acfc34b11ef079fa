"""Demo data of evaluation runs (and, first, the evaluation core's): two finished evaluation runs
to chart and compare — the scripted agent without memory and with MemOrb (a fresh bank), 10
trials over the 130 built-in tasks. The runs are really played, in this process, through the same
service steps the Celery workers take; their results are labelled scripted. Idempotent: finished
demo runs are kept, an interrupted one is continued. Writing each trial's 130 trajectories as
Orbs dominates (see docs/PERFORMANCE.md), so `serve` loads the demo after the dashboard is up.
EvaluationConfig.demo_module names this module to the load_demo command."""
import time

from evaluation import demo as core_demo
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_drive, run_launch

# Both runs share seed and error rates, so trial t of each plans the same mistakes: the
# difference between them is what memory changed.
DEMO_RATES = {"wrong_tool": 0.3, "wrong_arguments": 0.3, "result_unused": 0.3}
DEMO_RUNS = (
    ("Demo: scripted agent, no memory", {"memory_mode": "none"}),
    ("Demo: scripted agent + MemOrb (fresh bank)", {"memory_mode": "memorb", "memory_k": 5, "per_turn": False}),
)
DEMO_TRIALS = 10


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
    task_set = core_demo.load_demo(stdout)
    task_ids = list(task_set.tasks.order_by("external_id").values_list("external_id", flat=True))[:run_tasks]
    for name, memory in DEMO_RUNS:
        _demo_run(name, memory, stdout, task_ids=task_ids, trials=run_trials)
