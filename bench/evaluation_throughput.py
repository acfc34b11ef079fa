"""Evaluation-run throughput through the real Celery path, and where an episode's time goes.

    MEMWEB_DATA_DIR=/tmp/mw-bench-runs python -m bench.evaluation_throughput --tasks 130 --trials 2

Offline backends throughout (scripted agent, agenda customer: no LLM time to exclude). It
launches runs the way the dashboard does and lets real `celery worker` processes (1, then 2
pool processes; kombu's SQLAlchemy broker on the same PostgreSQL, as `serve` runs it) play them:

- episodes/s over the episode phases of the run (the trial-end reflection into Orbs is timed
  apart), without memory and with MemOrb retrieval;
- the per-episode split, measured in-process on the same tasks:
  simulation (the offline agent and customer themselves, no database),
  database (claim, store the episode with its row, counters, next message),
  retrieval (rewrite + embed + pgvector top-k + log, per episode and per call),
  orchestration (broker round trip and task dispatch: Celery wall time minus in-process time);
- the trial-end cost per Orb written (reflection, embedding, near-duplicate search, insert).

It writes runs and Orbs, so it refuses the checkout's own data folder. Never run by the tests.
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")
os.environ.setdefault("TQDM_DISABLE", "1")

import django  # noqa: E402

django.setup()

from memweb.embedded_db import ensure_configured  # noqa: E402

EMBEDDED_DB_STARTED_HERE = ensure_configured()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db.models import Avg, Max  # noqa: E402

from bench.figures import record  # noqa: E402
from evaluation.runs.models import EvaluationRun  # noqa: E402
from evaluation.runs.services import run_drive, run_launch  # noqa: E402
from evaluation.services import episode_simulate, taskset_builtin_load  # noqa: E402
from memweb.embeddings import embedder  # noqa: E402
from orbs.models import RetrievalLog  # noqa: E402

RATES = {"wrong_tool": 0.3, "wrong_arguments": 0.3, "result_unused": 0.3}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def say(text: str) -> None:
    print(text, flush=True)


def _spec(name: str, args, **memory) -> dict:
    task_ids = list(taskset_builtin_load().tasks.order_by("external_id").values_list("external_id", flat=True))
    return {"name": f"bench: {name}", "task_ids": task_ids[:args.tasks], "trials": args.trials,
            "agent": {"error_rates": RATES}, "concurrency": args.window, **memory}


def _episode_phase_seconds(run: EvaluationRun) -> float:
    """Sum over trials of (last episode stored - trial started): the run without its Orb writing."""
    total = 0.0
    for trial in run.trial_rows.all():
        last = trial.run_episodes.aggregate(last=Max("finished_at"))["last"]
        total += (last - trial.started_at).total_seconds()
    return total


def _orb_seconds(run: EvaluationRun) -> float:
    spans = [(t.finished_at - t.run_episodes.aggregate(last=Max("finished_at"))["last"]).total_seconds()
             for t in run.trial_rows.all()]
    return sum(spans)


def _worker(processes: int, threads: int | None) -> subprocess.Popen:
    env = {**os.environ, "MEMWEB_WORKER_HEARTBEAT_SECONDS": "2"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)  # torch's intra-op threads in each pool process
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "memweb", "worker", "--loglevel", "WARNING", "--concurrency",
         str(processes), "--hostname", f"bench-{processes}@%h", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _finish(run: EvaluationRun, timeout: float) -> EvaluationRun:
    deadline = time.monotonic() + timeout
    while run.status not in (EvaluationRun.Status.COMPLETED, EvaluationRun.Status.FAILED):
        if time.monotonic() > deadline:
            sys.exit(f"run #{run.pk} did not finish within {timeout} s")
        time.sleep(0.5)
        run.refresh_from_db()
    return run


def _measured(run: EvaluationRun) -> dict:
    episodes = _episode_phase_seconds(run)
    return {"run": run, "episodes_per_s": run.episodes_total / episodes, "per_episode_ms": 1000 * episodes /
            run.episodes_total, "orb_s": _orb_seconds(run), "wall_s": (run.finished_at - run.started_at).total_seconds()}


def celery_runs(args, processes: int, threads: int | None) -> tuple[dict, dict]:
    """A run without memory and one with MemOrb on one worker whose pool processes have already
    loaded Django and the embedder (a small warm-up run first)."""
    worker = _worker(processes, threads)
    try:
        warm = {**_spec("warm-up", args, memory_mode="memorb"), "task_ids": ["shop-app-001", "shop-app-002",
                                                                            "shop-app-003"], "trials": 1}
        _finish(run_launch(spec=warm), args.timeout)
        label = f"{processes} process(es)" + (f", {threads} thread(s)" if threads else "")
        none = _finish(run_launch(spec=_spec(f"no memory, {label}", args, memory_mode="none")), args.timeout)
        memorb = None if args.no_memorb else _finish(
            run_launch(spec=_spec(f"MemOrb, {label}", args, memory_mode="memorb", per_turn=True)), args.timeout)
    finally:
        _stop(worker)
    return _measured(none), memorb and _measured(memorb)


def inline_run(name: str, args, **memory) -> dict:
    run = run_launch(spec=_spec(f"{name}, in-process", args, **memory), executor=EvaluationRun.Executor.INLINE)
    started = time.perf_counter()
    run = run_drive(run=run)
    wall = time.perf_counter() - started
    episodes = _episode_phase_seconds(run)
    orbs = run.run_episodes.filter(orb__isnull=False).values("orb_id").distinct().count()
    return {"run": run, "per_episode_ms": 1000 * episodes / run.episodes_total, "orb_s": wall - episodes,
            "orbs": orbs}


def simulation_ms(args) -> float:
    """The offline agent and customer alone (what an LLM's time would replace): no database write."""
    tasks = list(taskset_builtin_load().tasks.order_by("external_id")[:args.tasks])
    times = []
    for trial in range(1, args.trials + 1):
        for task in tasks:
            started = time.perf_counter()
            episode_simulate(task=task, agent_config={"error_rates": RATES}, seed=trial)
            times.append(time.perf_counter() - started)
    return 1000 * statistics.mean(times)


def retrieval_calls(run: EvaluationRun) -> dict:
    ids = [m["retrieval_id"] for row in run.run_episodes.select_related("episode") for m in row.episode.memories]
    logs = RetrievalLog.objects.filter(pk__in=ids)
    figures = logs.aggregate(rewrite=Avg("rewrite_ms"), embed=Avg("embed_ms"), search=Avg("search_ms"))
    return {"calls": len(ids), **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=130)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--window", type=int, default=8, help="the runs' concurrency: episodes queued at once")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--quick", action="store_true",
                        help="split only the no-memory episode in-process, and no OMP_NUM_THREADS=1 variant")
    parser.add_argument("--no-memorb", action="store_true", help="the runs without memory only")
    args = parser.parse_args()
    project_data = os.path.realpath(os.path.join(ROOT, ".data"))
    if settings.USES_EMBEDDED_DB and os.path.realpath(settings.DATA_DIR) == project_data:
        sys.exit("This benchmark writes runs and Orbs: set MEMWEB_DATA_DIR to a scratch folder")
    call_command("migrate", verbosity=0)
    embedder().embed_one("warm up")
    say(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs; {args.tasks} tasks x "
        f"{args.trials} trials; window {args.window}; load average {_load()}")

    sim = simulation_ms(args)
    plain = inline_run("no memory", args, memory_mode="none")
    say(f"in-process: simulation {sim:.1f} ms/episode; no memory {plain['per_episode_ms']:.1f} ms/episode "
        f"(database {plain['per_episode_ms'] - sim:.1f} ms); load average {_load()}")
    memorb = None if args.quick else inline_run("MemOrb", args, memory_mode="memorb", per_turn=True)
    if memorb:
        calls = retrieval_calls(memorb["run"])
        say(f"in-process: MemOrb per turn {memorb['per_episode_ms']:.1f} ms/episode "
            f"(retrieval {memorb['per_episode_ms'] - plain['per_episode_ms']:.1f} ms/episode; {calls['calls']} calls, "
            f"rewrite {calls['rewrite']:.2f} + embed {calls['embed']:.1f} + search {calls['search']:.1f} ms each); "
            f"Orb writing {1000 * memorb['orb_s'] / max(memorb['orbs'], 1):.0f} ms per Orb ({memorb['orbs']} Orbs); "
            f"load average {_load()}")
    for processes in args.processes:
        for threads in (None, 1) if processes > 1 and not args.quick else (None,):
            none, orbs = celery_runs(args, processes, threads)
            label = f"{processes} worker process(es)" + (f", OMP_NUM_THREADS={threads}" if threads else "")
            if threads is None:
                record(f"evaluation.none_eps.{processes}", none["episodes_per_s"], f"{none['run'].episodes_total} episodes")
                if orbs:
                    record(f"evaluation.memorb_eps.{processes}", orbs["episodes_per_s"],
                           f"per turn, {orbs['run'].episodes_total} episodes")
            say(f"celery, {label}: no memory {none['episodes_per_s']:.1f} episodes/s "
                f"({none['per_episode_ms']:.1f} ms/episode; {_orchestration(none, plain, processes)}); "
                f"load average {_load()}")
            if orbs:
                split = f"; {_orchestration(orbs, memorb, processes)}" if memorb else ""
                say(f"celery, {label}: MemOrb {orbs['episodes_per_s']:.1f} episodes/s "
                    f"({orbs['per_episode_ms']:.1f} ms/episode{split}); "
                    f"trial-end Orb writing {orbs['orb_s']:.1f} s in all; MemOrb run wall {orbs['wall_s']:.0f} s; "
                    f"load average {_load()}")


def _load() -> str:
    return "/".join(f"{value:.2f}" for value in os.getloadavg())


def _orchestration(celery: dict, in_process: dict, processes: int) -> str:
    """What a worker slot spends on an episode beyond playing and storing it in-process: broker
    round trips, dispatch, claims, waiting for a busy core."""
    slot_ms = celery["per_episode_ms"] * processes
    extra = slot_ms - in_process["per_episode_ms"]
    return f"orchestration {extra:.1f} ms/episode, {100 * extra / slot_ms:.0f} % of a slot's episode time"


if __name__ == "__main__":
    main()
