"""Faults while a run plays on a real Celery worker: the broker restarted, the database connections
dropped, the LLM endpoint slow, rate-limited, failing or answering garbage.

After each fault the run ends complete, or with the failed episodes marked as infrastructure errors
that a retry completes; and every (trial, task) has exactly one row and one stored episode: nothing
finished is lost, nothing is stored twice."""
import collections
import hashlib
import itertools
import json
import threading
import time

import pytest
from django.db import connection

from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from evaluation.runs.services import run_launch, run_retry_errors
from memweb.celery import app as celery_app
from memweb.models import LLMCall
from tests.evaluation.runs.conftest import broker_producers_reset, real_broker, spec  # noqa: F401  (fixture)
from tests.fakes.openai_server import Scripted, error_reply, text_reply
from tests.support.processes import (
    RedisServer,
    celery_worker,
    free_port,
    wait_on_progress,
    worker_env,
)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

Status = EvaluationRun.Status
SCRIPTED_TASKS = ["shop-app-009", "shop-app-013", "shop-app-017", "shop-app-029", "shop-clo-004", "shop-clo-008"]
LLM_TASKS = ["shop-app-001", "shop-clo-008"]
AGENT_SAYS = "Could you give me your order number, please?"


# --- workers and runs -----------------------------------------------------------------------------

def _status(run) -> str:
    run.refresh_from_db()
    return run.status


def _wait_for_the_end(run, worker, *, stall: float = 120) -> None:
    ended = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)
    wait_on_progress(lambda: _status(run) in ended or worker.poll() is not None, progress=lambda: _snapshot(run),
                     stall=stall, message=f"run #{run.pk} to end")


def _done(run) -> int:
    return run.run_episodes.filter(status=RunEpisode.Status.DONE).count()


def _assert_marked_as_infrastructure_errors(run, cause: str) -> None:
    errors = list(run.run_episodes.filter(status=RunEpisode.Status.ERROR))
    assert len(errors) == run.episodes_error
    for row in errors:
        assert cause in row.error, row.error
        assert row.success is None  # an infrastructure error is no verdict on the agent


def _assert_complete_and_stored_once(run) -> None:
    """The run completed; each (trial, task) has one row, done, linked to its own stored episode."""
    run.refresh_from_db()
    assert run.status == Status.COMPLETED, run.status_message
    rows = list(run.run_episodes.select_related("trial"))
    cells = collections.Counter((row.trial.number, row.task_key) for row in rows)
    assert len(cells) == run.run_spec.trials * len(run.task_pks) and set(cells.values()) == {1}
    assert [row for row in rows if row.status != RunEpisode.Status.DONE] == []
    linked = [row.episode_id for row in rows]
    assert None not in linked and len(set(linked)) == len(rows)
    assert Episode.objects.count() == len(rows)  # no second copy, no orphan of a failed attempt
    assert (run.episodes_total, run.episodes_finished, run.episodes_error) == (len(rows), len(rows), 0)


# --- a. the broker restarted mid-run ----------------------------------------------------------------

@pytest.fixture
def redis_broker():
    """A fresh redis-server that this process publishes to (and the test's worker consumes)."""
    redis = RedisServer(free_port())
    redis.start()
    saved = (celery_app.conf.broker_url, celery_app.conf.broker_transport_options)
    celery_app.conf.update(task_always_eager=False, broker_url=redis.url, broker_transport_options={})
    broker_producers_reset()
    yield redis
    broker_producers_reset()
    celery_app.conf.update(broker_url=saved[0], broker_transport_options=saved[1])
    redis.kill()


def _snapshot(run) -> tuple:
    return (tuple(run.run_episodes.order_by("pk").values_list("status", "attempts")),
            tuple(run.trial_rows.order_by("number").values_list("status", flat=True)))


def _wait_until_idle(run, *, quiet: float = 5, stall: float = 120) -> None:
    """Until nothing of `run` is being played or reflected and nothing changed for `quiet` seconds."""
    seen = {"state": None, "since": time.monotonic()}

    def idle() -> bool:
        state = _snapshot(run)
        if state != seen["state"]:
            seen.update(state=state, since=time.monotonic())
        busy = RunEpisode.Status.RUNNING in [status for status, _ in state[0]] or Trial.Status.REFLECTING in state[1]
        return not busy and time.monotonic() - seen["since"] >= quiet

    wait_on_progress(idle, progress=lambda: seen["state"], stall=stall, message=f"run #{run.pk} to stop moving")


def test_a_broker_restart_mid_run_loses_and_doubles_nothing(builtin, operator_user, redis_broker):
    # One worker slot and a window of three: messages wait in the broker when it goes down.
    run = run_launch(spec=spec(task_ids=SCRIPTED_TASKS, trials=2, concurrency=3, per_turn=True), user=operator_user)
    with celery_worker(worker_env(redis_broker.url), concurrency=1, hostname="fault-broker@%h") as worker:
        wait_on_progress(lambda: _done(run) >= 2, progress=lambda: _snapshot(run), stall=120, interval=0.1,
                         message="the first finished episodes")
        redis_broker.kill()  # the queued messages and the watchdog's next sweep are gone with it
        _wait_until_idle(run)  # the worker plays what it holds; what it sends next cannot leave
        done_during_outage = _done(run)
        redis_broker.start()
        _wait_for_the_end(run, worker)
    assert done_during_outage < run.episodes_total, "the broker must go down mid-run"
    _assert_complete_and_stored_once(run)


# --- the LLM agent on a worker, against the fake OpenAI server of this process ----------------------

