"""memweb.client against a real server: pytest-django's live server (real HTTP, real PostgreSQL) for the
API's behaviour, and a scripted local HTTP server for what a healthy memweb never answers (429, 503).
The README's agent loop is run exactly as written."""
import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memweb.client import (
    AsyncMemwebClient,
    Ingest,
    MemwebClient,
    MemwebConnectionError,
    NotFound,
    RateLimited,
    ServerError,
    Transition,
    Unauthorized,
    ValidationFailed,
)
from memweb.models import ApiKey
from orbs.dmrm.models import DMRMSettings
from orbs.models import EpisodeRecord, Orb, RetrievalLog
from orbs.services import bank_get_or_create, orb_approve, orb_from_episode
from tests.orbs.conftest import success_trajectory

ROOT = Path(__file__).resolve().parents[2]
README_EXAMPLE = re.compile(r"```python\n(# memweb-client-example.*?)```", re.DOTALL)
server_db = pytest.mark.django_db(transaction=True)  # the live server's thread reads what the test wrote


@pytest.fixture
def api_key(operator_user) -> str:
    return ApiKey.issue(user=operator_user, name="agent")[1]


@pytest.fixture
def shop(db):
    return bank_get_or_create(name="shop")


@pytest.fixture
def memweb(live_server, api_key):
    with MemwebClient(live_server.url, api_key, max_retries=0) as client:
        yield client


