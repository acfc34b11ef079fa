"""Capacity for sizing a deployment: episodes/s and retrievals/s on one node and on two.

    .venv/bin/python -m bench.capacity --tasks 130 --trials 2 --seconds 20 --clients 8

It builds the production layout on this machine (tests/support/cluster.py): one PostgreSQL over TCP,
one redis broker, and nodes with their own data folders, gunicorn web servers and Celery workers.
Then, one layout after another:

- episodes/s: an evaluation run launched through node A's API (offline backends: scripted agent,
  agenda customer), played by 1 worker process, 2 worker processes on one node, and 1 + 1 and
  2 + 2 on two nodes; with no memory and with MemOrb retrieval per turn; wall time from launch to
  the run's completion as the API reports it;
- retrievals/s: `POST /api/orbs/banks/<slug>/retrieve` from N client threads for a fixed time
  against one web node with 1 and 2 gunicorn processes, and against two nodes (the clients split
  between them), each query unique (no cache hits), on a bank of synthetic approved Orbs.

Every process shares this machine's cores, so two "nodes" here measure the software's scaling
(nothing is serialised by the design), not two machines' hardware. It prints a Markdown table for
docs/DEPLOYMENT.md with the load average. Scratch folders only; never run by the tests.
"""
import argparse
import os
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

from tests.support.cluster import Cluster

SEED_BANK = ("from bench.retrieve_load import bank_seeded, agent_key; "
             "print('bank', bank_seeded({size}).slug); print('key', agent_key())")
LOAD_TASKS = "from evaluation.services import taskset_builtin_load; taskset_builtin_load()"


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def api(base_url: str, key: str, method: str, path: str, **kwargs) -> dict:
    answer = requests.request(method, base_url + path, headers={"Authorization": f"Bearer {key}"}, timeout=120,
                              **kwargs)
    if answer.status_code >= 300:
        raise SystemExit(f"{method} {path}: {answer.status_code} {answer.text[:500]}")
    return answer.json()


def episodes_per_second(cluster: Cluster, key: str, *, memory: str, tasks: int, trials: int) -> float:
    """One run launched on node A and played by whichever workers are up; episodes over wall time.
    A MemOrb run starts from a fresh bank, as the protocol's first trial does."""
    node = cluster.nodes[0]
    memory_fields = {"memory_mode": "memorb", "per_turn": True} if memory == "memorb" else {}
    ids = [external_id for (external_id,) in cluster.sql(
        "SELECT external_id FROM evaluation_task ORDER BY external_id LIMIT %s", (tasks,))]
    began = time.perf_counter()
    run = api(node.base_url, key, "post", "/api/evaluation/runs/", json={
        "name": f"capacity ({memory})", "task_ids": ids, "trials": trials, "concurrency": 8, **memory_fields})
    while (status := api(node.base_url, key, "get", f"/api/evaluation/runs/{run['id']}")["status"]) not in (
            "completed", "failed", "cancelled"):
        time.sleep(0.5)
    if status != "completed":
        raise SystemExit(f"run {run['id']} ended {status}")
    return tasks * trials / (time.perf_counter() - began)


def workers_set(cluster: Cluster, per_node: list[int]) -> None:
    """Worker processes per node (0: none on that node), started fresh and seen beating."""
    for node, concurrency in zip(cluster.nodes, per_node):
        if node.worker is not None:
            node.worker_kill()
            node.worker = None
        if concurrency:
            node.worker_start(concurrency=concurrency)
    wanted = {node.name for node, concurrency in zip(cluster.nodes, per_node) if concurrency}
    while {name for (name,) in cluster.sql(
            "SELECT split_part(hostname, '@', 1) FROM memweb_workerheartbeat "
            "WHERE seen_at > now() - interval '3 seconds'")} < wanted:
        time.sleep(0.5)


def retrievals_per_second(urls: list[str], key: str, bank: str, *, clients: int, seconds: float, tag: str) -> float:
    from bench.retrieve_load import drive

    results, threads = [], []
    for number, url in enumerate(urls):
        share = max(1, clients // len(urls))
        target = f"{url}/api/orbs/banks/{bank}/retrieve"
        thread = threading.Thread(target=lambda t=target, n=number, s=share: results.append(
            drive(t, key, clients=s, seconds=seconds, max_requests=10**6, tag=f"{tag}-{n}", unique=True)))
        threads.append(thread)
        thread.start()
    for thread in threads:
        thread.join()
    errors = sum(level.errors for level in results)
    if errors:
        say(f"  {errors} retrievals failed")
    return sum(level.throughput for level in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=130)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--orbs", type=int, default=5000)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped"))  # the cluster is still closed (finally)

    cluster = Cluster(Path(tempfile.mkdtemp(prefix="mw-capacity-")))
    rows = []
    try:
        cluster.start()
        os.environ["DATABASE_URL"] = cluster.database_url  # bench.retrieve_load sets Django up on import
        cluster.manage("shell", "-c", LOAD_TASKS)
        seeded = cluster.manage("shell", "-c", SEED_BANK.format(size=args.orbs))
        bank, key = re.search(r"bank (\S+)", seeded).group(1), re.search(r"key (\S+)", seeded).group(1)
        a, b = cluster.node("node-a"), cluster.node("node-b")
        say(f"cluster up in {cluster.root}; bank {bank} with {args.orbs} Orbs")
        for label, per_node in (("1 node, 1 worker process", [1, 0]), ("1 node, 2 worker processes", [2, 0]),
                                ("2 nodes, 1 + 1 worker processes", [1, 1]), ("2 nodes, 2 + 2", [2, 2])):
            workers_set(cluster, per_node)
            if a.web is None:
                a.web_start()
            # Each fresh worker process loads the embedding model on its first MemOrb episode: not measured.
            episodes_per_second(cluster, key, memory="memorb", tasks=2 * sum(per_node), trials=1)
            figures = [episodes_per_second(cluster, key, memory=memory, tasks=args.tasks, trials=args.trials)
                       for memory in ("none", "memorb")]
            rows.append(("episodes/s", label, *figures, load_average()))
            say(f"{label}: {figures[0]:.1f} episodes/s without memory, {figures[1]:.1f} with MemOrb "
                f"(load {load_average()})")
        workers_set(cluster, [0, 0])
        for label, nodes, web_workers in (("1 node, 1 web process", [a], 1), ("1 node, 2 web processes", [a], 2),
                                          ("2 nodes, 1 + 1 web processes", [a, b], 1)):
            for node in nodes:
                if node.web is not None:
                    node.stop()
                    node.web = None
                node.web_start(workers=web_workers)
            rate = retrievals_per_second([node.base_url for node in nodes], key, bank, clients=args.clients,
                                         seconds=args.seconds, tag=label)
            rows.append(("retrievals/s", label, rate, None, load_average()))
            say(f"{label}: {rate:.1f} retrievals/s with {args.clients} clients (load {load_average()})")
    finally:
        cluster.close()
    print("\n| measure | layout | no memory / retrieve | MemOrb per turn | load average |\n| --- | --- | --- | --- | --- |")
    for measure, label, first, second, load in rows:
        print(f"| {measure} | {label} | {first:.1f} | {'' if second is None else f'{second:.1f}'} | {load} |")


if __name__ == "__main__":
    main()
