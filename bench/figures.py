"""The headline figures a benchmark hands to `python -m bench`, which runs the benchmarks one after
the other and prints them as one table against the targets (bench/__main__.py).

A benchmark calls `record` where it has measured a figure; run on its own (no MEMWEB_BENCH_FIGURES
in the environment) that does nothing, so every benchmark's own printout stays as it was.
"""
import json
import os

FIGURES_FILE = "MEMWEB_BENCH_FIGURES"


def record(key: str, value: float, detail: str = "") -> None:
    """Appends one figure, with the load average it was measured under, to the file the runner named."""
    path = os.environ.get(FIGURES_FILE)
    if not path:
        return
    row = {"key": key, "value": float(value), "detail": detail, "load": round(os.getloadavg()[0], 2)}
    with open(path, "a", encoding="utf-8") as figures:
        figures.write(json.dumps(row) + "\n")