def run_coroutine(coroutine):
    """asyncio.run in a thread of its own: once a browser test has run, Playwright keeps an event loop
    running in the test session's thread, where asyncio.run refuses to start another."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def approved_orb(bank, text: str) -> Orb:
    orb = orb_from_episode(bank=bank, trajectory=success_trajectory(text, domain="appliances")).orb
    return orb_approve(orb_id=orb.pk, expected_version=orb.version, actor=None)


# --- against the live server --------------------------------------------------------------------------

@server_db
def test_the_readme_agent_loop_runs_as_written(live_server, api_key, shop, monkeypatch):
    known = approved_orb(shop, "My dishwasher arrived with a cracked door and I want to return it")
    monkeypatch.setenv("MEMWEB_URL", live_server.url)
    monkeypatch.setenv("MEMWEB_API_KEY", api_key)
    snippet = README_EXAMPLE.search((ROOT / "README.md").read_text()).group(1)

    namespace = {}
    exec(compile(snippet, "README.md", "exec"), namespace)

    assert [hit.orb.id for hit in namespace["found"].hits] == [known.pk]
    assert known.obs in namespace["found"].prompt_block
    episode = EpisodeRecord.objects.get(episode_ref="ticket-1")  # reflected by the (eager) Celery task
    assert episode.status == EpisodeRecord.Status.DONE and episode.orb.bank == shop
    logs = RetrievalLog.objects.filter(pk__in=namespace["retrieval_ids"])
    assert logs.count() == 2
    assert {(log.outcome_success, log.outcome_reward, log.outcome_episode_ref) for log in logs} == {(True, 1.0, "ticket-1")}


@server_db
def test_the_sync_and_async_clients_retrieve_the_same_typed_hits(live_server, api_key, shop):
    for text in ("The blender I bought is too loud", "My fridge is not cooling", "Refund my broken kettle"):
        approved_orb(shop, text)

    with MemwebClient(live_server.url, api_key) as client:
        sync_hits = client.retrieve("shop", "the kettle broke", k=3).hits

    async def retrieve_async():
        async with AsyncMemwebClient(live_server.url, api_key) as client:
            return (await client.retrieve("shop", "the kettle broke", k=3)).hits

    async_hits = run_coroutine(retrieve_async())
    assert len(sync_hits) == 3
    assert [(h.rank, h.orb.id, h.score) for h in sync_hits] == [(h.rank, h.orb.id, h.score) for h in async_hits]
    assert "kettle" in sync_hits[0].orb.obs
    assert isinstance(sync_hits[0].orb.created_at, datetime) and sync_hits[0].orb.bank == "shop"


@server_db
def test_the_async_client_plays_an_agent_s_whole_round(live_server, api_key, operator_user, shop):
    approved_orb(shop, "My toaster burns everything")

    async def round_trip():
        async with AsyncMemwebClient(live_server.url, api_key, poll_interval=0.05) as client:
            me, banks = await client.me(), await client.banks()
            found = await client.retrieve("shop", "the toaster burns my bread", domain="appliances")
            queued = await client.episode_write("shop", success_trajectory("Burnt toast again"), episode_ref="e2")
            done = await client.wait_for_episode(queued.ingest_id)
            await client.retrieval_outcome(found.retrieval_id, success=False, reward=0.0)
            written = await client.transitions("shop", [Transition("t9", 0, "fix toaster", "s0", "a0", 1.0,
                                                                   done=True, success=True)])
            steps = await client.experiences_retrieve("shop", "fix toaster", "s0")
            return me, banks, found, done, written, steps

    me, banks, found, done, written, steps = run_coroutine(round_trip())
    assert me.username == operator_user.username and [bank.slug for bank in banks] == ["shop"]
    assert "toaster" in found.hits[0].orb.obs
    assert done.status == "done" and done.orb.episode_ref == "e2"
    assert RetrievalLog.objects.get(pk=found.retrieval_id).outcome_success is False
    assert written.written == 1 and [hit.action for hit in steps.trace] == ["a0"]


@server_db
def test_it_says_who_the_key_is_and_lists_the_banks(memweb, operator_user, shop):
    me = memweb.me()
    assert (me.username, me.roles) == (operator_user.username, ["operator"])
    assert [(bank.slug, bank.id) for bank in memweb.banks()] == [("shop", shop.pk)]


@server_db
def test_a_queued_episode_is_waited_for_and_a_sync_one_answers_with_its_orb(memweb, shop):
    queued = memweb.episode_write("shop", success_trajectory("Where is my parcel?", task_id="t-1"), episode_ref="e1")
    assert queued.status_url.endswith(f"/api/orbs/episodes/{queued.ingest_id}")
    done = memweb.wait_for_episode(queued.ingest_id)
    assert done.status == "done" and done.orb.episode_ref == "e1" and done.created is True

    again = memweb.episode_write("shop", success_trajectory("Where is my parcel?", task_id="t-1"), sync=True)
    assert isinstance(again, Ingest)
    assert (again.orb.id, again.created) == (done.orb.id, False)  # the same Orb, already stored


@server_db
def test_experience_transitions_are_written_and_retrieved(memweb, shop):
    DMRMSettings.objects.create(bank=shop, alpha=0.5, gamma=0.9, c_max=400, n_success=2)
    goal = "return the jacket from order W7"
    steps = [Transition("t1", 0, goal, "s0", "a0", 0.0, next_observation="s1"),
             {"trajectory_id": "t1", "step": 1, "goal": goal, "observation": "s1", "action": "a1", "reward": 1.0,
              "done": True, "success": True}]

    written = memweb.transitions("shop", steps)
    found = memweb.experiences_retrieve("shop", goal, "s1", recent_actions=["a0"], client="agent-1")

    # Applied last step first: Q(s1,a1) = 0.5·1, then Q(s0,a0) = 0.5·(0 + 0.9·0.5).
    assert written.written == 2 and [e.q_value for e in written.entries] == [pytest.approx(0.225), 0.5]
    assert "Encouraged: a1 → 0.500" in found.prompt_block
    assert {hit.action for hit in found.trace} == {"a0", "a1"}


@server_db
def test_a_refused_field_raises_validation_failed_naming_its_location(memweb, shop):
    with pytest.raises(ValidationFailed) as refused:
        memweb.retrieve("shop", "a question", k=0, min_score=2.0)
    assert refused.value.status == 422
    assert {("body", "payload", "k"), ("body", "payload", "min_score")} <= {p.loc for p in refused.value.problems}


@server_db
def test_an_unknown_bank_and_a_bad_key_raise_their_own_errors(memweb, live_server, shop):
    with pytest.raises(NotFound) as missing:
        memweb.retrieve("nope", "a question")
    assert missing.value.detail == "No memory bank 'nope'"
    with MemwebClient(live_server.url, "mw_not-a-key") as stranger, pytest.raises(Unauthorized):
        stranger.me()


# --- against a scripted server -------------------------------------------------------------------------

class ScriptedServer:
    """Answers each request with the next scripted (status, headers, body), the last one for ever after,
    and records when each request arrived and with which headers."""

    def __init__(self, answers: list[tuple[int, dict, dict]]):
        self.answers, self.requests = list(answers), []
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._http.server_port}"

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self._answer()

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._answer()

            def _answer(self):
                server.requests.append((time.monotonic(), self.command, dict(self.headers)))
                status, headers, body = server.answers.pop(0) if len(server.answers) > 1 else server.answers[0]
                payload = json.dumps(body).encode()
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):  # keep the test output clean
                pass

        return Handler

    def __enter__(self):
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info):
        self._http.shutdown()
        self._http.server_close()


RECORDED = (200, {}, {"detail": "recorded"})


def report_outcome(url: str, *, asynchronous: bool, **options) -> None:
    if not asynchronous:
        with MemwebClient(url, "key", **options) as client:
            return client.retrieval_outcome(7, success=True)

    async def report():
        async with AsyncMemwebClient(url, "key", **options) as client:
            return await client.retrieval_outcome(7, success=True)

    return run_coroutine(report())


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_retry_waits_the_retry_after_and_resends_the_same_idempotency_key(asynchronous):
    with ScriptedServer([(429, {"Retry-After": "1"}, {"detail": "slow down"}), RECORDED]) as server:
        report_outcome(server.url, asynchronous=asynchronous, backoff=0.01)

    (first_at, _, first), (second_at, _, second) = server.requests
    assert second_at - first_at >= 1.0
    assert first["Idempotency-Key"] == second["Idempotency-Key"]
    assert uuid.UUID(first["Idempotency-Key"]).version == 4


def test_each_call_gets_its_own_idempotency_key():
    with ScriptedServer([RECORDED]) as server:
        report_outcome(server.url, asynchronous=False)
        report_outcome(server.url, asynchronous=False)
    assert len({headers["Idempotency-Key"] for _, _, headers in server.requests}) == 2


def test_a_404_is_not_retried():
    with ScriptedServer([(404, {}, {"detail": "No retrieval #7"})]) as server, pytest.raises(NotFound) as missing:
        report_outcome(server.url, asynchronous=False, max_retries=3, backoff=0.01)
    assert len(server.requests) == 1 and missing.value.detail == "No retrieval #7"


def test_an_unavailable_server_is_retried_max_retries_times_then_raised():
    with ScriptedServer([(503, {}, {"detail": "down"})]) as server, pytest.raises(ServerError) as failed:
        report_outcome(server.url, asynchronous=False, max_retries=2, backoff=0.01)
    assert len(server.requests) == 3 and failed.value.status == 503


def test_a_retry_after_longer_than_the_client_will_wait_is_raised_at_once():
    with ScriptedServer([(429, {"Retry-After": "300"}, {"detail": "blocked"})]) as server, \
            pytest.raises(RateLimited) as limited:
        report_outcome(server.url, asynchronous=False, max_wait=10)
    assert len(server.requests) == 1 and limited.value.retry_after == 300


def test_an_unreachable_server_raises_a_connection_error_after_its_retries():
    with ScriptedServer([RECORDED]) as server:
        url = server.url  # a port that was just closed: nothing listens there now
    with pytest.raises(MemwebConnectionError):
        report_outcome(url, asynchronous=False, max_retries=1, backoff=0.01)


def test_the_client_imports_without_django_settings():
    environment = {name: value for name, value in os.environ.items() if name != "DJANGO_SETTINGS_MODULE"}
    check = ("import memweb.client\n"
             "from django.conf import settings\n"
             "assert not settings.configured, 'importing the client configured Django'\n")
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_an_agent_process_imports_the_client_without_django_or_celery():
    """An agent needs httpx2 only: importing memweb.client must not set up the server's stack."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, memweb.client; "
         "print(sorted({name.split('.')[0] for name in sys.modules} & {'django', 'celery', 'kombu'}))"],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, check=True,
        env={key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"},
    )
    assert loaded.stdout.strip() == "[]"
