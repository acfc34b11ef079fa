"""Dashboard pages at scale: every list and detail page timed over 1M Orbs and 200k episodes.

    MEMWEB_DATA_DIR=/tmp/mw-bench python -m bench.dashboard_scale --orbs 1000000 --runs 200

Loads, once, into a scratch MEMWEB_DATA_DIR (a later run tops up what is missing):

- `--orbs` synthetic Orbs in one bank (bench/orbs_retrieval.py's bank and loader: binary COPY
  with the HNSW index dropped and rebuilt), a tenth of them pending so the review queue has work;
- a task set of `--tasks` tasks (copies of the built-in specs under new ids);
- `--runs` completed evaluation runs of `--trials` trials over those tasks, with their trials, run
  episodes and episodes (a short scripted transcript each): runs × trials × tasks episodes,
  200 × 10 × 100 = 200k by default. Rows go in with binary COPY; each run's metrics are then
  computed once by the product (evaluation.runs.services.results.run_metrics_compute), as a
  finished run stores them.

Then it times each page with Django's test client in process (a signed-in operator-reviewer,
no network, no browser): `--samples` requests after one warm-up, p50 / p95 / worst per page, and
names the slowest. Never run by the tests; refuses the checkout's own data folder.
"""
import argparse
import itertools
import os
import time
from datetime import UTC, datetime, timedelta

import numpy as np
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.management.color import no_style  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402

from bench.figures import record  # noqa: E402
from bench.orbs_retrieval import (  # sets Django up
    Data,
    _bank,
    _raw,
    _refuse_project_data,
    copy_rows,
    drop_index,
    rebuild_index,
    say,
)
from evaluation.models import Episode, Task, TaskSet  # noqa: E402
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial  # noqa: E402
from evaluation.runs.services.results import run_metrics_compute  # noqa: E402
from evaluation.runs.services.spec import SPEC_VERSION, RunSpec, run_spec_stored  # noqa: E402
from evaluation.services import taskset_builtin_load  # noqa: E402
from memweb.roles import Role  # noqa: E402
from orbs.models import HNSW_EF_CONSTRUCTION, HNSW_M, MemoryBank, Orb  # noqa: E402

TASK_SET = "bench: scale tasks"
RUN_PREFIX = "bench scale run"
CHUNK = 20_000


# --- binary COPY of any model -----------------------------------------------------------------

def _column_types(model) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
                       "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped",
                       [model._meta.db_table])
        return dict(cursor.fetchall())


def copy_model(model, rows: list[dict]) -> None:
    """Binary COPY of `rows` (attribute name → value, primary key included); other fields take
    their model default. JSON values are sent as jsonb."""
    # PostgreSQL computes generated columns (the episode's transcript search vector) itself.
    fields = [f for f in model._meta.concrete_fields if not getattr(f, "generated", False)]
    types = _column_types(model)
    defaults = {f.attname: f.get_default() for f in fields}
    json_columns = {f.attname for f in fields if types[f.column] == "jsonb"}
    raw = _raw()
    with raw.cursor() as cursor, cursor.copy(
            f"COPY {model._meta.db_table} ({', '.join(f.column for f in fields)}) FROM STDIN WITH (FORMAT BINARY)"
    ) as copy:
        copy.set_types([types[f.column] for f in fields])
        for row in rows:
            values = []
            for f in fields:
                value = row.get(f.attname, defaults[f.attname])
                values.append(Jsonb(value) if f.attname in json_columns and value is not None else value)
            copy.write_row(values)


def _next_ids(model, n: int) -> range:
    last = model.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    return range(last + 1, last + 1 + n)


def _reset_sequences(*models) -> None:
    with connection.cursor() as cursor:
        for statement in connection.ops.sequence_reset_sql(no_style(), list(models)):
            cursor.execute(statement)


# --- the data -----------------------------------------------------------------------------------

def load_orbs(size: int) -> MemoryBank:
    bank = _bank()
    have = Orb.objects.filter(bank=bank).count()
    if have < size:
        drop_index()
        copy_s = copy_rows(bank, Data(), have, size)
        say(f"COPY {size - have:,} Orbs: {copy_s:.1f} s")
        build_s = rebuild_index("halfvec", m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION, maintenance_work_mem="4GB")
        say(f"HNSW build: {build_s:.1f} s")
    return bank


def load_tasks(n: int) -> list[Task]:
    task_set, _ = TaskSet.objects.get_or_create(name=TASK_SET, defaults={"description": "bench/dashboard_scale.py"})
    have = task_set.tasks.count()
    if have < n:
        builtin = list(taskset_builtin_load().tasks.order_by("pk"))
        ids = _next_ids(Task, n - have)
        copy_model(Task, [
            {"id": pk, "task_set_id": task_set.pk, "external_id": f"scale-{i:05d}", "domain": model.domain,
             "split": model.split, "difficulty": model.difficulty, "error_kinds": model.error_kinds,
             "summary": model.summary, "spec": model.spec, "created_at": datetime.now(UTC)}
            for pk, i, model in zip(ids, range(have, n), itertools.cycle(builtin), strict=False)])
        _reset_sequences(Task)
    return list(task_set.tasks.order_by("pk")[:n])


