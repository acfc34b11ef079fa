"""The run protocol driven in-process (the same service steps the Celery tasks call): trials, memory
growing between them, idempotent episodes, chunks of episodes per message, lost claims,
infrastructure errors, the review gate, cancel/resume and the sweeper."""
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from evaluation.runs.services import (
    RunActionError,
    protocol,
    run_cancel,
    run_drive,
    run_episodes_execute,
    run_resume,
    run_retry_errors,
    run_start,
    run_sweep,
)
from evaluation.runs.services.dispatch import inline_drain, inline_work
from memweb.models import WorkerHeartbeat
from orbs.models import Orb, RetrievalLog
from orbs.services import orb_approve
from tests.evaluation.runs.conftest import TASK_IDS

Status = EvaluationRun.Status


def _hits_by_trial(run) -> dict[int, int]:
    hits = {}
    for row in run.run_episodes.select_related("episode", "trial"):
        hits[row.trial.number] = hits.get(row.trial.number, 0) + sum(len(m["hits"]) for m in row.episode.memories)
    return hits


def test_it_plays_every_trial_and_grows_the_memory_between_them(launch):
    run = run_drive(run=launch())
    assert run.status == Status.COMPLETED and run.finished_at is not None
    rows = list(run.run_episodes.all())
    assert len(rows) == run.episodes_total == run.episodes_finished == 9
    assert all(r.status == RunEpisode.Status.DONE and r.episode_id and r.attempts == 1 for r in rows)
    assert Episode.objects.count() == 9 and run.successes == sum(r.success for r in rows)
    assert [t.status for t in run.trial_rows.all()] == [Trial.Status.DONE] * 3
    # MemOrb protocol: trial 1 starts from the empty bank; later trials retrieve what earlier ones wrote.
    hits = _hits_by_trial(run)
    assert hits[1] == 0 and hits[2] > 0 and hits[3] > 0
    orbs = Orb.objects.filter(bank=run.bank)
    assert orbs.count() >= 3 and not orbs.filter(status=Orb.Status.PENDING).exists()  # gate: auto-approve
    assert orbs.filter(source_label=f"evaluation run #{run.pk} · trial 1").exists()
    assert set(orbs.values_list("pk", flat=True)) >= {r.orb_id for r in rows}
    assert run.metrics["per_trial"]["x"] == [1, 2, 3] and run.metrics_trials == 3
    assert set(run.metrics["matrix"]) == set(TASK_IDS)


def test_episode_seeds_pair_runs_with_the_same_seed(launch):
    with_memory, without = run_drive(run=launch()), run_drive(run=launch(memory_mode="none"))
    seeds = lambda run: sorted(run.run_episodes.values_list("trial__number", "task_key", "seed"))  # noqa: E731
    assert seeds(with_memory) == seeds(without)
    assert without.bank is None and not RetrievalLog.objects.filter(client="evaluation", bank=None).exists()


def test_a_redelivered_episode_task_does_nothing(launch):
    run = launch()
    with inline_work():
        run_start(run_id=run.pk)
        row = run.run_episodes.order_by("pk").first()
        first = run_episodes_execute(run_episode_ids=[row.pk], worker="w1@host")
        second = run_episodes_execute(run_episode_ids=[row.pk], worker="w2@host")
    assert [r.status for r in first] == [RunEpisode.Status.DONE] and second == []
    row.refresh_from_db()
    assert row.claimed_by == "w1@host" and row.attempts == 1
    assert Episode.objects.count() == 1
    run.refresh_from_db()
    assert run.episodes_finished == 1 and run.trial_rows.get(number=1).episodes_finished == 1


def test_a_worker_that_lost_its_claim_stores_nothing(launch, monkeypatch):
    """While worker A plays, its claim is judged dead and worker B plays and stores the row:
    A's late result is dropped, so the episode exists once."""
    run = launch(trials=1)
    real = protocol.episode_simulate

    def slow_worker_a(**kwargs):
        play = real(**kwargs)
        monkeypatch.setattr(protocol, "episode_simulate", real)
        run_sweep(run_id=run.pk, everything=True)  # A looks dead: its row goes back to pending
        run_episodes_execute(run_episode_ids=[row.pk], worker="b@host")
        return play

    with inline_work():
        run_start(run_id=run.pk)
        row = run.run_episodes.order_by("pk").first()
        monkeypatch.setattr(protocol, "episode_simulate", slow_worker_a)
        assert run_episodes_execute(run_episode_ids=[row.pk], worker="a@host") == []
    row.refresh_from_db()
    assert row.status == RunEpisode.Status.DONE and row.claimed_by == "b@host" and row.attempts == 2
    assert Episode.objects.count() == 1 and Episode.objects.get().pk == row.episode_id


