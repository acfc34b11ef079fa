"""Dashboard responsiveness while an evaluation runs: page p50/p95 under load against idle.

    MEMWEB_DATA_DIR=/tmp/mw-bench-dashboard python -m bench.dashboard_under_load --seconds 120

It starts memweb with `manage.py serve --no-demo` on a free loopback port (gunicorn 2 x 4 and one
Celery worker with two pool processes, the embedded PostgreSQL of a scratch MEMWEB_DATA_DIR), with
the offline backends. A bank of synthetic pending Orbs gives the reviewer work. Then one
signed-in reviewer-operator works the dashboard the way a person would, without pausing:
home page, the next page of the review queue, approve the first pending Orb on it (the queue's
htmx button), the run's page and its htmx live update. It does that twice for the same time:

1. under load, while the two worker processes play a MemOrb evaluation run (the built-in tasks,
   many trials, memory retrieval on every turn), which is cancelled when the time is up;
2. idle, once the workers have drained, on the same run's page.

It prints per page the samples, p50, p95 and worst time, the errors (any 4xx/5xx or failed
request), the episodes the workers finished meanwhile and the load average. It writes runs and
Orbs, so it refuses the checkout's own data folder. Never run by the tests.
"""
import argparse
import itertools
import re
import secrets
import subprocess
import sys
import time
from collections import defaultdict

import requests

# isort: off
from bench.orbs_retrieval import Data, copy_rows, say  # sets Django up
# isort: on
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from bench.retrieve_load import (
    free_port,
    load_average,
    offline_env,
    percentiles_ms,
    refuse_project_data,
    spawn,
    stop_embedded_database,
    stop_group,
    wait_healthy,
)
from evaluation.runs.models import EvaluationRun  # noqa: E402
from evaluation.runs.services import run_cancel, run_launch  # noqa: E402
from evaluation.services import taskset_builtin_load  # noqa: E402
from memweb.embeddings import embedder  # noqa: E402
from memweb.models import memberships_grant  # noqa: E402
from memweb.roles import Role  # noqa: E402
from orbs.models import MemoryBank, Orb  # noqa: E402

REVIEW_BANK = "bench: review queue"
APPROVE_FORM = re.compile(r'action="(/orbs/\d+/approve/)".*?name="expected_version" value="(\d+)"', re.S)
HTMX = {"HX-Request": "true"}
WARM_UP_TASKS = ["shop-app-001", "shop-app-002", "shop-app-003"]
DONE = (EvaluationRun.Status.COMPLETED, EvaluationRun.Status.FAILED, EvaluationRun.Status.CANCELLED)
PAGES = ("home", "review queue", "approve (htmx)", "run page", "run live update (htmx)")


def review_bank(size: int) -> MemoryBank:
    """`size` synthetic Orbs, all pending again at each start (earlier runs approved some), so every
    run of the benchmark finds the same queue and the reviewer never runs out of work."""
    bank, _ = MemoryBank.objects.get_or_create(
        name=REVIEW_BANK, defaults={"slug": "bench-review-queue", "embedding_model": embedder().model_name})
    have = Orb.objects.filter(bank=bank).count()
    if have < size:
        copy_rows(bank, Data(seed=11), have, size)
    Orb.objects.filter(bank=bank).update(status=Orb.Status.PENDING, reviewer=None, reviewed_at=None)
    return bank


def reviewer(password: str):
    person, _ = get_user_model().objects.get_or_create(username="bench-reviewer")
    person.set_password(password)
    person.save(update_fields=["password"])
    memberships_grant(user=person, roles=[Role.REVIEWER, Role.OPERATOR])
    return person


def serve_start(port: int, torch_threads: int | None) -> subprocess.Popen:
    env = offline_env(MEMWEB_HOST="127.0.0.1", MEMWEB_PORT=str(port), MEMWEB_WORKER_CONCURRENCY="2")
    if torch_threads:
        env["OMP_NUM_THREADS"] = str(torch_threads)  # torch's intra-op threads in every web and worker process
    return spawn([sys.executable, "manage.py", "serve", "--no-demo"], env=env, log_name="bench-serve.log")


def run_finished(run: EvaluationRun, timeout: float) -> EvaluationRun:
    deadline = time.monotonic() + timeout
    while run.status not in DONE and time.monotonic() < deadline:
        time.sleep(0.5)
        run.refresh_from_db()
    if run.status != EvaluationRun.Status.COMPLETED:
        sys.exit(f"run #{run.pk} is {run.status} after {timeout} s; see bench-serve.log in the data folder")
    return run


def workers_drained(run: EvaluationRun, quiet: float = 5, timeout: float = 120) -> None:
    """After a cancel the queued episodes still pass through the workers (each ends at once):
    wait until the run's finished count has not moved for `quiet` seconds."""
    seen, still_since, deadline = None, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.episodes_finished != seen:
            seen, still_since = run.episodes_finished, time.monotonic()
        elif time.monotonic() - still_since >= quiet:
            return
        time.sleep(0.5)