def _transcript(task: Task, success: bool) -> list[dict]:
    ask = task.summary or "I need help with my order."
    return [{"turn": 1, "role": "user", "content": ask},
            {"turn": 1, "role": "assistant", "content": "Let me look that up.",
             "tool_calls": [{"id": "call-1", "name": "get_order", "arguments": {"order_id": "W1"}}]},
            {"turn": 1, "role": "tool", "tool_call_id": "call-1", "tool_name": "get_order",
             "content": '{"order_id": "W1", "status": "delivered"}'},
            {"turn": 1, "role": "assistant", "content": "Your order W1 was delivered."},
            {"turn": 2, "role": "user", "content": "Thanks, that is all." if success else "That is not right."},
            {"turn": 2, "role": "assistant", "content": "Glad to help." if success else "Sorry about that."}]


def _run_rows(run_id: int, number: int, bank: MemoryBank, tasks: list[Task], trials: int, created: datetime) -> dict:
    n = len(tasks) * trials
    return {"id": run_id, "name": f"{RUN_PREFIX} {number}", "task_set_id": tasks[0].task_set_id,
            "task_pks": [t.pk for t in tasks], "memory_mode": "memorb" if number % 2 else "none",
            "bank_id": bank.pk if number % 2 else None, "status": "completed", "spec_version": SPEC_VERSION,
            "spec": run_spec_stored(RunSpec(name=f"{RUN_PREFIX} {number}", memory_mode="memorb" if number % 2 else "none",
                                            trials=trials, seed=number)),
            "executor": "inline", "episodes_total": n, "episodes_finished": n, "created_at": created,
            "started_at": created, "finished_at": created + timedelta(minutes=30)}


def load_runs(n_runs: int, trials: int, tasks: list[Task], bank: MemoryBank) -> None:
    """Completed runs over `tasks`, each with its trials, run episodes and episodes."""
    have = EvaluationRun.objects.filter(name__startswith=RUN_PREFIX).count()
    rng = np.random.default_rng(have)
    began = time.perf_counter()
    for number in range(have, n_runs):
        created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=number)
        run_id = _next_ids(EvaluationRun, 1)[0]
        trial_ids = _next_ids(Trial, trials)
        episode_ids = iter(_next_ids(Episode, len(tasks) * trials))
        run_episode_ids = iter(_next_ids(RunEpisode, len(tasks) * trials))
        skill = rng.uniform(0.3, 0.8, len(tasks))
        episodes, run_episodes, successes = [], [], 0
        for trial_id in trial_ids:
            for task, p in zip(tasks, skill, strict=True):
                success = bool(rng.random() < p)
                successes += success
                episode_id, at = next(episode_ids), created + timedelta(seconds=len(episodes))
                episodes.append({
                    "id": episode_id, "task_id": task.pk, "task_snapshot": task.spec, "seed": len(episodes),
                    "agent_backend": "scripted", "customer_backend": "agenda", "max_turns": 12,
                    "status": "completed", "ended_by": "stop", "success": success, "reward": float(success),
                    "transcript": _transcript(task, success), "turns": 2, "tool_calls": 1, "tokens_in": 400,
                    "tokens_out": 120, "latency_ms": int(rng.integers(200, 900)), "created_at": at})
                run_episodes.append({
                    "id": next(run_episode_ids), "run_id": run_id, "trial_id": trial_id, "task_id": task.pk,
                    "task_key": task.external_id, "seed": episodes[-1]["seed"], "status": "done",
                    "episode_id": episode_id, "success": success, "reward": float(success), "turns": 2,
                    "tokens": 520, "latency_ms": episodes[-1]["latency_ms"], "attempts": 1, "finished_at": at})
        run = _run_rows(run_id, number, bank, tasks, trials, created) | {"successes": successes}
        copy_model(EvaluationRun, [run])
        copy_model(Trial, [{"id": pk, "run_id": run_id, "number": t, "status": "done", "episodes_total": len(tasks),
                            "episodes_finished": len(tasks)} for t, pk in enumerate(trial_ids, start=1)])
        copy_model(Episode, episodes)
        copy_model(RunEpisode, run_episodes)
        stored = EvaluationRun.objects.get(pk=run_id)
        EvaluationRun.objects.filter(pk=run_id).update(metrics=run_metrics_compute(run=stored, trials=trials),
                                                       metrics_trials=trials)
        if (number + 1) % 20 == 0:
            say(f"  {number + 1} runs, {(number + 1) * len(tasks) * trials:,} episodes "
                f"({time.perf_counter() - began:.0f} s)")
    _reset_sequences(EvaluationRun, Trial, Episode, RunEpisode)
    with _raw().cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


# --- the pages ----------------------------------------------------------------------------------

def _operator():
    from memweb.models import memberships_grant

    person, _ = get_user_model().objects.get_or_create(username="bench-scale-operator")
    memberships_grant(user=person, roles=[Role.REVIEWER, Role.OPERATOR])
    return person


