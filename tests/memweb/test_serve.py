"""`manage.py serve` (command 1 after installing): it prepares a fresh database,
prints the admin password once, serves pages with a worker beside it, restarts
whichever of worker, web server and database dies, and on Ctrl-C leaves no web
server, worker or PostgreSQL process behind."""
import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request

import psutil
import pytest

from memweb import embedded_db
from memweb.management.commands.serve import WEB_WORKERS
from tests.support.processes import ROOT, free_port, subprocess_env, wait_until

pytestmark = pytest.mark.worker


# Queues a probe task through serve's own database and broker and waits for a worker to run it.
_PROBE = """
import time
from memweb.services import probe_queue
probe = probe_queue()
deadline = time.monotonic() + 240
while probe.done_at is None and time.monotonic() < deadline:
    time.sleep(0.5)
    probe.refresh_from_db()
print(f"probe done by {probe.worker}" if probe.done_at else "probe not done")
"""


def _serve_env(data_dir, **extra) -> dict:
    env = subprocess_env(MEMWEB_DATA_DIR=str(data_dir), **extra)
    env.pop("DATABASE_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    return env


class _Serve:
    def __init__(self, data_dir, port, *, warm_up: bool = False):
        self.data_dir, self.port = data_dir, port
        # The demo has tests of its own; here it would only add minutes to each start. So would the web
        # workers' loads of the embedding model, which one test checks (warm_up) and the others leave off.
        env = _serve_env(data_dir, MEMWEB_PORT=str(port), MEMWEB_EMBEDDING_WARMUP=str(warm_up).lower())
        self.process = subprocess.Popen([sys.executable, "manage.py", "serve", "--no-demo"], cwd=ROOT, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def descendants(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children(recursive=True)

    def worker_pid(self) -> int | None:
        """The Celery main process: serve's own child (its pool processes are the worker's children)."""
        try:
            children = psutil.Process(self.process.pid).children()
            return next((child.pid for child in children if "celery" in " ".join(child.cmdline())), None)
        except psutil.Error:  # a child that exited while we looked
            return None

    def wait_until_serving(self) -> None:
        wait_until(lambda: _status(self.health_url) == 200 or self.process.poll() is not None,
                   timeout=240, interval=1, message="the dashboard to answer")
        assert self.process.poll() is None, self.output
        wait_until(self.worker_pid, timeout=60, message="the worker")

    def wait_until_running(self) -> None:
        wait_until(lambda: "memweb is running" in self.output or self.process.poll() is not None,
                   timeout=240, interval=1, message="serve to start")

    def wait_for_output(self, text: str, *, count: int = 1) -> None:
        wait_until(lambda: self.output.count(text) >= count or self.process.poll() is not None,
                   timeout=240, interval=0.5, message=repr(text))
        assert self.output.count(text) >= count, self.output

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/health"

    def probe(self) -> str:
        result = subprocess.run([sys.executable, "manage.py", "shell", "-c", _PROBE], cwd=ROOT,
                                env=_serve_env(self.data_dir), capture_output=True, text=True, timeout=400)
        return result.stdout + result.stderr

    def interrupt(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=90)

    def stopped(self) -> int:
        """Its exit code, once stopped: interrupted here as soon as it runs, if it runs still."""
        if self.process.poll() is None:
            self.wait_until_running()
            return self.interrupt()
        return self.process.returncode


def _status(url: str) -> int:
    request = urllib.request.Request(url, method="GET")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def _connection_after_refusal(port: int, *, body_bytes: int) -> tuple[str, str, str]:
    """Refuse a body (no key: 401 before it is read) on a kept-alive connection, then ask for
    /api/health on the same connection: (status, the Connection header, what the second request got)."""
    body = b"x" * body_bytes
    request = (b"POST /api/orbs/banks/x/retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        # The server answers before it reads a refused body, and may close while it is still coming.
        sender = threading.Thread(target=_send_until_closed, args=(connection, request), daemon=True)
        sender.start()
        first = _response(connection)
        sender.join(timeout=10)
        if first.getheader("Connection") == "close":
            return str(first.status), "close", "ended" if _closed_by_server(connection) else "still open"
        connection.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return str(first.status), first.getheader("Connection"), str(_response(connection).status)


def _closed_by_server(connection: socket.socket) -> bool:
    try:
        return connection.recv(1) == b""
    except ConnectionResetError:  # closed with the refused body unread: a reset is a close too
        return True
    except TimeoutError:
        return False


def _send_until_closed(connection: socket.socket, data: bytes) -> None:
    try:
        connection.sendall(data)
    except OSError:  # the server closed the connection: what the test asks about
        pass


def _response(connection: socket.socket) -> http.client.HTTPResponse:
    # Nothing follows a response before the next request, so each may read through a file of its own.
    response = http.client.HTTPResponse(connection)
    response.begin()
    response.read()
    return response


def _postgres_processes(data_dir) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["name", "cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if str(data_dir) in cmdline and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


@pytest.fixture(scope="module")
def first_start(tmp_path_factory):
    """serve's first start on a fresh data folder, with the model warm-up on. Each start on a fresh folder
    migrates a new database (up to a minute), so the later tests here start again on this folder once
    it has stopped (the Ctrl-C test stops it; a test run without that one stops it itself)."""
    serve = _Serve(tmp_path_factory.mktemp("first-start") / "data", free_port(), warm_up=True)
    try:
        yield serve
    finally:
        if serve.process.poll() is None:
            serve.interrupt()


def test_it_serves_then_stops_everything_on_ctrl_c(first_start):
    serve = first_start
    data_dir, port = serve.data_dir, serve.port
    try:
        wait_until(lambda: _status(f"http://127.0.0.1:{port}/api/health") == 200 or serve.process.poll() is not None,
                   timeout=240, interval=1, message="the dashboard to answer")
        assert serve.process.poll() is None, serve.output
        assert "password:" in serve.output
        assert _status(f"http://127.0.0.1:{port}/") in (200, 302)
        children = serve.descendants()
        assert any("celery" in " ".join(child.cmdline()) for child in children)
        assert any("gunicorn" in " ".join(child.cmdline()) for child in children)
        assert _postgres_processes(data_dir)
        assert _connection_after_refusal(port, body_bytes=3 * 1024 * 1024) == ("401", "close", "ended")
        assert _connection_after_refusal(port, body_bytes=1024) == ("401", "keep-alive", "200")
        # Each web worker loaded the embedding model as it started, before any request asked for it.
        serve.wait_for_output("as a web worker started", count=WEB_WORKERS)
        assert "could not be loaded" not in serve.output
    finally:
        exit_code = serve.interrupt()

    assert exit_code == 0, serve.output
    assert "stopped" in serve.output
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert not _postgres_processes(data_dir)


def test_it_reuses_the_admin_on_a_second_start(first_start):
    first = first_start
    assert first.stopped() == 0, first.output
    second = _Serve(first.data_dir, free_port())
    second.wait_until_running()
    assert second.interrupt() == 0, second.output
    assert "password:" in first.output
    assert "password:" not in second.output
    assert "Admin account exists" in second.output


def test_it_gives_up_on_a_web_server_that_keeps_dying(first_start):
    assert first_start.stopped() == 0, first_start.output
    with socket.socket() as taken:  # the web server's port, held by another program
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        data_dir = first_start.data_dir
        serve = _Serve(data_dir, taken.getsockname()[1])
        exit_code = serve.process.wait(timeout=600)

    assert exit_code == 1, serve.output
    assert serve.output.count("memweb: restarted the web server") == 5
    assert "giving up: the web server was restarted 5 times" in serve.output
    assert "memweb stopped" in serve.output
    assert not _postgres_processes(data_dir)


@pytest.fixture(scope="module")
def serving(first_start):
    """One serve for the supervision tests, on the first start's folder (the tests above have stopped it)."""
    assert first_start.stopped() == 0, first_start.output
    serve = _Serve(first_start.data_dir, free_port())
    try:
        serve.wait_until_serving()
        yield serve
    finally:
        serve.interrupt()


def test_it_restarts_a_killed_worker(serving):
    killed = serving.worker_pid()
    os.killpg(killed, signal.SIGKILL)  # the worker and its pool processes, as the OOM killer would

    serving.wait_for_output(f"the worker (PID {killed}) was killed by SIGKILL")
    serving.wait_for_output("restarted the worker")
    assert serving.worker_pid() not in (None, killed)
    assert "probe done by celery@" in serving.probe()


def test_it_restarts_a_killed_database_and_the_web_and_worker_work_again(serving):
    server = embedded_db.EmbeddedServer(serving.data_dir)
    killed = embedded_db.postmaster_pid(server)
    os.kill(killed, signal.SIGKILL)

    serving.wait_for_output(f"PostgreSQL (PID {killed}) is no longer running")
    serving.wait_for_output("restarted the database")
    # Every web thread's kept connection was cut: none may fail a request for it.
    assert [_status(serving.health_url) for _ in range(16)] == [200] * 16
    assert "probe done by celery@" in serving.probe()
    # Paused while the database was down, the worker did not spin on connection errors (a traceback a
    # second); what it logged in the moment before the supervisor saw the fault is not asked about.
    outage = serving.output.split("the worker is paused until the database is back")[-1]
    assert "Frequent restarts detected" not in outage.split("restarted the database")[0]


def test_it_restarts_a_database_whose_socket_file_vanished(serving):
    server = embedded_db.EmbeddedServer(serving.data_dir)
    restarts = serving.output.count("restarted the database")
    server.socket_file.unlink()

    serving.wait_for_output(f"its socket file {server.socket_file} is gone")
    serving.wait_for_output("restarted the database", count=restarts + 1)
    assert server.socket_file.exists()
    assert [_status(serving.health_url) for _ in range(16)] == [200] * 16
