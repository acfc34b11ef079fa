"""memweb on two nodes: one PostgreSQL over TCP, one redis broker, two hosts' worth of web and worker
processes with their own data folders (tests/support/cluster.py). A run launched on node A is played by
both nodes' workers; node B's worker dies mid-run and node A finishes it, every episode exactly once;
a session made on A works on B; a job started on B is seen on A, finished; a node with its own key refuses to
start."""
import re
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
import requests

from tests.support.cluster import Cluster
from tests.support.processes import ROOT, wait_on_progress, wait_until

pytestmark = [pytest.mark.worker, pytest.mark.two_nodes]

PASSWORD = "two-nodes-share-one-database"
TASKS, TRIALS = 24, 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        cluster.start()
        cluster.manage("create_user", "operator", "--role", "operator", "--password", PASSWORD)
        cluster.manage("shell", "-c", "from evaluation.services import taskset_builtin_load; taskset_builtin_load()")
        # One episode per message, so that both nodes' workers take part in a small run.
        a, b = (cluster.node(name, MEMWEB_RUN_CHUNK_EPISODES="1") for name in ("node-a", "node-b"))
        for node in (a, b):
            node.worker_start()
            node.web_start()
        wait_until(lambda: _live_workers(cluster) == {"node-a", "node-b"}, timeout=300,
                   message="both nodes' workers to beat")
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def api_key(cluster) -> str:
    printed = cluster.manage("create_api_key", "operator", "--name", "two-node test")
    return re.search(r"key: (\S+)", printed).group(1)


def test_it_finishes_a_run_on_node_a_when_node_b_dies_mid_run_with_every_episode_once(cluster, api_key):
    a, b = cluster.nodes
    run = _api(a, api_key, "post", "/api/evaluation/runs/", json={
        "name": "two nodes", "task_ids": [f"shop-app-{n:03d}" for n in range(1, TASKS + 1)], "trials": TRIALS, "concurrency": 4})
    wait_on_progress(lambda: _played_by(cluster, run["id"]).keys() >= {"node-a", "node-b"},
                     progress=lambda: _played_by(cluster, run["id"]), stall=120,
                     message="episodes played by both nodes' workers")
    assert _status(a, api_key, run["id"]) != "completed", "the run ended before node B could be killed mid-run"
    b.worker_kill()

    wait_on_progress(lambda: _status(a, api_key, run["id"]) == "completed",
                     progress=lambda: sum(_played_by(cluster, run["id"]).values()), stall=180,
                     message=f"the run to complete on node A\n{a.log_tail('worker')}")
    rows, episodes, distinct = cluster.sql(
        "SELECT count(*), count(episode_id), count(DISTINCT episode_id) FROM evaluation_runepisode "
        "WHERE run_id = %s AND status = 'done'", (run["id"],))[0]
    assert rows == episodes == distinct == TASKS * TRIALS
    orphans = cluster.sql("SELECT count(*) FROM evaluation_episode e WHERE NOT EXISTS "
                          "(SELECT 1 FROM evaluation_runepisode r WHERE r.episode_id = e.id)")[0][0]
    assert orphans == 0
    assert _played_by(cluster, run["id"])["node-a"] > 0


def test_it_keeps_a_session_signed_in_on_node_a_on_node_b(cluster):
    a, b = cluster.nodes
    browser = requests.Session()
    login = browser.get(f"{a.base_url}/login/", timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    signed_in = browser.post(f"{a.base_url}/login/", data={
        "username": "operator", "password": PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{a.base_url}/login/"}, timeout=30, allow_redirects=False)
    assert signed_in.status_code == 302 and "/login/" not in signed_in.headers["Location"]

    on_b = browser.get(f"{b.base_url}/evaluation/runs/", timeout=30, allow_redirects=False)
    assert on_b.status_code == 200
    assert "operator" in on_b.text


def test_it_shows_on_node_a_a_job_started_on_node_b(cluster, api_key):
    a, b = cluster.nodes
    bank = _api(a, api_key, "post", "/api/orbs/banks", json={"name": "made on node A"})
    job = _api(b, api_key, "post", f"/api/orbs/banks/{bank['slug']}/history/verify")

    status_path = urlsplit(job["status_url"]).path  # the URL names node B: ask node A for the same path
    seen_on_a = wait_until(lambda: _finished_job(a, api_key, status_path), timeout=300,
                           message="node A to show node B's job finished")
    assert seen_on_a["id"] == job["id"] and seen_on_a["status"] == "succeeded"


def test_it_refuses_to_start_a_node_whose_secret_key_differs(cluster, tmp_path):
    env = cluster.env(data_dir=tmp_path, SECRET_KEY="a-key-of-its-own-" + "x" * 40)
    for command in (["gunicorn", "memweb.wsgi", "--bind", "127.0.0.1:0", "--workers", "1"],
                    ["celery", "-A", "memweb", "worker", "--hostname", "stray@%h", "--without-gossip"]):
        started = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=300)
        assert started.returncode != 0
        assert "SECRET_KEY differs" in started.stdout + started.stderr


def _api(node, key: str, method: str, path: str, **kwargs) -> dict:
    answer = requests.request(method, f"{node.base_url}{path}", headers={"Authorization": f"Bearer {key}"},
                              timeout=60, **kwargs)
    assert answer.status_code < 300, f"{method} {path} on {node.name}: {answer.status_code} {answer.text[:500]}"
    return answer.json()


def _status(node, key: str, run_id: int) -> str:
    return _api(node, key, "get", f"/api/evaluation/runs/{run_id}")["status"]


def _finished_job(node, key: str, status_url: str) -> dict | None:
    job = _api(node, key, "get", status_url)
    return job if job["status"] in ("succeeded", "failed") else None


def _played_by(cluster, run_id: int) -> dict[str, int]:
    """Finished episodes of the run by the node whose worker played them."""
    rows = cluster.sql("SELECT split_part(claimed_by, '@', 1), count(*) FROM evaluation_runepisode "
                       "WHERE run_id = %s AND status = 'done' GROUP BY 1", (run_id,))
    return dict(rows)


def _live_workers(cluster) -> set[str]:
    rows = cluster.sql("SELECT split_part(hostname, '@', 1) FROM memweb_workerheartbeat "
                       "WHERE seen_at > now() - interval '30 seconds'")
    return {name for (name,) in rows}
