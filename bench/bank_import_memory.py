"""A hostile bank file's cost: a valid header line, then `--lines` lines of `{}`, sent to the import
API (POST /api/orbs/banks/import, in-process with Django's test client and an operator's key), each
size in a fresh process.

    MEMWEB_DATA_DIR=/tmp/mw-bench-import .venv/bin/python -m bench.bank_import_memory --lines 20000 200000

Prints, per size: seconds, the peak of Python's allocations during the request (tracemalloc; the
embedder is loaded before it starts), the growth of the process's peak resident memory, the status,
the answer's size, the problems counted and those listed. It writes nothing (the file is refused),
but migrates the scratch database, so it refuses the checkout's own data folder. Never run by the
tests.
"""
import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc

# isort: off
from bench.orbs_retrieval import say  # sets Django up
# isort: on
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from bench.retrieve_load import load_average, refuse_project_data, stop_embedded_database  # noqa: E402
from memweb.embeddings import embedder  # noqa: E402
from memweb.models import ApiKey, memberships_grant  # noqa: E402
from memweb.roles import Role  # noqa: E402


def hostile_file(lines: int, model_name: str) -> bytes:
    header = {"type": "bank", "format": "memweb.orbs", "format_version": 1, "name": "hostile",
              "embedding_model": model_name, "created_at": "2026-01-01T00:00:00+00:00", "description": "",
              "retrieval_k": 5, "approved_only": True, "min_score": 0.0, "near_duplicate_threshold": 0.95,
              "auto_approve": "never", "auto_approve_min_reward": 1.0, "prompt_token_budget": 600}
    return (json.dumps(header) + "\n" + "{}\n" * lines).encode()


def _operator_key() -> str:
    user, _ = get_user_model().objects.get_or_create(username="bench-importer")
    memberships_grant(user=user, roles=[Role.OPERATOR])
    return ApiKey.issue(user=user, name="bench")[1]


def measure(lines: int) -> dict:
    """One size, in this process: the upload built, then its request measured."""
    call_command("migrate", verbosity=0)
    call_command("createcachetable", verbosity=0)  # the API key's failure counter lives there
    data = hostile_file(lines, embedder().model_name)
    headers = {"Authorization": f"Bearer {_operator_key()}", "Host": "localhost"}
    # Error pages link the CSS by its collected name; this process never collected static files.
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    client = Client()
    client.post("/api/orbs/banks/import", {"file": SimpleUploadedFile("warm.jsonl", b"{}\n")}, headers=headers)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    began = time.perf_counter()
    answer = client.post("/api/orbs/banks/import", {"file": SimpleUploadedFile("hostile.jsonl", data)}, headers=headers)
    seconds = time.perf_counter() - began
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    body = answer.json()
    return {"lines": lines, "bytes": len(data), "status": answer.status_code, "answer_kb": len(answer.content) // 1024,
            "seconds": round(seconds, 2), "python_peak_mb": round(peak / 2**20, 1),
            "rss_growth_mb": round(rss_growth / 1024, 1), "problems": body.get("problems", len(body["errors"])),
            "listed": len(body["errors"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[20000, 200000])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child process measuring one size
    args = parser.parse_args()
    refuse_project_data("migrates its database")
    try:
        if args.one:
            print(json.dumps(measure(args.one)))
            return
        say(f"load average {load_average()}")
        for lines in args.lines:
            child = subprocess.run([sys.executable, "-m", "bench.bank_import_memory", "--one", str(lines)],
                                   capture_output=True, text=True, check=True)
            say(child.stdout.strip().splitlines()[-1])
        say(f"load average {load_average()}")
    finally:
        stop_embedded_database()


if __name__ == "__main__":
    main()
