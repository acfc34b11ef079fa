"""Start real memweb processes (Celery workers) against the test database."""
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def database_url_for_tests() -> str:
    """A DATABASE_URL naming the database pytest-django created for this session."""
    scheme, rest = settings.DATABASE_URL.split("://", 1)
    credentials_and_host, tail = rest.split("/", 1)
    query = tail.split("?", 1)[1] if "?" in tail else ""
    name = connection.settings_dict["NAME"]
    return f"{scheme}://{credentials_and_host}/{name}" + (f"?{query}" if query else "")


def subprocess_env(**extra: str) -> dict:
    """This environment for a child process, minus what the browser fixture sets for
    the test process only (it would disable Django's async-safety checks there too)."""
    env = {**os.environ, **extra}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


def worker_env(broker_url: str | None = None, **extra: str) -> dict:
    # A test worker loads the embedding model when a task needs it: a warm-up competing with the test's
    # own processes for a busy 2-core machine slows every worker test (memweb/celery.py).
    env = subprocess_env(**{"DATABASE_URL": database_url_for_tests(), "MEMWEB_WORKER_HEARTBEAT_SECONDS": "1",
                            "MEMWEB_EMBEDDING_WARMUP": "false", **extra})
    env.pop("CELERY_BROKER_URL", None)
    if broker_url:
        env["CELERY_BROKER_URL"] = broker_url
    return env


@contextmanager
def celery_worker(env: dict, *, concurrency: int = 1, hostname: str = "test-worker@%h"):
    """A real `celery worker` process; killed (with its children) on exit. Its output is read
    while it runs, into `process.output_lines`: a worker logging a fault's tracebacks would
    otherwise fill the pipe and block on its next line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "memweb", "worker", "--loglevel", "INFO",
         "--concurrency", str(concurrency), "--hostname", hostname, "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    process.output_lines = []
    threading.Thread(target=lambda: process.output_lines.extend(process.stdout), daemon=True).start()
    try:
        yield process
    finally:
        stop_process_group(process)


def stop_process_group(process: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the process group, SIGKILL what remains after `timeout` seconds. Waits without
    reading the output (the one reading it is its owner's)."""
    import signal

    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_until(predicate, *, timeout: float, interval: float = 0.2, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


def wait_on_progress(done, *, progress, stall: float, interval: float = 0.5, message: str = "condition"):
    """Wait until `done()` is true for as long as `progress()` keeps changing: a busy machine
    only makes the wait longer, a stuck one fails after `stall` seconds without a change."""
    last, moved_at = progress(), time.monotonic()
    while True:
        value = done()
        if value:
            return value
        now, current = time.monotonic(), progress()
        if current != last:
            last, moved_at = current, now
        elif now - moved_at > stall:
            raise AssertionError(f"no progress for {stall}s (at {last!r}) waiting for {message}")
        time.sleep(interval)


def output_tail(process: subprocess.Popen, lines: int = 40) -> str:
    """The last lines a `celery_worker` process printed, for a failure message."""
    return "".join(process.output_lines[-lines:])


def free_port() -> int:
    """A loopback port nothing listens on now, for a server a test starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A redis-server without persistence (a restart loses every message, as a crashed broker's
    does) on a port of its own, that can be killed and started again on the same port. Used by
    the broker-fault tests and bench.soak."""

    def __init__(self, port: int):
        self.port, self.process = port, None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(self._answers, timeout=30, message="redis-server to answer")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        stop_process_group(self.process, timeout=5)
