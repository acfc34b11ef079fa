"""The whole performance picture in one command: every benchmark's quick mode, one after the other,
then one table of the targets (issue 31), each with today's figure, how it stands against its target,
the load average it was measured under, and met or not met.

    make bench                  # or: .venv/bin/python -m bench [--only embedding retrieve] [--write docs/PERFORMANCE.md]

Each benchmark runs as a child process in a scratch data folder of its own (its own embedded
PostgreSQL, stopped and removed afterwards) and hands its headline figures back through
bench/figures.py; its full printout is kept in the log folder the table names. The peers benchmark
needs Mem0 and Chroma, which live in a venv of their own (`make bench` makes `.venv-peers`); without
it that part is reported as not measured, with the reason. About 8 minutes on a quiet 2-core machine.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.figures import FIGURES_FILE
from memweb import embedded_db

ROOT = Path(__file__).resolve().parent.parent
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
TABLE_START, TABLE_END = "<!-- bench:table -->", "<!-- /bench:table -->"


@dataclass(frozen=True)
class Step:
    name: str
    module: str
    args: tuple[str, ...] = ()
    needs_peers: bool = False


# Quick modes: each small enough that the whole set stays under ten minutes on a quiet 2-core
# machine; the sections of docs/PERFORMANCE.md hold the full-size runs.
STEPS = (
    Step("embedding", "bench.embedding_encoders", ("--quick",)),
    Step("retrieve", "bench.retrieve_load", ("--unique-queries", "--clients", "1", "8", "--seconds", "10",
                                             "--warmup-seconds", "8", "--orbs", "2000")),
    Step("evaluation", "bench.evaluation_throughput", ("--quick", "--processes", "2")),
    Step("peers", "bench.peers", ("--size", "5000", "--real", "500", "--queries", "100", "--text-queries", "20",
                                  "--adds", "121", "--single-adds", "40", "--batch", "40"), needs_peers=True),
    Step("dashboard", "bench.dashboard_scale", ("--orbs", "50000", "--runs", "10", "--samples", "8")),
    Step("demo", "bench.demo_curves"),
)


@dataclass(frozen=True)
class Target:
    label: str
    key: str
    better: str  # "higher" or "lower"
    goal: float | str  # a number, or another figure's key (memweb's recall against Mem0's)
    unit: str
    step: str
    goal_name: str = ""  # how the table names a goal that is another figure

    def goal_value(self, figures: dict) -> float | None:
        if isinstance(self.goal, str):
            return figures.get(self.goal, {}).get("value")
        return self.goal

    def standing(self, value: float, goal: float) -> float:
        """How the figure stands against its goal, as a factor: 1 or more is met."""
        if self.better == "higher":
            return value / goal if goal else float("inf")
        return goal / value if value else float("inf")


TARGETS = (
    Target("Embedding: single query, ONNX against torch (p50)", "embedding.single_ratio", "higher", 2.0, "×",
           "embedding"),
    Target("Embedding: batch throughput, ONNX against torch", "embedding.batch_ratio", "higher", 1.5, "×",
           "embedding"),
    Target("Embedding: ONNX vectors against torch (min cosine)", "embedding.min_cosine", "higher", 0.9999, "",
           "embedding"),
    Target("Writes: one per call, Mem0's time over memweb's", "peers.add_single_vs_mem0", "higher", 1.0, "×",
           "peers"),
    Target("Writes: one per call, Chroma's time over memweb's", "peers.add_single_vs_chroma", "higher", 1.0, "×",
           "peers"),
    Target("Writes: batched, Chroma's time per memory over memweb's", "peers.add_batched_vs_chroma", "higher",
           1.0, "×", "peers"),
    Target("Search: recall@5 at least Mem0's", "peers.recall_memweb", "higher", "peers.recall_mem0", "", "peers",
           goal_name="Mem0's"),
    Target("Retrieve API: 1 client, unique queries, p95", "retrieve.p95_ms.1", "lower", 25, "ms", "retrieve"),
    Target("Retrieve API: 8 clients, unique queries, throughput", "retrieve.rps.8", "higher", 150, "req/s",
           "retrieve"),
    Target("Retrieve API: 8 clients, unique queries, p95", "retrieve.p95_ms.8", "lower", 100, "ms", "retrieve"),
    Target("Evaluation: MemOrb per turn, 2 worker processes", "evaluation.memorb_eps.2", "higher", 40,
           "episodes/s", "evaluation"),
    Target("Evaluation: no memory, 2 worker processes", "evaluation.none_eps.2", "higher", 100, "episodes/s",
           "evaluation"),
    Target("First start: the whole demo", "demo.seconds", "lower", 60, "s", "demo"),
    Target("Dashboard: slowest page, p95", "dashboard.slowest_p95_ms", "lower", 200, "ms", "dashboard"),
    Target("Dashboard: review queue text search, p95", "dashboard.p95_ms.review queue, text search", "lower", 200,
           "ms", "dashboard"),
    Target("Dashboard: review queue semantic search, p95", "dashboard.p95_ms.review queue, semantic search",
           "lower", 200, "ms", "dashboard"),
    Target("Dashboard: bank list, p95", "dashboard.p95_ms.bank list", "lower", 200, "ms", "dashboard"),
    Target("Dashboard: bank page, p95", "dashboard.p95_ms.bank detail", "lower", 200, "ms", "dashboard"),
)


def run_step(step: Step, logs: Path, figures_file: Path, peers_python: Path) -> str:
    """Runs one benchmark in a scratch data folder; returns "" or why it gave no figures."""
    python = peers_python if step.needs_peers else Path(sys.executable)
    if not python.exists():
        return f"no {python.relative_to(ROOT) if python.is_relative_to(ROOT) else python} (`make bench` makes it)"
    scratch = Path(tempfile.mkdtemp(prefix=f"memweb-bench-{step.name}-"))
    environment = os.environ | {"MEMWEB_DATA_DIR": str(scratch), FIGURES_FILE: str(figures_file),
                                "TQDM_DISABLE": "1"}
    log = logs / f"{step.name}.log"
    began = time.monotonic()
    say(f"[{datetime.now(UTC):%H:%M:%S}] {step.name}: python -m {step.module} {' '.join(step.args)}")
    try:
        with log.open("w") as output:
            done = subprocess.run([str(python), "-m", step.module, *step.args], cwd=ROOT, env=environment,
                                  stdout=output, stderr=subprocess.STDOUT, check=False)
    finally:
        _discard_scratch(scratch, keep_logs_in=logs, step=step.name)
    say(f"           {time.monotonic() - began:.0f} s, exit {done.returncode}; its output: {log}")
    return "" if done.returncode == 0 else f"it exited {done.returncode} (see {log})"


def _discard_scratch(scratch: Path, *, keep_logs_in: Path, step: str) -> None:
    """Keeps the logs a benchmark left in its data folder (its servers', PostgreSQL's), then stops the
    PostgreSQL a benchmark that died mid-way left running, and removes the folder."""
    for log in scratch.glob("*.log"):
        shutil.copy(log, keep_logs_in / f"{step}-{log.name}")
    server = embedded_db.EmbeddedServer(scratch)
    if embedded_db.is_running(server):
        embedded_db.stop(server)
    shutil.rmtree(scratch, ignore_errors=True)


def read_figures(figures_file: Path) -> dict:
    figures = {}
    if figures_file.exists():
        for line in figures_file.read_text().splitlines():
            row = json.loads(line)
            figures[row["key"]] = row
    return figures


def table(figures: dict, failures: dict[str, str]) -> list[str]:
    lines = ["| target | goal | today | against the goal | load | |", "| --- | --- | --- | --- | --- | --- |"]
    for target in TARGETS:
        lines.append(_row(target, figures, failures))
    return lines


def _row(target: Target, figures: dict, failures: dict[str, str]) -> str:
    goal = target.goal_value(figures)
    sign = "≥" if target.better == "higher" else "≤"
    goal_text = f"{sign} {target.goal_name or _number(goal, target.unit)} {target.unit}".strip()
    figure = figures.get(target.key)
    if figure is None or goal is None:
        why = failures.get(target.step) or "the benchmark gave no such figure"
        return f"| {target.label} | {goal_text} | not measured: {why} | | | not measured |"
    standing = target.standing(figure["value"], goal)
    detail = f" ({figure['detail']})" if figure["detail"] else ""
    verdict = "**met**" if standing >= 1 else "not met"
    return (f"| {target.label} | {goal_text} | {_number(figure['value'], target.unit)} {target.unit}{detail} | "
            f"{standing:.2f}× | {figure['load']:.1f} | {verdict} |")


def _number(value: float, unit: str) -> str:
    if not unit:  # a cosine or a recall: its fourth decimal matters
        return f"{value:.5f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if unit == "×" else f"{value:.1f}"


def heading(started: datetime, seconds: float, loads: tuple[float, float]) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip() or "unknown"
    return (f"`make bench`, {started:%Y-%m-%d %H:%M} UTC, commit {commit}, {os.cpu_count()} CPUs, "
            f"{seconds / 60:.1f} min; load average {loads[0]:.1f} at the start, {loads[1]:.1f} at the end. "
            "\"Against the goal\" is the figure over the goal (the goal over the figure where lower is better): "
            "1× or more is met. Quick modes: smaller than the full runs in the sections below.")


def write_into(path: Path, block: list[str]) -> None:
    """Puts the table between its markers, or right under the document's title the first time."""
    text = path.read_text()
    fenced = "\n".join([TABLE_START, *block, TABLE_END])
    if TABLE_START in text:
        before, rest = text.split(TABLE_START, 1)
        text = before + fenced + rest.split(TABLE_END, 1)[1]
    else:
        title, body = text.split("\n", 1)
        text = f"{title}\n\n{fenced}\n{body}"
    path.write_text(text)


def say(line: str) -> None:
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=[step.name for step in STEPS], help="these benchmarks only")
    parser.add_argument("--write", type=Path, help="put the table at the top of this Markdown file")
    parser.add_argument("--peers-python", type=Path, default=PEERS_PYTHON, help="the Python that has Mem0 and Chroma")
    args = parser.parse_args()
    started, began, load_at_start = datetime.now(UTC), time.monotonic(), os.getloadavg()[0]
    logs = Path(tempfile.mkdtemp(prefix="memweb-bench-logs-"))
    figures_file = logs / "figures.jsonl"
    failures = {}
    for step in STEPS:
        if args.only and step.name not in args.only:
            failures[step.name] = "left out (--only)"
            continue
        failures[step.name] = run_step(step, logs, figures_file, args.peers_python)
    block = [heading(started, time.monotonic() - began, (load_at_start, os.getloadavg()[0])), "",
             *table(read_figures(figures_file), failures)]
    say("\n" + "\n".join(block))
    if args.write:
        write_into(args.write, block)
        say(f"\nwritten into {args.write}")


if __name__ == "__main__":
    main()
