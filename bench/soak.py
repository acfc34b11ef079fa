"""Soak: evaluation runs played for a long stretch while their workers are killed and the broker
restarts, then every run checked for lost and duplicated episodes.

    MEMWEB_DATA_DIR=/tmp/mw-soak .venv/bin/python -m bench.soak --minutes 30

Offline backends (scripted agent, agenda customer), so the faults meet the orchestration and
storage, not an LLM. For `--minutes` it keeps `--active` runs in play, alternating MemOrb memory
(retrieval per turn, Orbs written at each trial's end) and no memory, on one Celery worker (two
pool processes) behind its own redis-server without persistence (a restart loses every queued
message, as a crashed broker does). Every `--kill-min`..`--kill-max` seconds (uniform, seeded) the
worker's process group gets SIGKILL mid-work and a new worker starts; once, half-way through, the
broker is killed and started again. Then no new runs start, the last ones finish, and each run is
checked: it completed; each (trial, task) has exactly one row, done, linked to its own stored
episode; no episode is stored twice or left orphaned. Exits non-zero when anything was lost or
doubled. It writes runs, so it refuses the checkout's own data folder. Never run by the tests.
"""
import argparse
import collections
import os
import random
import signal
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

from evaluation.models import Episode  # noqa: E402
from evaluation.runs.models import EvaluationRun, RunEpisode  # noqa: E402
from evaluation.runs.services import run_launch  # noqa: E402
from evaluation.services import taskset_builtin_load  # noqa: E402
from memweb.celery import app as celery_app  # noqa: E402
from tests.support.processes import RedisServer, free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATES = {"wrong_tool": 0.3, "wrong_arguments": 0.3, "result_unused": 0.3}
ENDED = (EvaluationRun.Status.COMPLETED, EvaluationRun.Status.FAILED, EvaluationRun.Status.CANCELLED)


def say(text: str) -> None:
    print(f"{datetime.now(UTC):%H:%M:%S} {text}", flush=True)


def load() -> str:
    return "/".join(f"{value:.2f}" for value in os.getloadavg())


