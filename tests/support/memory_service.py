"""The example BM25 memory service (examples/bm25_memory_service), started as its own process, as a
memory service anyone built would run beside memweb: the tests reach it only over HTTP."""
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[2] / "examples" / "bm25_memory_service" / "bm25_service.py"
KEY = "bm25-test-key-not-a-secret"


@contextmanager
def bm25_service(*, faults: str = "", slow_seconds: float = 1.0, key: str = KEY) -> Iterator[str]:
    """The service on a free loopback port; its base URL until the block ends."""
    process = subprocess.Popen([sys.executable, str(SERVICE), "--port", "0", "--key", key, "--faults", faults,
                                "--slow-seconds", str(slow_seconds)], stdout=subprocess.PIPE, text=True)
    try:
        first = process.stdout.readline().strip()
        if not first.startswith("listening on "):
            raise RuntimeError(f"the BM25 service did not start: {first!r}")
        yield first.removeprefix("listening on ")
    finally:
        process.terminate()
        process.wait(timeout=10)
