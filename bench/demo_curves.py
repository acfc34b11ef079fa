"""The demo's learning curves: plays the first-start demo's runs (evaluation/runs/demo.py) in this
process on a scratch database and prints each run's successes per trial.

    MEMWEB_DATA_DIR=/tmp/mw-demo-curves .venv/bin/python -m bench.demo_curves

It is how docs/FIDELITY.md's "answer key" figures were measured, before and after memory stopped
seeing the gold answer; run it on any commit to compare (it uses only the demo loader and the run
rows, which every commit since the demo has). The data folder must be empty or absent (a demo
already loaded there would be taken as it is), and it is never the checkout's own. `--tasks` and
`--trials` shrink the demo as the tests do. Never run by the tests.
"""
import argparse
import io
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")
os.environ.setdefault("TQDM_DISABLE", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

if settings.USES_EMBEDDED_DB and Path(settings.DATA_DIR).resolve() == (Path(settings.BASE_DIR) / ".data").resolve():
    sys.exit("bench.demo_curves writes a whole demo: set MEMWEB_DATA_DIR to a scratch folder, "
             "e.g. /tmp/mw-demo-curves")

from memweb.embedded_db import ensure_configured  # noqa: E402

STARTED_HERE = ensure_configured()

from django.core.management import call_command  # noqa: E402

from bench.figures import record  # noqa: E402
from evaluation.runs.demo import load_demo  # noqa: E402
from evaluation.runs.models import EvaluationRun  # noqa: E402


def per_trial(run: EvaluationRun) -> list[tuple[int, int, int]]:
    """(trial number, successes, episodes finished) per trial, in order."""
    return list(run.trial_rows.order_by("number").values_list("number", "successes", "episodes_finished"))


def curves_text(runs) -> str:
    lines = []
    for run in runs:
        trials = per_trial(run)
        rates = " ".join(f"{100 * won / max(played, 1):.1f}" for _, won, played in trials)
        last_first = (trials[-1][1] - trials[0][1]) if trials else 0
        label = run.run_spec.reflection_input
        lines.append(f"#{run.pk} {run.name} [{run.memory_mode}, reflection input: {label}]\n"
                     f"  successes per trial: {' '.join(str(won) for _, won, _ in trials)} "
                     f"of {trials[0][2] if trials else 0}\n  success % per trial: {rates}\n"
                     f"  last trial minus first: {last_first:+d} tasks")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=None, help="first N built-in tasks (default: all 130)")
    parser.add_argument("--trials", type=int, default=10, help="trials of the two main demo runs (default 10)")
    args = parser.parse_args()
    started = time.monotonic()
    call_command("migrate", verbosity=0)
    log = io.StringIO()
    load_demo(stdout=log, run_tasks=args.tasks, run_trials=args.trials)
    print(curves_text(EvaluationRun.objects.filter(name__startswith="Demo:").order_by("pk")))
    seconds = time.monotonic() - started
    print(f"({seconds:.0f} s, commit {os.environ.get('GIT_COMMIT', 'see git log')})")
    record("demo.seconds", seconds, "migrate and every demo run, in one process")
    if STARTED_HERE:
        from django.db import connections

        from memweb import embedded_db

        connections.close_all()
        embedded_db.stop(embedded_db.EmbeddedServer(settings.DATA_DIR))


if __name__ == "__main__":
    main()
