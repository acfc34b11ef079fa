"""A webhook receiver for the tests: a real HTTP server on loopback, in a thread, that records every
request and answers from a script of status codes. `verified` checks a request's signature the way
a receiver's own code would, knowing only the secret (it shares no code with memweb.webhooks)."""
import hashlib
import hmac
import json
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict
    body: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.body)


def verified(request: Received, secret: str) -> bool:
    """What the README's receiver does: HMAC-SHA256 of "<timestamp>.<body>", compared in constant time."""
    signed = request.headers["X-Memweb-Timestamp"].encode() + b"." + request.body
    expected = "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, request.headers.get("X-Memweb-Signature", ""))


class Receiver:
    def __init__(self):
        self.received: list[Received] = []
        self.answers: deque[tuple[int, dict, bytes]] = deque()  # answered in order; 200 once they run out
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append(Received(self.path, dict(self.headers), body))
                status, headers, answer = receiver.answers.popleft() if receiver.answers else (200, {}, b"ok")
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):  # keep the test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/memweb"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, *statuses: int, headers: dict | None = None, body: bytes = b"ok") -> None:
        self.answers.extend((status, headers or {}, body) for status in statuses)


@pytest.fixture
def receiver(settings):
    """A receiver on loopback, which memweb posts to only because the allow setting names it."""
    settings.MEMWEB_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    made = Receiver()
    made.thread.start()
    yield made
    made.server.shutdown()
    made.server.server_close()
