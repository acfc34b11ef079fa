"""The TypeScript client (clients/typescript): its committed types are what openapi-typescript makes of
the served OpenAPI document, it compiles with tsc, its own node tests pass (retries, error kinds), and
node runs its agent loop against a live memweb.
Its npm packages come from the registry (or npm's cache) into clients/typescript/node_modules."""
import json
import os
import subprocess

import pytest

from orbs.models import EpisodeRecord, MemoryBank, Orb, RetrievalLog
from tests.clients.conftest import ROOT

PACKAGE = ROOT / "clients" / "typescript"
REGENERATE = ("python manage.py export_openapi_schema --api memweb.api.api --output clients/typescript/openapi.json"
              " && (cd clients/typescript && npm run generate)")


def npm_installed() -> None:
    """`npm ci` when node_modules is missing or older than the lock file; a no-op otherwise."""
    installed = PACKAGE / "node_modules" / ".package-lock.json"
    if installed.exists() and installed.stat().st_mtime >= (PACKAGE / "package-lock.json").stat().st_mtime:
        return
    run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"])


def run(command: list[str], **options) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=PACKAGE, capture_output=True, text=True, timeout=600, **options)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}\n{done.stderr}"
    return done


def generated_types(schema: dict, tmp_path) -> str:
    """openapi-typescript run as `npm run generate` runs it, on `schema`, into tmp_path."""
    document, output = tmp_path / "openapi.json", tmp_path / "schema.ts"
    document.write_text(json.dumps(schema))
    script = json.loads((PACKAGE / "package.json").read_text())["scripts"]["generate"].split()
    assert script[0] == "openapi-typescript"
    arguments = [{"openapi.json": str(document), "src/schema.ts": str(output)}.get(arg, arg) for arg in script[1:]]
    run([str(PACKAGE / "node_modules" / ".bin" / "openapi-typescript"), *arguments])
    return output.read_text()


@pytest.mark.django_db(transaction=True)  # the live server's thread reads what the test wrote
def test_the_typescript_client_is_generated_from_the_schema_and_runs_the_agent_loop(tmp_path, client, live_server,
                                                                                   api_key):
    npm_installed()
    served = client.get("/api/openapi.json", HTTP_AUTHORIZATION=f"Bearer {api_key}").json()
    assert generated_types(served, tmp_path) == (PACKAGE / "src" / "schema.ts").read_text(), (
        f"clients/typescript/src/schema.ts differs from the served schema; regenerate it: {REGENERATE}")
    run([str(PACKAGE / "node_modules" / ".bin" / "tsc"), "-p", "tsconfig.json"])
    run(["node", "--test", "test/"])  # retries and error kinds against scripted answers

    environment = {"PATH": os.environ["PATH"], "MEMWEB_URL": live_server.url, "MEMWEB_API_KEY": api_key}
    ran = run(["node", "examples/agent-loop.mjs"], env=environment)

    assert ran.stdout.split() == ["done", "pending"]
    bank = MemoryBank.objects.get(slug="support")
    episode = EpisodeRecord.objects.get(episode_ref="ticket-2")
    assert episode.status == EpisodeRecord.Status.DONE and episode.orb.bank == bank
    assert Orb.objects.filter(bank=bank, outcome__icontains="order number before promising").exists()
    outcomes = RetrievalLog.objects.filter(bank=bank).values_list("outcome_success", "outcome_episode_ref")
    assert list(outcomes) == [(True, "ticket-2")] * 2
