"""Runs on real Celery worker processes and a real broker (kombu's SQLAlchemy transport on the test
database): a run completes, and a worker killed mid-run (holding claimed chunks of episodes) loses
no finished episode, doubles none, and the run completes when another worker starts."""
import os
import signal

import psutil
import pytest

from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, RunEpisode
from evaluation.runs.services import run_launch
from tests.evaluation.runs.conftest import spec
from tests.fakes.openai_server import text_reply
from tests.support.processes import celery_worker, output_tail, wait_on_progress, worker_env

KILL_TASKS = ["shop-app-009", "shop-app-013", "shop-app-017", "shop-app-029", "shop-app-045", "shop-clo-004"]
pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _status(run) -> str:
    run.refresh_from_db()
    return run.status


def _episodes_done(run) -> int:
    return run.run_episodes.filter(status=RunEpisode.Status.DONE).count()


def _progress(run) -> tuple:
    """What moves while a worker plays the run, the rescue of a dead worker's claims included."""
    rows = run.run_episodes.all()
    return tuple(rows.values_list("status", "attempts").order_by("pk"))


def _wait_for_completion(run, worker) -> None:
    wait_on_progress(lambda: _status(run) == EvaluationRun.Status.COMPLETED or worker.poll() is not None,
                     progress=lambda: _progress(run), stall=120, message="the run to complete")
    assert worker.poll() is None, f"the worker exited ({worker.returncode}):\n{output_tail(worker)}"
    assert run.status == EvaluationRun.Status.COMPLETED, run.status_message


def _assert_each_episode_stored_once(run) -> None:
    rows = list(run.run_episodes.all())
    assert len(rows) == run.episodes_total
    assert all(row.status == RunEpisode.Status.DONE for row in rows)
    episode_ids = [row.episode_id for row in rows]
    assert None not in episode_ids and len(set(episode_ids)) == len(rows)
    assert Episode.objects.count() == len(rows)  # nothing stored twice, no orphan


def test_it_runs_a_launched_run_to_completion_on_a_worker(builtin, operator_user, real_broker):
    run = run_launch(spec=spec(trials=2, concurrency=2), user=operator_user)
    with celery_worker(worker_env(), concurrency=2, hostname="runs-life@%h") as worker:
        _wait_for_completion(run, worker)
    _assert_each_episode_stored_once(run)
    assert {row.claimed_by.split("@")[0] for row in run.run_episodes.all()} == {"runs-life"}
    assert run.metrics["per_trial"]["x"] == [1, 2]


def _kill(worker) -> None:
    os.killpg(worker.pid, signal.SIGKILL)  # no warm shutdown: claims, prefetched messages and timers are lost
    worker.wait()


def test_a_killed_worker_loses_nothing_and_duplicates_nothing(builtin, operator_user, real_broker):
    run = run_launch(spec=spec(task_ids=KILL_TASKS, trials=3, concurrency=3, per_turn=True), user=operator_user)
    chunks = worker_env(MEMWEB_RUN_CHUNK_EPISODES="3")  # each message claims three episodes at once
    with celery_worker(chunks, concurrency=2, hostname="runs-killed@%h") as worker:
        wait_on_progress(lambda: _episodes_done(run) >= 3 or worker.poll() is not None,
                         progress=lambda: _progress(run), stall=120, interval=0.1,
                         message="the first finished episodes")
        _kill(worker)
    done_before = set(run.run_episodes.filter(status=RunEpisode.Status.DONE).values_list("pk", "episode_id"))
    assert 3 <= len(done_before) < run.episodes_total, "the worker must die mid-run"
    held_by_the_dead = set(run.run_episodes.filter(status=RunEpisode.Status.RUNNING).values_list("pk", flat=True))

    with celery_worker(chunks, concurrency=2, hostname="runs-rescuer@%h") as rescuer:
        _wait_for_completion(run, rescuer)
    _assert_each_episode_stored_once(run)
    after = set(run.run_episodes.values_list("pk", "episode_id"))
    assert done_before <= after  # what was finished before the kill is kept as it was
    assert run.episodes_finished == run.episodes_total and run.episodes_error == 0
    # Episodes the dead worker had claimed (playing, or waiting their turn in its chunks) were played
    # again, by the rescuer, once.
    replayed = run.run_episodes.filter(pk__in=held_by_the_dead)
    assert all(row.attempts >= 2 and row.claimed_by.startswith("runs-rescuer@") for row in replayed)


