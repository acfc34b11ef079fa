"""The Orbs retrieve API under N concurrent clients: throughput, latency and where it saturates.

    MEMWEB_DATA_DIR=/tmp/mw-bench-load python -m bench.retrieve_load --clients 1 2 4 8 16 --seconds 15

It starts the web server the way `manage.py serve` does (gunicorn on loopback, a free port,
the embedded PostgreSQL of a scratch MEMWEB_DATA_DIR), fills one bank with synthetic approved
Orbs (bench.orbs_retrieval's loader), issues an operator's API key, and then drives
`POST /api/orbs/banks/<slug>/retrieve` with N client threads for a fixed time per N, each on its
own keep-alive connection. The rewriter is the offline one; each query is embedded by the real
model and searched with pgvector, and every call writes its retrieval log, as in production.
Per N it reports requests/s, p50/p95/p99 latency as the client sees it, errors (any answer
but 200, or no answer), the server's own stage medians from the retrieval log, and the load
average; at the end, the N where throughput stops rising.

Everything stays on 127.0.0.1 and is bounded: --seconds per level and --max-requests per level.
The clients share the machine's cores with the server, as agents on the same host would.
It writes Orbs and logs, so it refuses the checkout's own data folder. Never run by the tests.
"""
import argparse
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import requests

from bench.figures import record

# isort: off
from bench.orbs_retrieval import EMBEDDED_DB_STARTED_HERE, ITEMS, SENTENCES, Data, copy_rows, say  # sets Django up
# isort: on
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db.models import Count  # noqa: E402

from memweb.embeddings import embedder  # noqa: E402
from memweb.models import ApiKey, memberships_grant  # noqa: E402
from memweb.roles import Role  # noqa: E402
from orbs.models import MemoryBank, Orb, RetrievalLog  # noqa: E402

ROOT = settings.BASE_DIR
BANK = "bench: retrieve load"
SATURATION_GAIN = 1.10  # within 10 % of the best throughput counts as the plateau
DOMAINS = ("appliances", "clothing")


# --- helpers shared with bench.dashboard_under_load ------------------------------------------

def refuse_project_data(why: str) -> None:
    project_data = os.path.realpath(ROOT / ".data")
    if settings.USES_EMBEDDED_DB and os.path.realpath(settings.DATA_DIR) == project_data:
        sys.exit(f"This benchmark {why}: set MEMWEB_DATA_DIR to a scratch folder, e.g. /tmp/mw-bench-load")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def offline_env(**extra: str) -> dict:
    """This environment for a child, with every LLM endpoint removed: offline backends only."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMWEB_LLM_")}
    return env | {"TQDM_DISABLE": "1"} | extra


def spawn(args: list[str], *, env: dict, log_name: str, cwd=ROOT) -> subprocess.Popen:
    """A child in its own process group (stopped as a whole), its stderr kept in the data folder."""
    with open(settings.DATA_DIR / log_name, "ab") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(args, cwd=cwd, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=log)


def stop_group(process: subprocess.Popen, timeout: float = 60) -> None:
    """SIGTERM to the group, as Ctrl-C reaches serve's children; SIGKILL whatever outlives it."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


def wait_healthy(base_url: str, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"the server exited with {process.returncode}; see the logs in {settings.DATA_DIR}")
        try:
            if requests.get(f"{base_url}/api/health", timeout=2).status_code == 200:
                return
        except requests.RequestException:  # not listening yet, or still booting its workers
            pass
        time.sleep(0.3)
    sys.exit(f"{base_url} did not answer /api/health within {timeout} s")


def percentiles_ms(seconds: list[float], qs=(50, 95, 99)) -> list[float]:
    if not seconds:
        return [float("nan")] * len(qs)
    return [float(v) * 1000 for v in np.percentile(np.asarray(seconds), qs)]


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def stop_embedded_database() -> None:
    """Stop the scratch PostgreSQL if this process started it (the server is not left running)."""
    if EMBEDDED_DB_STARTED_HERE:
        from django.db import connections

        from memweb import embedded_db

        connections.close_all()
        embedded_db.stop(embedded_db.EmbeddedServer(settings.DATA_DIR))


# --- the stack and its data ------------------------------------------------------------------

