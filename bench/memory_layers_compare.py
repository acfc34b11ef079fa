"""Memory layers side by side (issue 29): the same tasks, trials and seed with no memory, MemOrb,
DMRM, the four naive-RAG kinds, the example BM25 service and Mem0 (both over the HTTP contract),
and one comparison table.

    make memory-compare            # scripts/memory_compare.sh: Mem0's venv if missing, then this
    MEMWEB_DATA_DIR=/tmp/mw-memory-compare .venv/bin/python -m bench.memory_layers_compare \\
        --mem0-python .venv-mem0/bin/python --tasks 20 --trials 4 --write docs/PERFORMANCE.md

Offline backends throughout (scripted agent, agenda customer): every figure is labelled scripted.
Each arm is launched like a dashboard run and played in this process (run_drive). Per arm:
per-trial success, Pass^k, the paired difference against no memory (per-task bootstrap interval,
sign-flip p, as the compare page computes it), tokens per retrieval (the prompt blocks counted
with memweb's embedder tokenizer), retrieve latency (the episode's "memory" spans) and learning
latency (the trial's end after its last episode, per episode learnt). The machine and its load
are printed beside the table. It writes runs and banks, so it refuses the checkout's own data
folder. Never run by the tests.
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")
os.environ.setdefault("TQDM_DISABLE", "1")

import django  # noqa: E402

django.setup()

from memweb.embedded_db import ensure_configured  # noqa: E402

EMBEDDED_DB_STARTED_HERE = ensure_configured()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db.models import Max  # noqa: E402

from evaluation.metrics import paired_compare, pass_k, per_trial_success  # noqa: E402
from evaluation.runs.models import EvaluationRun  # noqa: E402
from evaluation.runs.services import run_drive, run_launch  # noqa: E402
from evaluation.runs.services.results import run_matrix  # noqa: E402
from evaluation.services import taskset_builtin_load  # noqa: E402
from memweb.embeddings import embedder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# As the runs tests: errors often enough that memory has something to fix.
RATES = {"wrong_tool": 0.6, "wrong_arguments": 0.6, "result_unused": 0.6}
KEY = "memory-compare"  # the services run on loopback for this script only
BUILT_IN_ARMS = ("none", "memorb", "dmrm", "bm25_message", "bm25_dialog", "embedder_message", "embedder_dialog")
MARK_BEGIN, MARK_END = "<!-- memory-layers-compare:begin -->", "<!-- memory-layers-compare:end -->"
SERVICE_START_SECONDS = 300  # Mem0 imports torch and loads MiniLM before it listens


def say(text: str) -> None:
    print(text, flush=True)


def _service(command: list[str]) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    started = time.monotonic()
    first = process.stdout.readline().strip()
    if not first.startswith("listening on "):
        process.terminate()
        raise SystemExit(f"{command[1]} did not start ({first!r}) in {time.monotonic() - started:.0f} s")
    return process, first.removeprefix("listening on ")


def _spec(name: str, args, task_ids: list[str], **memory) -> dict:
    return {"name": f"compare: {name}", "task_ids": task_ids, "trials": args.trials, "seed": args.seed,
            "agent": {"error_rates": RATES}, "concurrency": 4, **memory}


def _tokens_per_retrieval(run: EvaluationRun) -> float | None:
    """The prompt blocks the agent was given, counted with memweb's embedder tokenizer."""
    count = embedder().count_tokens
    blocks = [block for row in run.run_episodes.select_related("episode") if row.episode
              for record in row.episode.memories for block in _prompt_blocks(record)]
    return statistics.mean(count(block) if block else 0 for block in blocks) if blocks else None


def _prompt_blocks(record) -> list[str]:
    """Every layer's trace record says what it injected as a `prompt_block`, at some depth."""
    if isinstance(record, dict):
        found = [record["prompt_block"]] if isinstance(record.get("prompt_block"), str) else []
        return found + [block for key, value in record.items() if key != "prompt_block"
                        for block in _prompt_blocks(value)]
    return []


def _retrieve_ms(run: EvaluationRun) -> float | None:
    spans = [span["ms"] for row in run.run_episodes.select_related("episode") if row.episode
             for span in row.episode.spans if span.get("kind") == "memory"]
    return statistics.median(spans) if spans else None


def _learn_ms_per_episode(run: EvaluationRun) -> float | None:
    """Each trial's end after its last episode (what the layer does to learn), per episode of the trial."""
    per_episode = []
    for trial in run.trial_rows.filter(finished_at__isnull=False):
        last = trial.run_episodes.aggregate(last=Max("finished_at"))["last"]
        if last is not None and trial.episodes_total:
            per_episode.append((trial.finished_at - last).total_seconds() * 1000 / trial.episodes_total)
    return statistics.mean(per_episode) if per_episode else None