def group_kill(process: subprocess.Popen) -> None:
    """SIGKILL the process and its children: no shutdown, as the OOM killer or a lost host does."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def worker_start(broker: RedisServer, number: int) -> subprocess.Popen:
    env = {**os.environ, "CELERY_BROKER_URL": broker.url, "MEMWEB_WORKER_HEARTBEAT_SECONDS": "2"}
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "memweb", "worker", "--loglevel", "WARNING", "--concurrency", "2",
         "--hostname", f"soak-{number}@%h", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_spec(number: int, args) -> dict:
    task_ids = list(taskset_builtin_load().tasks.order_by("external_id").values_list("external_id", flat=True))
    memory = {"memory_mode": "memorb", "per_turn": True} if number % 2 else {"memory_mode": "none"}
    return {"name": f"soak #{number} ({memory['memory_mode']})", "task_ids": task_ids[:args.tasks],
            "trials": args.trials, "concurrency": 4, "agent": {"error_rates": RATES}, **memory}


def active_runs(run_ids: list[int]) -> int:
    return EvaluationRun.objects.filter(pk__in=run_ids).exclude(status__in=ENDED).count()


def progress(run_ids: list[int]) -> tuple:
    return tuple(RunEpisode.objects.filter(run_id__in=run_ids, status=RunEpisode.Status.DONE)
                 .values_list("pk", flat=True).order_by("-pk")[:1]) + (active_runs(run_ids),)


def run_defects(run: EvaluationRun) -> dict:
    """What the run lost (cells without a done row) and doubled (cells with two rows, rows sharing
    an episode), beside its status."""
    rows = list(run.run_episodes.values_list("trial__number", "task_key", "status", "episode_id"))
    cells = collections.Counter((trial, task) for trial, task, _, _ in rows)
    done = [(trial, task, episode) for trial, task, status, episode in rows
            if status == RunEpisode.Status.DONE and episode]
    linked = [episode for _, _, episode in done]
    expected = run.run_spec.trials * len(run.task_pks)
    return {"status": run.status, "expected": expected, "done": len(done),
            "lost": expected - len({(trial, task) for trial, task, _ in done}),
            "doubled": sum(count - 1 for count in cells.values()) + len(linked) - len(set(linked))}


class Soak:
    def __init__(self, args):
        self.args, self.random = args, random.Random(args.seed)
        self.broker, self.worker, self.workers_started = RedisServer(free_port()), None, 0
        self.run_ids: list[int] = []
        self.kills, self.broker_restarts = [], 0

    def worker_replace(self) -> None:
        if self.worker is not None:
            group_kill(self.worker)
            self.kills.append(time.monotonic())
        self.workers_started += 1
        self.worker = worker_start(self.broker, self.workers_started)

    def broker_restart(self) -> None:
        self.broker.kill()
        time.sleep(self.args.broker_down)
        self.broker.start()
        self.broker_restarts += 1

    def next_kill_in(self) -> float:
        return self.random.uniform(self.args.kill_min, self.args.kill_max)

    def play(self) -> None:
        started = time.monotonic()
        end, halfway = started + 60 * self.args.minutes, started + 30 * self.args.minutes
        next_kill = started + self.next_kill_in()
        self.worker_replace()
        while time.monotonic() < end:
            while active_runs(self.run_ids) < self.args.active:
                run = run_launch(spec=run_spec(len(self.run_ids) + 1, self.args))
                self.run_ids.append(run.pk)
            if time.monotonic() >= next_kill:
                say(f"kill {len(self.kills) + 1}: worker soak-{self.workers_started} (SIGKILL); "
                    f"{len(self.run_ids)} runs launched; load {load()}")
                self.worker_replace()
                next_kill = time.monotonic() + self.next_kill_in()
            if not self.broker_restarts and time.monotonic() >= halfway:
                say(f"broker restart: redis-server killed, {self.args.broker_down:.0f} s down; load {load()}")
                self.broker_restart()
            time.sleep(1)

    def drain(self) -> float:
        """Let the launched runs finish on a worker that is left alone; fail after `--stall` s
        without an episode stored."""
        say(f"no more runs or kills; waiting for {active_runs(self.run_ids)} active runs to end")
        started, last, moved = time.monotonic(), None, time.monotonic()
        while active_runs(self.run_ids):
            now, current = time.monotonic(), progress(self.run_ids)
            if current != last:
                last, moved = current, now
            elif now - moved > self.args.stall:
                sys.exit(f"no progress for {self.args.stall:.0f} s with {active_runs(self.run_ids)} runs active")
            time.sleep(2)
        return time.monotonic() - started

    def close(self) -> None:
        if self.worker is not None:
            group_kill(self.worker)
        self.broker.kill()


def report(soak: Soak, drain_s: float) -> int:
    runs = EvaluationRun.objects.filter(pk__in=soak.run_ids).order_by("pk")
    defects = [run_defects(run) for run in runs]
    linked = RunEpisode.objects.filter(run_id__in=soak.run_ids, episode__isnull=False).count()
    stored = Episode.objects.filter(run_episode__run_id__in=soak.run_ids).count()
    orphans = Episode.objects.filter(run_episode__isnull=True).count()
    not_completed = [d for d in defects if d["status"] != EvaluationRun.Status.COMPLETED]
    lost, doubled = sum(d["lost"] for d in defects), sum(d["doubled"] for d in defects)
    say(f"{len(defects)} runs, {sum(d['expected'] for d in defects)} episodes planned, "
        f"{sum(d['done'] for d in defects)} done; {len(soak.kills)} worker kills, "
        f"{soak.broker_restarts} broker restart(s); drain after the soak {drain_s:.0f} s; load {load()}")
    say(f"lost {lost}, doubled {doubled}, runs not completed {len(not_completed)}, "
        f"episodes stored {stored} for {linked} linked rows, orphan episodes {orphans}")
    retried = RunEpisode.objects.filter(run_id__in=soak.run_ids, attempts__gte=2).count()
    say(f"episodes played again after a kill or a lost message: {retried}")
    return 1 if lost or doubled or not_completed or orphans or stored != linked else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--kill-min", type=float, default=120, help="seconds between worker kills, at least")
    parser.add_argument("--kill-max", type=float, default=300, help="seconds between worker kills, at most")
    parser.add_argument("--broker-down", type=float, default=10, help="seconds the broker stays down")
    parser.add_argument("--active", type=int, default=2, help="runs kept in play at once")
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--stall", type=float, default=300)
    parser.add_argument("--seed", type=int, default=20)
    args = parser.parse_args()
    if settings.USES_EMBEDDED_DB and os.path.realpath(settings.DATA_DIR) == os.path.realpath(
            os.path.join(ROOT, ".data")):
        sys.exit("The soak writes runs: set MEMWEB_DATA_DIR to a scratch folder")
    call_command("migrate", verbosity=0)
    soak = Soak(args)
    soak.broker.start()
    celery_app.conf.update(broker_url=soak.broker.url, broker_transport_options={})
    say(f"soak for {args.minutes:g} min on {os.cpu_count()} CPUs: {args.active} runs at a time of "
        f"{args.tasks} tasks x {args.trials} trials; worker killed every {args.kill_min:g}-{args.kill_max:g} s; "
        f"load {load()}")
    try:
        soak.play()
        drain_s = soak.drain()
    finally:
        soak.close()
    sys.exit(report(soak, drain_s))


if __name__ == "__main__":
    main()
