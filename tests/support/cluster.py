"""memweb on two nodes on one machine, for the scale-out test and bench.capacity.

One PostgreSQL reached over TCP (the embedded server, listening on loopback), one redis broker, and per
node its own data folder, gunicorn web server and Celery worker. Nodes share nothing but the database,
the broker and the SECRET_KEY, as nodes on two hosts would.
"""
import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import requests

from memweb import embedded_db
from tests.support.processes import ROOT, RedisServer, free_port, stop_process_group, subprocess_env, wait_until

DATABASE = "memweb"


class Node:
    """One memweb host: a web server and a worker with their own data folder."""

    def __init__(self, name: str, env: dict):
        self.name, self.env = name, env
        self.port = free_port()
        self.web = self.worker = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def web_start(self, *, workers: int = 1) -> None:
        """gunicorn as docs/DEPLOYMENT.md runs it: each process embeds with its share of the cores."""
        torch_threads = str(max(1, (os.cpu_count() or 1) // workers))
        self.web = _spawn([sys.executable, "-m", "gunicorn", "memweb.wsgi", "--bind", f"127.0.0.1:{self.port}",
                           "--workers", str(workers), "--threads", "4", "--config", "python:memweb.gunicorn_conf"],
                          self.env | {"OMP_NUM_THREADS": torch_threads}, self._log("web"))
        wait_until(self._web_answers, timeout=180, message=f"{self.name}'s web server to answer")

    def worker_start(self, *, concurrency: int = 1) -> None:
        self.worker = _spawn([sys.executable, "-m", "celery", "-A", "memweb", "worker", "--loglevel", "INFO",
                              "--concurrency", str(concurrency), "--hostname", f"{self.name}@%h",
                              "--without-gossip", "--without-mingle"], self.env, self._log("worker"))

    def worker_kill(self) -> None:
        """SIGKILL the worker and its pool: no shutdown, as a lost host."""
        os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait()

    def stop(self) -> None:
        for process in (self.web, self.worker):
            if process is not None:
                stop_process_group(process)

    def log_tail(self, which: str, chars: int = 3000) -> str:
        path = Path(self.env["MEMWEB_DATA_DIR"]) / f"{which}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def _log(self, which: str) -> Path:
        return Path(self.env["MEMWEB_DATA_DIR"]) / f"{which}.log"

    def _web_answers(self) -> bool:
        if self.web.poll() is not None:
            raise AssertionError(f"{self.name}'s web server exited:\n{self.log_tail('web')}")
        try:
            return requests.get(f"{self.base_url}/login/", timeout=5).status_code == 200
        except requests.RequestException:
            return False


class Cluster:
    """The shared services and the nodes; `close()` stops and removes everything."""

    def __init__(self, root: Path):
        self.root = root
        self.server = embedded_db.EmbeddedServer(root / "db", free_port())
        self.broker = RedisServer(free_port())
        self.secret_key = secrets.token_urlsafe(50)
        self.nodes: list[Node] = []

    @property
    def database_url(self) -> str:
        return self.server.url(DATABASE)

    def start(self) -> None:
        embedded_db.ensure_running(self.server.data_dir, DATABASE, tcp_port=self.server.tcp_port)
        self.broker.start()
        self.manage("migrate", "--no-input")
        self.manage("createcachetable")
        self.manage("collectstatic", "--no-input", "--verbosity", "0")  # each node serves the same files

    def node(self, name: str, **extra_env: str) -> Node:
        data_dir = self.root / name
        data_dir.mkdir(parents=True, exist_ok=True)
        node = Node(name, self.env(data_dir=data_dir, **extra_env))
        self.nodes.append(node)
        return node

    def env(self, *, data_dir: Path, **extra: str) -> dict:
        shared = {"DATABASE_URL": self.database_url, "CELERY_BROKER_URL": self.broker.url, "SECRET_KEY": self.secret_key,
                  "MEMWEB_DATA_DIR": str(data_dir), "MEMWEB_WORKER_HEARTBEAT_SECONDS": "1", "TQDM_DISABLE": "1"}
        return subprocess_env(**(shared | extra))

    def manage(self, *args: str, **extra_env: str) -> str:
        """A management command run as an operator on any node would run it."""
        env = self.env(data_dir=self.root / "manage", **extra_env)
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600)
        if done.returncode != 0:
            raise AssertionError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def sql(self, query: str, params: tuple = ()) -> list[tuple]:
        with psycopg.connect(self.database_url) as conn:
            return conn.execute(query, params).fetchall()

    def close(self) -> None:
        for node in self.nodes:
            node.stop()
        if self.broker.process is not None:
            self.broker.kill()
        embedded_db.stop(self.server)
        shutil.rmtree(self.root, ignore_errors=True)


def _spawn(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "ab") as output:
        return subprocess.Popen(args, cwd=ROOT, env=env, start_new_session=True, stdout=output,
                                stderr=subprocess.STDOUT)
