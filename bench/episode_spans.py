"""What recording an episode's spans costs: CPU ms per offline episode (scripted agent, agenda
customer, all 130 tasks per pass), this checkout's shop against another checkout's, interleaved
in one process so both see the same machine load.

    .venv/bin/python -m bench.episode_spans --against /path/to/other/checkout --passes 20

Each side's `evaluation/shop` is copied into a scratch folder under its own package name (the
simulator is Django-free and imports only itself), so both load side by side. CPU time rather
than wall time: on a shared machine wall time mostly measures the wait for a core.
"""
import argparse
import importlib
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RATES = {"wrong_tool": 0.3, "wrong_arguments": 0.3, "result_unused": 0.3}


def _package(checkout: Path, name: str, scratch: Path) -> None:
    target = scratch / name
    shutil.copytree(checkout / "evaluation" / "shop", target)
    for module in target.glob("*.py"):
        module.write_text(re.sub(r"\bevaluation\.shop\b", name, module.read_text()))


def _player(name: str):
    episode, customers = importlib.import_module(f"{name}.episode"), importlib.import_module(f"{name}.customers")
    agents, specs = importlib.import_module(f"{name}.scripted_agent"), importlib.import_module(f"{name}.task_specs")
    tasks = specs.tasks_generate()

    def one_pass(seed: int) -> tuple[float, list[int]]:
        start, spans = time.process_time(), []
        for task in tasks:
            outcome = episode.episode_play(task=task, agent=agents.ScriptedAgent(seed=seed, key=task["id"], error_rates=RATES),
                                           customer=customers.AgendaCustomer(task=task, seed=seed))
            spans.append(len(getattr(outcome, "spans", ())))
        return (time.process_time() - start) / len(tasks) * 1000, spans
    return one_pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True, help="the other checkout (e.g. main's)")
    parser.add_argument("--passes", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        _package(args.against, "other_shop", Path(scratch))
        _package(ROOT, "this_shop", Path(scratch))
        sys.path.insert(0, scratch)
        players = {"other": _player("other_shop"), "this": _player("this_shop")}
        for play in players.values():
            play(0)  # warm caches (gold replays) on both sides
        times, spans = {name: [] for name in players}, {}
        for seed in range(1, args.passes + 1):
            for name, play in players.items():
                ms, spans[name] = play(seed)
                times[name].append(ms)
    for name, values in times.items():
        print(f"{name}: median {statistics.median(values):.3f} ms CPU per episode over {len(values)} passes of 130, "
              f"median {statistics.median(spans[name])} spans per episode")
    ratio = statistics.median(times["this"]) / statistics.median(times["other"])
    print(f"this / other: {ratio:.3f}")


if __name__ == "__main__":
    main()