def pages(bank: MemoryBank) -> dict[str, str]:
    """Every list and detail page that reads the loaded rows, by name → URL."""
    orb = Orb.objects.filter(bank=bank).order_by("-pk").values_list("pk", flat=True).first()
    run = EvaluationRun.objects.filter(name__startswith=RUN_PREFIX, bank=bank).order_by("-pk").first()
    task = Task.objects.filter(task_set__name=TASK_SET).order_by("pk").first()
    episode = Episode.objects.order_by("-pk").values_list("pk", flat=True).first()
    orbs_in_bank = Orb.objects.filter(bank=bank).count()
    last_queue_page = max(1, orbs_in_bank // 25)
    return {
        "home": "/",
        "review queue": "/orbs/",
        "review queue, bank filter": f"/orbs/?bank={bank.slug}",
        "review queue, pending": f"/orbs/?bank={bank.slug}&status=pending",
        "review queue, text search": f"/orbs/?bank={bank.slug}&q=orb+4242",
        "review queue, semantic search": f"/orbs/?bank={bank.slug}&semantic=my+fridge+arrived+broken",
        "review queue, page 2": "/orbs/?page=2",
        "review queue, last page": f"/orbs/?page={last_queue_page}",
        "Orb detail": f"/orbs/{orb}/",
        "Orb provenance": f"/orbs/{orb}/provenance/",
        "Orb edit form": f"/orbs/{orb}/edit/",
        "bank list": "/orbs/banks/",
        "bank detail": f"/orbs/banks/{bank.slug}/",
        "bank memory effects": f"/evaluation/memory/{bank.slug}/effects/",
        "Orb effect": f"/evaluation/memory/orbs/{orb}/effect/",
        "experience list": "/orbs/experiences/",
        "task list": "/evaluation/tasks/",
        "task detail": f"/evaluation/tasks/{task.pk}/",
        "episode list": "/evaluation/episodes/",
        "episode list, failures": "/evaluation/episodes/?outcome=failure",
        "episode list, one task": f"/evaluation/episodes/?task={task.pk}",
        "episode list, page 2": "/evaluation/episodes/?page=2",
        "episode list, last page": f"/evaluation/episodes/?page={max(1, Episode.objects.count() // 25)}",
        "episode detail": f"/evaluation/episodes/{episode}/",
        "run list": "/evaluation/runs/",
        "run detail": f"/evaluation/runs/{run.pk}/",
        "run detail, live update (htmx)": f"/evaluation/runs/{run.pk}/",
        "feedback browser": "/evaluation/feedback/",
        "annotation campaigns": "/annotation/campaigns/",
        "API keys": "/api-keys/",
    }


def time_pages(bank: MemoryBank, samples: int) -> list[tuple[str, float, float, float]]:
    client = Client()
    client.force_login(_operator())
    results = []
    for name, url in pages(bank).items():
        headers = {"HTTP_HX_REQUEST": "true"} if "htmx" in name else {}
        first = client.get(url, **headers)
        if first.status_code != 200:
            say(f"{name}: {url} answered {first.status_code}")
            continue
        times = []
        for _ in range(samples):
            began = time.perf_counter()
            client.get(url, **headers)
            times.append((time.perf_counter() - began) * 1000)
        p50, p95, worst = (float(np.percentile(times, 50)), float(np.percentile(times, 95)), max(times))
        results.append((name, p50, p95, worst))
        say(f"{name:<34} p50 {p50:8.1f} ms  p95 {p95:8.1f} ms  worst {worst:8.1f} ms  {url}  "
            f"(load {os.getloadavg()[0]:.2f})")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orbs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--samples", type=int, default=20, help="timed requests per page")
    parser.add_argument("--load-only", action="store_true")
    args = parser.parse_args()
    _refuse_project_data()
    call_command("migrate", verbosity=0)
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    # As the tests do: static URLs without a collectstatic manifest (the pages' own work is what is timed).
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    bank = load_orbs(args.orbs)
    tasks = load_tasks(args.tasks)
    began = time.perf_counter()
    load_runs(args.runs, args.trials, tasks, bank)
    say(f"data: {Orb.objects.count():,} Orbs, {Episode.objects.count():,} episodes, "
        f"{EvaluationRun.objects.count():,} runs ({time.perf_counter() - began:.0f} s loading runs); "
        f"load average {os.getloadavg()[0]:.2f}")
    if args.load_only:
        return
    results = time_pages(bank, args.samples)
    name, _, p95, _ = max(results, key=lambda row: row[2])
    say(f"\nslowest page by p95: {name} ({p95:.1f} ms); load average {os.getloadavg()[0]:.2f}")
    scale = f"{Orb.objects.count():,} Orbs, {Episode.objects.count():,} episodes"
    record("dashboard.slowest_p95_ms", p95, f"{name}, at {scale}")
    for page in ("review queue, text search", "bank list", "bank detail", "review queue, semantic search"):
        record(f"dashboard.p95_ms.{page}", next(row[2] for row in results if row[0] == page), f"at {scale}")


if __name__ == "__main__":
    main()