# --- chunks: one message claims, plays and stores several episodes ---------------------------

HANDLERS = {"episodes": run_episodes_execute, "finish": protocol.trial_finish, "sweep": run_sweep}


def _chunk_message(work) -> list[int]:
    kind, kwargs = work.popleft()
    assert kind == "episodes"
    return kwargs["run_episode_ids"]


def test_one_message_claims_plays_and_stores_a_chunk(launch, settings):
    settings.RUN_CHUNK_EPISODES = 3
    run = launch(trials=1, concurrency=1)
    with inline_work() as work:
        run_start(run_id=run.pk)
        ids = _chunk_message(work)
        assert len(ids) == 3 and not work  # one slot: one chunk in flight
        stored = run_episodes_execute(run_episode_ids=ids, worker="w@host")
    assert sorted(row.pk for row in stored) == sorted(ids)
    rows = list(run.run_episodes.all())
    assert all(r.status == RunEpisode.Status.DONE and r.claimed_by == "w@host" and r.attempts == 1
               and r.claim_token is None for r in rows)
    assert len({r.episode_id for r in rows}) == 3 and Episode.objects.count() == 3
    run.refresh_from_db()
    assert run.episodes_finished == 3 and run.status == Status.COMPLETED  # that message finished the trial


def test_cancelling_mid_chunk_stops_before_the_next_episode(launch, settings, monkeypatch):
    settings.RUN_CHUNK_EPISODES = 3
    run = launch(trials=1, concurrency=1)
    real, played = protocol.episode_simulate, []

    def cancelled_while_it_plays(**kwargs):
        played.append(kwargs["task"].external_id)
        run_cancel(run=run)  # an operator cancels while the chunk's first episode plays
        return real(**kwargs)

    with inline_work() as work:
        run_start(run_id=run.pk)
        ids = _chunk_message(work)
        monkeypatch.setattr(protocol, "episode_simulate", cancelled_while_it_plays)
        stored = run_episodes_execute(run_episode_ids=ids, worker="w@host")
    assert len(played) == 1 and [row.task_key for row in stored] == played  # the episode it played is kept
    unplayed = run.run_episodes.exclude(pk=stored[0].pk)
    assert unplayed.count() == 2
    assert all(r.status == RunEpisode.Status.CANCELLED and r.claim_token is None and r.claimed_by == ""
               and r.queued_at is None and r.attempts == 0 for r in unplayed)  # given back, never attempted
    run.refresh_from_db()
    assert run.status == Status.CANCELLED and run.episodes_finished == 1

    monkeypatch.setattr(protocol, "episode_simulate", real)
    run_resume(run=run)
    run = run_drive(run=run)
    assert run.status == Status.COMPLETED and run.episodes_finished == 3 and Episode.objects.count() == 3
    assert sorted(run.run_episodes.values_list("attempts", flat=True)) == [1, 1, 1]


def test_a_chunk_claimed_by_a_dead_worker_is_played_again_exactly_once(launch, settings):
    settings.RUN_CHUNK_EPISODES = 3
    run = launch(trials=1, concurrency=1)
    with inline_work() as work:
        run_start(run_id=run.pk)
        ids = _chunk_message(work)
        dead = protocol._chunk_claim(RunEpisode.objects.filter(pk__in=ids), "dead@host")
        late_copy = (dead.rows[0], protocol._episode_play(dead.rows[0]))  # played, then the worker died
        RunEpisode.objects.filter(pk__in=ids).update(claimed_at=timezone.now() - timedelta(minutes=5))
        run_sweep(run_id=run.pk)  # no heartbeat from dead@host: its chunk goes back and is queued again
        inline_drain(work, HANDLERS)
        assert protocol._episodes_store(dead.token, [late_copy]) == []  # it came back: its copy is dropped
    rows = list(run.run_episodes.all())
    assert all(r.status == RunEpisode.Status.DONE and r.claimed_by == "inline" and r.attempts == 2 for r in rows)
    assert Episode.objects.count() == 3 and len({r.episode_id for r in rows}) == 3
    run.refresh_from_db()
    assert run.status == Status.COMPLETED and run.episodes_finished == 3