def _claimants(run) -> set[str]:
    return set(run.run_episodes.filter(status=RunEpisode.Status.RUNNING).values_list("claimed_by", flat=True))


def _held_by(run, claimants: set[str]) -> list[int]:
    return list(run.run_episodes.filter(status=RunEpisode.Status.RUNNING, claimed_by__in=claimants)
                .values_list("pk", flat=True))


def _assert_replayed_by_others(run, held: list[int], dead: set[str]) -> None:
    replayed = list(run.run_episodes.filter(pk__in=held))
    assert all(row.attempts >= 2 and row.claimed_by not in dead for row in replayed)


@pytest.fixture
def slow_llm_run(builtin, operator_user, real_broker, fake_llm):
    """A run whose agent (an LLM) takes a second per answer, so a kill lands while an episode plays;
    the worker environment that reaches the fake LLM. Two tasks, one trial, no memory: quick."""
    fake_llm.use_for("actor")
    fake_llm.set_default(lambda request: text_reply("Could you give me your order number, please?", delay=1.0))
    run = run_launch(spec=spec(task_ids=["shop-app-001", "shop-clo-008"], trials=1, concurrency=2, memory_mode="none",
                               max_turns=2, agent={"backend": "llm", "max_steps": 2}), user=operator_user)
    env = worker_env(MEMWEB_LLM_ACTOR_BASE_URL=fake_llm.base_url, MEMWEB_LLM_ACTOR_API_KEY="fake-key",
                     MEMWEB_LLM_ACTOR_MODEL="fake-model", MEMWEB_LLM_ACTOR_TIMEOUT="10")
    return run, env, fake_llm


def _wait_for_claims_mid_episode(run, worker, fake) -> None:
    wait_on_progress(lambda: (fake.chat_requests and _claimants(run)) or worker.poll() is not None,
                     progress=lambda: (len(worker.output_lines), _progress(run)), stall=120, interval=0.05,
                     message="an episode to be playing")


def test_a_worker_restarted_under_the_same_name_takes_over_the_dead_ones_claims(slow_llm_run):
    """`make run` restarts a killed worker as celery@<host> again: the new instance must not take
    the dead one's claims for its own (they would wait out HARD_CLAIM_TIMEOUT, an hour)."""
    run, env, fake = slow_llm_run
    with celery_worker(env, hostname="celery@samehost") as worker:
        _wait_for_claims_mid_episode(run, worker, fake)
        _kill(worker)
    dead = _claimants(run)
    held = _held_by(run, dead)
    assert held, "the worker must die holding claims"
    with celery_worker(env, hostname="celery@samehost") as restarted:
        _wait_for_completion(run, restarted)
    _assert_each_episode_stored_once(run)
    _assert_replayed_by_others(run, held, dead)  # by the new instance, under the same hostname


def test_a_killed_pool_process_claims_are_played_again_by_its_replacement(slow_llm_run):
    """The worker's main process lives on and replaces the killed pool process: the claims of the dead
    one go back once its worker's heartbeat no longer lists it."""
    run, env, fake = slow_llm_run
    with celery_worker(env, hostname="celery@poolhost") as worker:
        _wait_for_claims_mid_episode(run, worker, fake)
        [pool_process] = psutil.Process(worker.pid).children()  # one slot (the default): one pool process
        pool_process.send_signal(signal.SIGKILL)
        pool_process.wait()
        dead = _claimants(run)
        held = _held_by(run, dead)
        assert held, "the pool process must die holding claims"
        _wait_for_completion(run, worker)
    _assert_each_episode_stored_once(run)
    _assert_replayed_by_others(run, held, dead)  # by the process that replaced it