def _row(name: str, run: EvaluationRun, baseline: EvaluationRun, seconds: float) -> dict:
    matrix, base = run_matrix(run=run, trials=run.metrics_trials), run_matrix(run=baseline, trials=baseline.metrics_trials)
    difference = None if run.pk == baseline.pk else paired_compare(matrix, base, k=1, seed=run.run_spec.seed)
    return {"arm": name, "run": run.pk, "status": run.status, "per_trial": per_trial_success(matrix),
            "pass_k": [pass_k(matrix, k) for k in range(1, run.metrics_trials + 1)], "difference": difference,
            "tokens": _tokens_per_retrieval(run), "retrieve_ms": _retrieve_ms(run),
            "learn_ms": _learn_ms_per_episode(run), "seconds": seconds, "scripted": run.scripted}


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}"


def _number(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _table(rows: list[dict], args, load: tuple[float, float]) -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    lines = [f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {cpu}, {os.cpu_count()} CPUs, Python "
             f"{platform.python_version()}; load average {load[0]:.2f} before, {load[1]:.2f} after. "
             f"{args.tasks} built-in tasks × {args.trials} trials, seed {args.seed}, **scripted** agent and "
             f"customer (no LLM: every figure is the scripted policy's; error rates {RATES['wrong_tool']} each).", "",
             "| memory layer | run | success per trial (%) | Pass^k, k=1… (%) | vs no memory, points [95% CI], p | "
             "tokens / retrieval | retrieve ms (median) | learning ms / episode | run s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        d = row["difference"]
        versus = "baseline" if d is None else (f"{100 * d.estimate:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}], "
                                               f"p={d.p_value:.2f}")
        lines.append(f"| {row['arm']} | #{row['run']}{' (scripted)' if row['scripted'] else ''} | "
                     f"{' / '.join(map(_percent, row['per_trial']))} | {' / '.join(map(_percent, row['pass_k']))} | "
                     f"{versus} | {_number(row['tokens'], 0)} | {_number(row['retrieve_ms'])} | "
                     f"{_number(row['learn_ms'])} | {row['seconds']:.0f} |")
    return "\n".join(lines)


def _write(path: Path, table: str) -> None:
    text = path.read_text()
    if MARK_BEGIN not in text:
        raise SystemExit(f"{path} has no {MARK_BEGIN} … {MARK_END} section to write the table into")
    head, rest = text.split(MARK_BEGIN, 1)
    path.write_text(f"{head}{MARK_BEGIN}\n{table}\n{MARK_END}{rest.split(MARK_END, 1)[1]}")


def _stop_embedded_database() -> None:
    """The scratch PostgreSQL this script started, stopped with it (a server it found running stays)."""
    if EMBEDDED_DB_STARTED_HERE:
        from django.db import connections

        from memweb import embedded_db

        connections.close_all()
        embedded_db.stop(embedded_db.EmbeddedServer(settings.DATA_DIR))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20, help="N built-in tasks, evenly spread over them by id")
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mem0-python", default="", help="The Python of Mem0's own venv; without it Mem0 is left out")
    parser.add_argument("--write", type=Path, help="Put the table between the markers of this Markdown file")
    args = parser.parse_args()
    if Path(settings.DATA_DIR).resolve() == (ROOT / ".data").resolve():
        raise SystemExit("point MEMWEB_DATA_DIR at a scratch folder: this writes runs and banks")
    call_command("migrate", verbosity=0)
    every = list(taskset_builtin_load().tasks.order_by("external_id").values_list("external_id", flat=True))
    task_ids = every[::max(1, len(every) // args.tasks)][:args.tasks]  # spread over the domains
    load_before = os.getloadavg()[0]
    services = {"external: BM25 service": [sys.executable, "examples/bm25_memory_service/bm25_service.py"]}
    if args.mem0_python:
        scratch = Path(settings.DATA_DIR) / f"mem0-{int(time.time())}"
        services["external: Mem0 (infer=False)"] = [args.mem0_python, "bench/mem0_service.py", "--data", str(scratch)]
    started = {name: _service([*command, "--port", "0", "--key", KEY]) for name, command in services.items()}
    arms = [(name, {"memory_mode": name}) for name in BUILT_IN_ARMS] + [
        (name, {"memory_mode": "external", "external_url": url, "external_key": KEY})
        for name, (_, url) in started.items()]
    rows = []
    try:
        baseline = None
        for name, memory in arms:
            clock = time.monotonic()
            run = run_drive(run=run_launch(spec=_spec(name, args, task_ids, **memory),
                                           executor=EvaluationRun.Executor.INLINE))
            baseline = baseline or run
            rows.append(_row(name, run, baseline, time.monotonic() - clock))
            say(f"{name}: run #{run.pk} {run.status} in {rows[-1]['seconds']:.0f} s")
    finally:
        for process, _ in started.values():
            process.terminate()
            process.wait(timeout=30)
        _stop_embedded_database()
    table = _table(rows, args, (load_before, os.getloadavg()[0]))
    say(table)
    if args.write:
        _write(args.write, table)


if __name__ == "__main__":
    main()
