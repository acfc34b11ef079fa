"""Demo data of evaluation runs (and, first, the evaluation core's): two finished evaluation runs
to chart and compare — the scripted agent without memory and with MemOrb (a fresh bank), 10
trials over the 130 built-in tasks — and a smaller on-policy feedback run with its off-policy
learning curve; and a DMRM run whose bank starts from a source memory of the appliance episodes
those runs played, learning on clothing tasks. The runs are really played, in this process, through the same
service steps the Celery workers take; their results are labelled scripted. Idempotent: finished
demo runs are kept, an interrupted one is continued. Writing each trial's 130 trajectories as
Orbs dominates (see docs/PERFORMANCE.md), so `serve` loads the demo after the dashboard is up.
EvaluationConfig.demo_module names this module to the load_demo command."""
import time

from evaluation import demo as core_demo
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import curve_drive, curve_launch_inline, run_drive, run_launch
from orbs.dmrm.services import source_memory_build, source_trajectories_from_episodes
from orbs.errors import OrbsError
from orbs.services import bank_get_or_create

# Both runs share seed and error rates, so trial t of each plans the same mistakes: the
# difference between them is what memory changed.
DEMO_RATES = {"wrong_tool": 0.3, "wrong_arguments": 0.3, "result_unused": 0.3}
DEMO_RUNS = (
    ("Demo: scripted agent, no memory", {"memory_mode": "none"}),
    ("Demo: scripted agent + MemOrb (fresh bank)", {"memory_mode": "memorb", "memory_k": 5, "per_turn": False}),
)
DEMO_TRIALS = 10
# MemoryBench's two ways of feeding simulated feedback into memory: on-policy inside a run (here
# with two feedback rounds), and off-policy as a learning curve over that run's feedback logs.
FEEDBACK_DEMO_RUN = "Demo: scripted agent + MemOrb, on-policy simulated feedback (2 rounds)"
FEEDBACK_DEMO_SPEC = {"memory_mode": "memorb", "memory_k": 5, "per_turn": False, "feedback_enabled": True,
                      "feedback_memory": "onpolicy", "feedback_rounds": 2}
FEEDBACK_DEMO_TASKS = 20  # each curve point replays every task: a subset keeps the demo quick
FEEDBACK_DEMO_TRIALS = 3
# DMRM's cross-task transfer: a static source memory of successful appliance steps (M_s) helps the
# clothing tasks until the target memory (M_t) holds enough successes of its own.
DMRM_SOURCE_BANK = "Demo: DMRM source memory (appliances)"
DMRM_SOURCE_MEMORY = "Appliance episodes of the demo runs"
DMRM_DEMO_RUN = "Demo: scripted agent + DMRM, source memory from appliances"
# Few, so the first start stays quick: embedding a step (observations hold tool results of hundreds of
# tokens) costs far more than a short query, and every step of the source memory is embedded.
DMRM_SOURCE_EPISODES = 20
DMRM_DEMO_TASKS = 8  # clothing tasks
DMRM_DEMO_TRIALS = 2


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


def _feedback_demo(stdout, *, task_ids: list[str], trials: int) -> None:
    """The on-policy feedback run, then its off-policy learning curve (once)."""
    _demo_run(FEEDBACK_DEMO_RUN, FEEDBACK_DEMO_SPEC, stdout, task_ids=task_ids[:FEEDBACK_DEMO_TASKS],
              trials=min(trials, FEEDBACK_DEMO_TRIALS))
    run = EvaluationRun.objects.get(name=FEEDBACK_DEMO_RUN, executor=EvaluationRun.Executor.INLINE)
    curve = run.feedback_curves.first()
    curve = curve_drive(curve=curve) if curve else curve_launch_inline(run=run)
    rates = ", ".join(f"{p['batches']}: {p['successes']}/{p['tasks']}" for p in curve.points)
    stdout.write(f"evaluation: demo learning curve #{curve.pk} of run #{run.pk} {curve.status} (batches: successes) {rates}")


def _dmrm_source(stdout) -> dict:
    """The run's bank source: a bank with the source memory, built once from the appliance episodes
    played so far; none when no step of them passes (a demo shrunk for tests may have no success)."""
    bank = bank_get_or_create(name=DMRM_SOURCE_BANK, description="A DMRM source memory built by the demo loader.")
    if not bank.source_memories.filter(name=DMRM_SOURCE_MEMORY).exists():
        episodes = source_trajectories_from_episodes(domain="appliances", workspace=bank.workspace,
                                                     limit=DMRM_SOURCE_EPISODES)
        try:
            memory = source_memory_build(bank=bank, name=DMRM_SOURCE_MEMORY, source_domain="appliances",
                                         trajectories=episodes, gamma=0.9, min_reward=1.0, min_q=0.0)
        except OrbsError as nothing_kept:
            stdout.write(f"evaluation: no demo DMRM source memory ({nothing_kept})")
            return {}
        stdout.write(f"evaluation: demo DMRM source memory “{memory.name}” with {memory.experiences.count()} steps")
    return {"bank_source": bank.slug}


def _dmrm_demo(stdout, *, task_set, tasks: int | None, trials: int) -> None:
    clothing = list(task_set.tasks.filter(domain="clothing").order_by("external_id")
                    .values_list("external_id", flat=True)[:min(tasks or DMRM_DEMO_TASKS, DMRM_DEMO_TASKS)])
    spec = {"memory_mode": "dmrm", **_dmrm_source(stdout)}
    _demo_run(DMRM_DEMO_RUN, spec, stdout, task_ids=clothing, trials=min(trials, DMRM_DEMO_TRIALS))


def load_demo(stdout, *, run_tasks: int | None = None, run_trials: int = DEMO_TRIALS) -> None:
    """`run_tasks`/`run_trials` shrink the demo runs (tests)."""
    task_set = core_demo.load_demo(stdout)
    task_ids = list(task_set.tasks.order_by("external_id").values_list("external_id", flat=True))[:run_tasks]
    for name, memory in DEMO_RUNS:
        _demo_run(name, memory, stdout, task_ids=task_ids, trials=run_trials)
    _feedback_demo(stdout, task_ids=task_ids, trials=run_trials)
    _dmrm_demo(stdout, task_set=task_set, tasks=run_tasks, trials=run_trials)