class Reviewer:
    """One signed-in person on the dashboard; every request is timed under its page's name."""

    def __init__(self, base: str, username: str, password: str):
        self.base, self.session = base, requests.Session()
        self.samples, self.errors, self.approved = defaultdict(list), defaultdict(int), 0
        self.session.get(f"{base}/login/", timeout=30)
        signed_in = self.session.post(f"{base}/login/", data={"username": username, "password": password,
                                                              "csrfmiddlewaretoken": self._csrf()}, timeout=30)
        if signed_in.url.rstrip("/") != base:
            sys.exit(f"could not sign in: ended on {signed_in.url} ({signed_in.status_code})")

    def _csrf(self) -> str:
        return self.session.cookies["csrftoken"]

    def _timed(self, page: str, method: str, path: str, **kwargs) -> str:
        began = time.perf_counter()
        try:
            response = self.session.request(method, f"{self.base}{path}", timeout=60, **kwargs)
        except requests.RequestException:
            self.errors[page] += 1
            return ""
        self.samples[page].append(time.perf_counter() - began)
        if response.status_code >= 400:
            self.errors[page] += 1
        return response.text

    def round(self, queue_page: int, run_id: int) -> None:
        self._timed("home", "GET", "/")
        queue = self._timed("review queue", "GET", f"/orbs/?page={queue_page}")
        pending = APPROVE_FORM.search(queue)
        if pending:
            action, version = pending.groups()
            self._timed("approve (htmx)", "POST", action, headers={**HTMX, "X-CSRFToken": self._csrf()},
                        data={"expected_version": version, "next": "/orbs/"})
            self.approved += 1
        self._timed("run page", "GET", f"/evaluation/runs/{run_id}/")
        self._timed("run live update (htmx)", "GET", f"/evaluation/runs/{run_id}/", headers=HTMX)

    def work(self, seconds: float, run_id: int, queue_pages: int, until=lambda: False) -> float:
        """Rounds for `seconds` (or until `until()`); returns the seconds actually spent."""
        began = time.monotonic()
        for n in itertools.count():
            if time.monotonic() - began >= seconds or until():
                break
            self.round(n % queue_pages + 1, run_id)
        return time.monotonic() - began


def table(idle: Reviewer, busy: Reviewer) -> None:
    say(f"{'page':<24}{'idle n':>7}{'p50':>8}{'p95':>8}{'max':>8}   {'load n':>7}{'p50':>8}{'p95':>8}{'max':>8}"
        f"   {'p95 ratio':>9}")
    for page in PAGES:
        quiet, loaded = (percentiles_ms(r.samples[page], (50, 95, 100)) for r in (idle, busy))
        say(f"{page:<24}{len(idle.samples[page]):>7}{quiet[0]:>8.0f}{quiet[1]:>8.0f}{quiet[2]:>8.0f}   "
            f"{len(busy.samples[page]):>7}{loaded[0]:>8.0f}{loaded[1]:>8.0f}{loaded[2]:>8.0f}   "
            f"{loaded[1] / quiet[1]:>8.1f}x")
    say(f"errors idle {dict(idle.errors) or 0}, under load {dict(busy.errors) or 0}; "
        f"Orbs approved idle {idle.approved}, under load {busy.approved}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120, help="time under load, and the same again idle")
    parser.add_argument("--trials", type=int, default=10, help="trials of the loaded run (cancelled at the end)")
    parser.add_argument("--window", type=int, default=8, help="the run's concurrency: episodes queued at once")
    parser.add_argument("--review-orbs", type=int, default=1000, help="synthetic Orbs in the review queue")
    parser.add_argument("--queue-pages", type=int, default=5, help="the reviewer cycles through this many queue pages")
    parser.add_argument("--torch-threads", type=int, help="OMP_NUM_THREADS of serve's processes (serve: unset)")
    args = parser.parse_args()
    refuse_project_data("writes runs and Orbs")
    call_command("migrate", verbosity=0)
    taskset_builtin_load()
    review_bank(args.review_orbs)
    password = secrets.token_urlsafe(16)
    person, port = reviewer(password), free_port()
    server = serve_start(port, args.torch_threads)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, server)
        warm = {"name": "bench: warm-up", "task_ids": WARM_UP_TASKS, "trials": 1, "memory_mode": "memorb"}
        run_finished(run_launch(spec=warm, user=person), timeout=300)  # both pool processes load the embedder
        say(f"{time.strftime('%Y-%m-%d %H:%M')}; serve on {base}; torch threads {args.torch_threads or 'default'}; "
            f"load average {load_average()}")
        spec = {"name": "bench: dashboard under load", "trials": args.trials, "memory_mode": "memorb",
                "per_turn": True, "concurrency": args.window}
        run = run_launch(spec=spec, user=person)
        busy = Reviewer(base, person.username, password)
        spent = busy.work(args.seconds, run.pk, args.queue_pages,
                          until=lambda: EvaluationRun.objects.filter(pk=run.pk, status__in=DONE).exists())
        run.refresh_from_db()
        say(f"under load: {spent:.0f} s, workers finished {run.episodes_finished} episodes "
            f"({run.episodes_finished / spent:.1f}/s); load average {load_average()}")
        if run.status not in DONE:
            run_cancel(run=run)
        workers_drained(run)
        idle = Reviewer(base, person.username, password)
        spent = idle.work(spent, run.pk, args.queue_pages)
        say(f"idle: {spent:.0f} s; load average {load_average()}")
        table(idle, busy)
    finally:
        stop_group(server)
        stop_embedded_database()


if __name__ == "__main__":
    main()