def test_infrastructure_errors_are_counted_apart_and_can_be_retried(launch, fake_llm):
    fake_llm.use_for("actor", max_retries=0)  # no reply scripted: every call fails with HTTP 500
    run = run_drive(run=launch(agent={"backend": "llm"}, trials=2, memory_mode="none"))
    assert run.status == Status.COMPLETED
    assert run.episodes_error == 6 and run.successes == 0
    assert run.metrics["errors"]["total"] == 6 and run.metrics["per_trial"]["value"] == [None, None]
    errored = run.run_episodes.first()
    assert errored.status == RunEpisode.Status.ERROR and "500" in errored.error and errored.success is None
    assert errored.episode.status == Episode.Status.ERROR

    fake_llm.set_default_text("Sorry, I cannot help with that.")
    assert run_retry_errors(run=run) == 6
    run.refresh_from_db()
    assert run.status == Status.RUNNING and run.episodes_finished == 0
    assert not Episode.objects.filter(status=Episode.Status.ERROR).exists()  # the failed attempts are replaced
    run = run_drive(run=run)
    assert run.status == Status.COMPLETED and run.episodes_error == 0 and run.episodes_finished == 6
    assert all(r.attempts == 2 and r.success is False for r in run.run_episodes.all())
    assert run.metrics["per_trial"]["value"] == [0.0, 0.0]


def test_the_review_gate_waits_for_reviewers(launch, reviewer_user):
    run = run_drive(run=launch(trials=2, review_gate="wait"))
    assert run.status == Status.WAITING_FOR_REVIEW
    assert "await review before trial 2" in run.status_message
    assert list(run.trial_rows.values_list("status", flat=True)) == [Trial.Status.DONE, Trial.Status.PENDING]
    pending = Orb.objects.filter(bank=run.bank, status=Orb.Status.PENDING)
    assert pending.count() >= 1

    run = run_drive(run=run)  # re-checked: still waiting, nothing played
    assert run.status == Status.WAITING_FOR_REVIEW and run.episodes_finished == 3
    for orb in pending:
        orb_approve(orb_id=orb.pk, expected_version=orb.version, actor=reviewer_user)
    run = run_drive(run=run)
    assert run.status == Status.COMPLETED and run.episodes_finished == 6


def test_cancel_stops_the_run_and_resume_finishes_it(launch, settings):
    settings.RUN_CHUNK_EPISODES = 1
    run = launch(trials=2, concurrency=1)
    with inline_work() as work:
        run_start(run_id=run.pk)
        kind, kwargs = work.popleft()
        run_episodes_execute(**kwargs)
        run_cancel(run=run)
        inline_drain(work, HANDLERS)
    run.refresh_from_db()
    assert run.status == Status.CANCELLED and run.episodes_finished == 1
    # Nothing is left "running": the unplayed episodes and both trials say cancelled.
    assert run.run_episodes.filter(status=RunEpisode.Status.CANCELLED).count() == 2
    assert list(run.trial_rows.values_list("status", flat=True)) == [Trial.Status.CANCELLED] * 2
    with pytest.raises(RunActionError, match="only a preparing, queued, running or waiting"):
        run_cancel(run=run)

    run_resume(run=run)
    run.refresh_from_db()
    assert run.status == Status.RUNNING and run.status_message == ""
    assert list(run.trial_rows.values_list("status", flat=True)) == [Trial.Status.RUNNING, Trial.Status.PENDING]
    assert run.run_episodes.filter(status=RunEpisode.Status.PENDING).count() == 2
    run = run_drive(run=run)
    assert run.status == Status.COMPLETED and run.episodes_finished == 6 and Episode.objects.count() == 6
    with pytest.raises(RunActionError, match="nothing to resume"):
        run_resume(run=run)