def gunicorn_start(port: int, *, workers: int, threads: int, torch_threads: int | None, root=ROOT,
                   log_name: str = "bench-gunicorn.log") -> subprocess.Popen:
    """serve's web command line, with the worker and thread counts as options; `root`: the checkout
    whose code it serves (another checkout's server shares this one's database)."""
    env = offline_env(OMP_NUM_THREADS=str(torch_threads or max(1, (os.cpu_count() or 1) // workers)))
    return spawn([sys.executable, "-m", "gunicorn", "memweb.wsgi", "--bind", f"127.0.0.1:{port}",
                  "--workers", str(workers), "--threads", str(threads), "--access-logfile", "-",
                  "--no-control-socket"], env=env, log_name=log_name, cwd=root)


def bank_seeded(size: int) -> MemoryBank:
    """The bench bank holding at least `size` synthetic Orbs (90 % approved), appended to if short."""
    bank, _ = MemoryBank.objects.get_or_create(
        name=BANK, defaults={"slug": "bench-retrieve-load", "embedding_model": embedder().model_name,
                             "approved_only": True})
    have = Orb.objects.filter(bank=bank).count()
    if have < size:
        copy_rows(bank, Data(), have, size)
    return bank


def agent_key() -> str:
    """A fresh key of an operator (the role allowed to retrieve)."""
    agent, _ = get_user_model().objects.get_or_create(username="bench-agent")
    memberships_grant(user=agent, roles=[Role.OPERATOR])
    return ApiKey.issue(user=agent, name="retrieve load")[1]


def request_bodies(level: str) -> list[dict]:
    """Queries phrased like customers', tagged with the level so the server's log can be split by it."""
    texts = [sentence.format(item=item) for sentence, item in itertools.product(SENTENCES, ITEMS)]
    return [{"query": text, "context": {"turn": i % 7}, "domain": DOMAINS[i % 2], "client": level}
            for i, text in enumerate(texts)]


def body_encoded(body: dict, *, unique: str = "") -> bytes:
    """`unique`: a mark appended to the query, so that no two requests embed the same text (no cache hits)."""
    return json.dumps(body | {"query": f"{body['query']} {unique}"} if unique else body).encode()


# --- driving it --------------------------------------------------------------------------------

@dataclass
class Level:
    clients: int
    elapsed: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)  # HTTP status, or the exception's name

    @property
    def completed(self) -> int:
        return len(self.latencies)

    @property
    def errors(self) -> int:
        return sum(count for status, count in self.statuses.items() if status != 200)

    @property
    def throughput(self) -> float:
        return self.statuses.get(200, 0) / self.elapsed if self.elapsed else 0.0


def _client(url: str, headers: dict, bodies: list[dict], stop_at: float, budget, level: Level, lock,
            unique_mark: str) -> None:
    """One agent on its own keep-alive connection, sending the next request as soon as one returns."""
    session, latencies, statuses = requests.Session(), [], Counter()
    for n in itertools.count():
        if time.monotonic() >= stop_at or next(budget) <= 0:
            break
        data = body_encoded(bodies[n % len(bodies)], unique=f"(#{unique_mark}-{n})" if unique_mark else "")
        began = time.perf_counter()
        try:
            status = session.post(url, data=data, headers=headers, timeout=60).status_code
        except requests.RequestException as error:
            status = type(error).__name__
        latencies.append(time.perf_counter() - began)
        statuses[status] += 1
    session.close()
    with lock:
        level.latencies.extend(latencies)
        level.statuses.update(statuses)


def drive(url: str, key: str, *, clients: int, seconds: float, max_requests: int, tag: str,
          unique: bool = False) -> Level:
    level, lock = Level(clients), threading.Lock()
    remaining = itertools.count(max_requests, -1)  # next() is atomic under the GIL: a shared budget
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    bodies = request_bodies(tag)
    stop_at = time.monotonic() + seconds
    threads = [threading.Thread(target=_client, args=(url, headers, bodies[i::clients] or bodies, stop_at, remaining,
                                                      level, lock, f"{tag}-{i}" if unique else ""))
               for i in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    level.elapsed = time.perf_counter() - began
    return level


def server_stages(tag: str) -> str:
    """Median stage times the server logged for one level (its own view, without queueing)."""
    rows = list(RetrievalLog.objects.filter(client=tag).values_list("rewrite_ms", "embed_ms", "search_ms"))
    if not rows:
        return "no retrievals logged"
    rewrite, embed, search = np.median(np.asarray(rows, dtype=float), axis=0)
    return f"server p50: rewrite {rewrite:.2f} + embed {embed:.1f} + search {search:.1f} ms"


def report(level: Level, tag: str, server: str = "") -> None:
    p50, p95, p99 = percentiles_ms(level.latencies)
    bad = {status: count for status, count in level.statuses.items() if status != 200}
    say(f"{server}N={level.clients:>3}: {level.throughput:7.1f} req/s  p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  "
        f"p99 {p99:7.1f} ms  requests {level.completed:>6}  errors {level.errors}{f' {bad}' if bad else ''}  "
        f"({server_stages(tag)}; load average {load_average()})")


def record_level(level: Level, unique: bool) -> None:
    p95 = percentiles_ms(level.latencies, (95,))[0]
    detail = f"{'unique' if unique else 'repeating'} queries, {level.completed} requests, {level.errors} errors"
    record(f"retrieve.p95_ms.{level.clients}", p95, detail)
    record(f"retrieve.rps.{level.clients}", level.throughput, detail)


def saturation(levels: list[Level]) -> str:
    """The knee: the fewest clients that already get within 10 % of the best throughput (a rule
    that one noisy level on a shared machine cannot fool), and what more clients cost after it."""
    peak = max(levels, key=lambda level: level.throughput)
    knee = next(level for level in levels if level.throughput * SATURATION_GAIN >= peak.throughput)
    last = levels[-1]
    p95_knee, p95_last = (percentiles_ms(level.latencies, (95,))[0] for level in (knee, last))
    return (f"saturates at N={knee.clients}: {knee.throughput:.1f} req/s, within 10 % of the peak "
            f"({peak.throughput:.1f} req/s at N={peak.clients}); from N={knee.clients} to N={last.clients} "
            f"p95 goes {p95_knee:.0f} -> {p95_last:.0f} ms")


@dataclass
class Server:
    label: str
    root: object
    process: subprocess.Popen | None = None
    url: str = ""
    levels: list[Level] = field(default_factory=list)


def servers_start(servers: list[Server], args, slug: str) -> None:
    for n, server in enumerate(servers):
        port = free_port()
        server.process = gunicorn_start(port, workers=args.workers, threads=args.threads,
                                        torch_threads=args.torch_threads, root=server.root,
                                        log_name=f"bench-gunicorn-{n}.log")
        server.url = f"http://127.0.0.1:{port}/api/orbs/banks/{slug}/retrieve"
        say(f"{server.label}: {server.root} on 127.0.0.1:{port}")
    for server in servers:
        wait_healthy(server.url.split("/api/")[0], server.process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="concurrent clients per level")
    parser.add_argument("--seconds", type=float, default=15, help="measured time per level")
    parser.add_argument("--warmup-seconds", type=float, default=10, help="unmeasured load first (loads the embedder)")
    parser.add_argument("--max-requests", type=int, default=20_000, help="cap on requests per level")
    parser.add_argument("--orbs", type=int, default=5000, help="Orbs in the bank (90 %% approved)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes (serve: 2)")
    parser.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker (serve: 4)")
    parser.add_argument("--torch-threads", type=int, help="OMP_NUM_THREADS of each web worker (serve: CPUs / workers)")
    parser.add_argument("--unique-queries", action="store_true",
                        help="a serial number in every query, so no two requests embed the same text (no cache hits)")
    parser.add_argument("--compare-with", metavar="CHECKOUT",
                        help="another checkout (e.g. an export of the previous commit) served beside this one on the "
                             "same database; each level runs against both, one after the other")
    args = parser.parse_args()
    refuse_project_data("writes Orbs and retrieval logs")
    call_command("migrate", verbosity=0)
    call_command("createcachetable", verbosity=0)  # the API-key failure counters live there, as under serve
    bank, key = bank_seeded(args.orbs), agent_key()
    servers = [Server("this checkout", ROOT)] + ([Server("compared", args.compare_with)] if args.compare_with else [])
    say(f"{time.strftime('%Y-%m-%d %H:%M')}; {os.cpu_count()} CPUs; bank {bank.slug!r}: "
        f"{Orb.objects.filter(bank=bank).aggregate(n=Count('pk'))['n']:,} Orbs; gunicorn {args.workers} workers x "
        f"{args.threads} threads (torch threads {args.torch_threads or 'CPUs / workers'}); {args.seconds:.0f} s per level; "
        f"{'unique' if args.unique_queries else 'repeating'} queries; load average {load_average()}")
    try:
        servers_start(servers, args, bank.slug)
        for server in servers:
            warm = drive(server.url, key, clients=2 * args.workers, seconds=args.warmup_seconds,
                         max_requests=args.max_requests, tag="bench-load-warmup")
            say(f"{server.label} warm-up: {warm.completed} requests, errors {warm.errors} {dict(warm.statuses)}")
        for clients in sorted(args.clients):
            for server in servers:
                tag = f"bench-load-{clients}-{time.time_ns()}"
                server.levels.append(drive(server.url, key, clients=clients, seconds=args.seconds,
                                           max_requests=args.max_requests, tag=tag, unique=args.unique_queries))
                report(server.levels[-1], tag, f"{server.label:>14} " if len(servers) > 1 else "")
                if server is servers[0]:
                    record_level(server.levels[-1], args.unique_queries)
        for server in servers:
            say(f"{server.label}: {saturation(server.levels)}; errors in all levels: "
                f"{sum(level.errors for level in server.levels)}")
        say(f"load average at the end {load_average()}")
    finally:
        for server in servers:
            if server.process is not None:
                stop_group(server.process)
        stop_embedded_database()


if __name__ == "__main__":
    main()