def _llm_spec() -> dict:
    """2 tasks x 2 trials played by the LLM agent (actor role), two turns each, no memory."""
    return spec(task_ids=LLM_TASKS, trials=2, concurrency=2, memory_mode="none", max_turns=2,
                agent={"backend": "llm", "max_steps": 2})


def _llm_worker_env(fake, *, timeout: float) -> dict:
    """The worker reads its LLM endpoint from the environment, as in production."""
    return worker_env(MEMWEB_LLM_ACTOR_BASE_URL=fake.base_url, MEMWEB_LLM_ACTOR_API_KEY="fake-key",
                      MEMWEB_LLM_ACTOR_MODEL="fake-model", MEMWEB_LLM_ACTOR_TIMEOUT=str(timeout),
                      MEMWEB_LLM_ACTOR_MAX_RETRIES="2", MEMWEB_LLM_BACKOFF_SECONDS="0.01",
                      MEMWEB_LLM_BACKOFF_MAX_SECONDS="0.05")


# --- b. the database connections dropped mid-episode ---------------------------------------------

def _drop_other_connections() -> int:
    """Terminate every other session on the test database (the worker's and its broker's), as a
    database restart or failover does to its clients."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0]


def test_dropped_database_connections_mid_episode_lose_and_double_nothing(builtin, operator_user, real_broker,
                                                                          fake_llm):
    fake_llm.use_for("actor")
    # Every answer takes a second: the drops land while an episode waits for its LLM.
    fake_llm.set_default(lambda request: text_reply(AGENT_SAYS, delay=1.0))
    run = run_launch(spec=_llm_spec(), user=operator_user)
    dropped = []
    with celery_worker(_llm_worker_env(fake_llm, timeout=10), concurrency=2, hostname="fault-db@%h") as worker:
        for calls in (1, 5):
            wait_on_progress(lambda calls=calls: len(fake_llm.chat_requests) >= calls or worker.poll() is not None,
                             progress=lambda: (len(worker.output_lines), _snapshot(run)), stall=120, interval=0.05,
                             message=f"LLM call {calls}")
            dropped.append(_drop_other_connections())
        _wait_for_the_end(run, worker)
    assert all(dropped), "each drop must hit the worker's connections"
    _assert_complete_and_stored_once(run)
    # The interrupted episodes were given back and played again, not stored as failures.
    assert run.run_episodes.filter(attempts__gte=2).exists()


# --- c. the LLM endpoint slow, rate-limited, failing, answering garbage ---------------------------

TRANSIENT_FAULTS = {
    "rate limited": lambda: error_reply(429, "slow down", retry_after=0.01),
    "server error": lambda: error_reply(500, "upstream hiccup"),
    "garbage": lambda: Scripted(status=200, raw_body=b"<html>502 Bad Gateway</html>", content_type="text/html"),
    "too slow": lambda: text_reply(AGENT_SAYS, delay=2.5),  # longer than the 1 s timeout
}


class FirstAttemptFails:
    """Every call's first attempt meets a fault (each kind in turn); its retry is answered. A call
    is known by its messages, so concurrent workers cannot take each other's faults."""

    def __init__(self):
        self.kinds = itertools.cycle(TRANSIENT_FAULTS)
        self.attempts = collections.Counter()
        self.served = collections.Counter()
        self.lock = threading.Lock()

    def __call__(self, request: dict) -> Scripted:
        key = hashlib.sha256(json.dumps(request.get("messages"), sort_keys=True).encode()).hexdigest()
        with self.lock:
            self.attempts[key] += 1
            if self.attempts[key] % 2 == 0:
                return text_reply(AGENT_SAYS)
            kind = next(self.kinds)
            self.served[kind] += 1
        return TRANSIENT_FAULTS[kind]()


def test_transient_llm_faults_are_retried_and_the_run_completes(builtin, operator_user, real_broker, fake_llm):
    fake_llm.use_for("actor")
    faults = FirstAttemptFails()
    fake_llm.set_default(faults)
    run = run_launch(spec=_llm_spec(), user=operator_user)
    with celery_worker(_llm_worker_env(fake_llm, timeout=1), concurrency=2, hostname="fault-llm@%h") as worker:
        _wait_for_the_end(run, worker)
    _assert_complete_and_stored_once(run)
    assert set(faults.served) == set(TRANSIENT_FAULTS)
    calls = LLMCall.objects.filter(role="actor")
    assert calls.count() == sum(faults.served.values())  # one logged call per fault met
    assert set(calls.values_list("status", "attempts")) == {(LLMCall.Status.OK, 2)}  # each recovered on its retry


def test_a_persistent_llm_outage_marks_episodes_retryable_and_a_retry_completes(builtin, operator_user,
                                                                               real_broker, fake_llm):
    fake_llm.use_for("actor")
    fake_llm.set_default(lambda request: error_reply(500, "model unavailable"))
    run = run_launch(spec=_llm_spec(), user=operator_user)
    with celery_worker(_llm_worker_env(fake_llm, timeout=1), concurrency=2, hostname="fault-outage@%h") as worker:
        _wait_for_the_end(run, worker)
        assert (run.status, run.episodes_error, run.successes) == (Status.COMPLETED, run.episodes_total, 0)
        _assert_marked_as_infrastructure_errors(run, "HTTP 500")
        assert set(Episode.objects.values_list("status", flat=True)) == {Episode.Status.ERROR}
        assert LLMCall.objects.filter(status=LLMCall.Status.ERROR, attempts=3).count() == run.episodes_total

        fake_llm.set_default(lambda request: text_reply(AGENT_SAYS))  # the endpoint is back
        assert run_retry_errors(run=run) == run.episodes_total
        _wait_for_the_end(run, worker)
    _assert_complete_and_stored_once(run)
    assert all(row.attempts == 2 for row in run.run_episodes.all())