def _orphan_claim(run, *, worker: str, age: timedelta) -> RunEpisode:
    row = run.run_episodes.order_by("pk").first()
    RunEpisode.objects.filter(pk=row.pk).update(status=RunEpisode.Status.RUNNING, claimed_by=worker,
                                                claimed_at=timezone.now() - age, queued_at=timezone.now() - age)
    return row


def test_the_sweeper_replays_rows_of_dead_workers_and_leaves_live_ones(launch):
    run = launch(trials=1)
    with inline_work() as work:
        run_start(run_id=run.pk)
        work.clear()  # the messages were lost with a worker
        row = _orphan_claim(run, worker="dead@host", age=timedelta(minutes=5))
        WorkerHeartbeat.objects.create(hostname="dead@host", instance="d1", pid=1, started_at=timezone.now() - timedelta(hours=1),
                                       seen_at=timezone.now() - timedelta(minutes=5))
        live = run.run_episodes.exclude(pk=row.pk).order_by("pk").first()
        RunEpisode.objects.filter(pk=live.pk).update(status=RunEpisode.Status.RUNNING, claimed_by="live@host#l1/3",
                                                     claimed_at=timezone.now() - timedelta(minutes=5))
        WorkerHeartbeat.objects.create(hostname="live@host", instance="l1", pid=2, processes=[3],
                                       started_at=timezone.now(), seen_at=timezone.now())
        run_sweep(run_id=run.pk)
        assert RunEpisode.objects.get(pk=row.pk).status == RunEpisode.Status.PENDING
        assert RunEpisode.objects.get(pk=live.pk).status == RunEpisode.Status.RUNNING
        inline_drain(work, HANDLERS)
    assert RunEpisode.objects.get(pk=row.pk).status == RunEpisode.Status.DONE
    run.refresh_from_db()
    assert run.status == Status.RUNNING  # the live worker's episode is not finished yet


def test_feedback_is_simulated_for_every_episode_when_enabled(launch):
    run = run_drive(run=launch(trials=1, feedback_enabled=True, memory_mode="none"))
    episodes = Episode.objects.filter(run_episode__run=run)
    assert episodes.count() == 3
    assert all(e.simulated_feedback.score >= 1 for e in episodes)


# --- the trial finish meets a database error while it writes memories -------------------------

def _memorise_failing(monkeypatch, failures: int):
    """trial_memorise that writes, then fails as a dropped connection does, `failures` times."""
    real, calls = protocol.trial_memorise, []

    def flaky(*, trial):
        calls.append(trial.pk)
        real(trial=trial)
        if len(calls) <= failures:
            raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(protocol, "trial_memorise", flaky)
    monkeypatch.setattr(protocol, "FINISH_RETRY_PAUSES", (0.0, 0.0))
    return calls


def test_a_database_error_while_writing_memories_is_retried_in_place(launch, monkeypatch):
    calls = _memorise_failing(monkeypatch, failures=2)
    run = run_drive(run=launch(trials=1))
    assert run.status == Status.COMPLETED and run.status_message == ""
    assert len(calls) == 3  # two failed attempts, then the one that finished
    rows = list(run.run_episodes.all())
    # The retries wrote nothing twice: one Orb per stored trajectory at most.
    assert Orb.objects.filter(bank=run.bank).count() == len({r.orb_id for r in rows if r.orb_id})


def test_a_database_that_stays_down_leaves_the_finish_to_the_watchdog_not_a_failed_run(launch, monkeypatch):
    real = protocol.trial_memorise
    _memorise_failing(monkeypatch, failures=99)
    run = launch(trials=1)
    with inline_work() as work:
        run_start(run_id=run.pk)
        inline_drain(work, HANDLERS)
    run.refresh_from_db()
    trial = run.trial_rows.get()
    assert run.status == Status.RUNNING and trial.status == Trial.Status.RUNNING and trial.claim_token is None

    monkeypatch.setattr(protocol, "trial_memorise", real)  # the database is back
    with inline_work() as work:
        run_sweep(run_id=run.pk)
        inline_drain(work, HANDLERS)
    run.refresh_from_db()
    assert run.status == Status.COMPLETED
