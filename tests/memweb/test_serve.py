"""`manage.py serve` (command 1 after installing): it prepares a fresh database,
prints the admin password once, serves pages with a worker beside it, and on
Ctrl-C leaves no web server, worker or PostgreSQL process behind."""
import http.client
import signal
import socket
import subprocess
import sys
import threading
import urllib.request

import psutil
import pytest

from tests.support.processes import ROOT, free_port, subprocess_env, wait_until

pytestmark = pytest.mark.worker


class _Serve:
    def __init__(self, data_dir, port):
        env = subprocess_env(MEMWEB_DATA_DIR=str(data_dir), MEMWEB_PORT=str(port))
        env.pop("DATABASE_URL", None)
        env.pop("CELERY_BROKER_URL", None)
        # The demo has tests of its own; here it would only add minutes to each start.
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

    def interrupt(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=90)


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


def test_it_serves_then_stops_everything_on_ctrl_c(tmp_path):
    data_dir, port = tmp_path / "data", free_port()
    serve = _Serve(data_dir, port)
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
    finally:
        exit_code = serve.interrupt()

    assert exit_code == 0, serve.output
    assert "stopped" in serve.output
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert not _postgres_processes(data_dir)


def test_it_reuses_the_admin_on_a_second_start(tmp_path):
    data_dir = tmp_path / "data"
    first = _Serve(data_dir, free_port())
    wait_until(lambda: "memweb is running" in first.output or first.process.poll() is not None,
               timeout=240, interval=1, message="the first start")
    assert first.interrupt() == 0, first.output
    second = _Serve(data_dir, free_port())
    wait_until(lambda: "memweb is running" in second.output or second.process.poll() is not None,
               timeout=240, interval=1, message="the second start")
    assert second.interrupt() == 0, second.output
    assert "password:" in first.output
    assert "password:" not in second.output
    assert "Admin account exists" in second.output
