"""Running a run: the MemOrb protocol as Celery work.

start -> trial 1 -> episodes (a window of `concurrency` messages at a time, each naming a chunk of
episodes) -> trial finish (the run's memory learns from the trial, the review gate applies) ->
trial 2 ... -> completed.

Every step claims its rows with a conditional UPDATE, so a message delivered twice does nothing
the second time. Episodes are played outside any transaction and stored, a chunk's worth at a
time with their rows' verdicts, in one short transaction that stores only the rows whose claim is
still ours: a worker that was presumed dead and comes back cannot store a second copy. Each
active run arms its next watchdog sweep here (watchdog.py does the sweeping).
"""
import logging
import math
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

import pydantic
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from evaluation.configs import AgentBackend, CustomerBackend
from evaluation.models import Episode, Task
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from evaluation.runs.services.announce import run_finished_announce
from evaluation.runs.services.dispatch import work_send
from evaluation.runs.services.memory import (
    run_episode_memory_record,
    run_memory_config,
    run_pending_memories,
    trial_memorise,
)
from evaluation.runs.services.results import run_metrics_compute
from evaluation.runs.services.splits import trial_split
from evaluation.services import EpisodeConfigError, EpisodePlay, episode_simulate, episodes_save
from memweb.llm.trace import LLMTrace, llm_traced
from memweb.services import worker_liveness_window

logger = logging.getLogger(__name__)
Status = EvaluationRun.Status
INLINE = "inline"
ADVANCING = (Status.RUNNING, Status.WAITING_FOR_REVIEW)
MAX_CHUNK_EPISODES = 16  # per message; about a quarter of a second of offline episodes
STORE_EVERY_SECONDS = 0.5  # a chunk's played episodes wait at most this long to be stored
FINISH_RETRY_PAUSES = (0.5, 2.0, 5.0)  # seconds between a trial finish's attempts when the database fails


def watch_interval() -> timedelta:
    """How long a claim may go without its worker's heartbeat (the workers' liveness window)."""
    return worker_liveness_window()


def episode_seed(run: EvaluationRun, trial_number: int) -> int:
    """One seed per (run seed, trial): runs with equal seeds plan the same errors, so they pair up."""
    return run.run_spec.seed * 1000 + trial_number


# --- run start and advance -------------------------------------------------------------------

def run_start(*, run_id: int) -> None:
    if EvaluationRun.objects.filter(pk=run_id, status=Status.QUEUED).update(status=Status.RUNNING,
                                                                            started_at=timezone.now()):
        run_advance(run_id=run_id)
        run_watch(run_id=run_id)


def _done_prefix(trials: list[Trial]) -> int:
    """Trials 1..m all done: the part of the run the charts can show."""
    done = 0
    for trial in trials:
        if trial.status != Trial.Status.DONE:
            break
        done = trial.number
    return done


def run_advance(*, run_id: int) -> None:
    """Start the next trial when none is in progress and the review gate is open; complete the run
    after the last. Safe to call any number of times."""
    run = EvaluationRun.objects.filter(pk=run_id, status__in=ADVANCING).select_related("bank").first()
    if run is None:
        return
    trials = list(run.trial_rows.order_by("number"))
    if any(t.status in (Trial.Status.RUNNING, Trial.Status.REFLECTING) for t in trials):
        return
    _metrics_refresh(run, _done_prefix(trials))
    pending = [t for t in trials if t.status == Trial.Status.PENDING]
    if not pending:
        run_complete(run=run)
    elif _gate_open(run, pending[0]):
        trial_start(trial=pending[0])


def _metrics_refresh(run: EvaluationRun, done: int) -> None:
    if done and done != run.metrics_trials:
        EvaluationRun.objects.filter(pk=run.pk).update(metrics=run_metrics_compute(run=run, trials=done),
                                                       metrics_trials=done)


def _gate_open(run: EvaluationRun, trial: Trial) -> bool:
    waiting = 0
    if trial.number > 1 and run.memory_layer.waits_for_review(run):
        waiting = run_pending_memories(run=run)
    if waiting:
        message = f"{waiting} memor{'y' if waiting == 1 else 'ies'} from this run await review before trial {trial.number}"
        EvaluationRun.objects.filter(pk=run.pk, status__in=ADVANCING).update(
            status=Status.WAITING_FOR_REVIEW, status_message=message)
        return False
    return bool(EvaluationRun.objects.filter(pk=run.pk, status__in=ADVANCING).update(
        status=Status.RUNNING, status_message=""))


def run_complete(*, run: EvaluationRun) -> None:
    metrics = run_metrics_compute(run=run, trials=run.run_spec.trials)
    if EvaluationRun.objects.filter(pk=run.pk, status__in=ADVANCING).update(
            status=Status.COMPLETED, metrics=metrics, metrics_trials=run.run_spec.trials, status_message="",
            finished_at=timezone.now(), watch_until=None):
        run_finished_announce(run_id=run.pk)


def run_fail(*, run_id: int, message: str) -> None:
    if EvaluationRun.objects.filter(pk=run_id, status__in=EvaluationRun.ACTIVE).update(
            status=Status.FAILED, status_message=message, finished_at=timezone.now(), watch_until=None):
        run_finished_announce(run_id=run_id)


def run_cancelled_settle(*, run_id: int) -> None:
    """A cancelled run's trials and episodes that were still to play say so; episodes that were
    playing finish and keep their verdicts (and a trial writing its memories finishes that)."""
    cancelled = {"run_id": run_id, "run__status": Status.CANCELLED}
    RunEpisode.objects.filter(**cancelled, status=RunEpisode.Status.PENDING).update(
        status=RunEpisode.Status.CANCELLED, queued_at=None)
    Trial.objects.filter(**cancelled, status__in=(Trial.Status.PENDING, Trial.Status.RUNNING)).update(
        status=Trial.Status.CANCELLED)


def run_watch(*, run_id: int) -> None:
    """Arm the run's next sweep unless one is already due (one chain of sweeps per run)."""
    now, interval = timezone.now(), watch_interval()
    armed = EvaluationRun.objects.filter(pk=run_id, status__in=ADVANCING, executor=EvaluationRun.Executor.CELERY).filter(
        Q(watch_until__isnull=True) | Q(watch_until__lt=now + interval / 2)).update(watch_until=now + interval)
    if armed:
        work_send("sweep", run_id=run_id, countdown=interval.total_seconds())


# --- trials ---------------------------------------------------------------------------------

def trial_start(*, trial: Trial) -> None:
    """Claim the trial, create its rows (one per task) and queue the first window of episodes."""
    run = trial.run
    with transaction.atomic():
        if not Trial.objects.filter(pk=trial.pk, status=Trial.Status.PENDING).update(
                status=Trial.Status.RUNNING, started_at=timezone.now()):
            return
        seed = episode_seed(run, trial.number)
        tasks = _trial_tasks(run, trial.number)
        rows = [RunEpisode(run=run, trial=trial, task=task, task_key=task.external_id, seed=seed,
                           split=run.task_splits.get(task.external_id, "")) for task in tasks]
        RunEpisode.objects.bulk_create(rows, ignore_conflicts=True)
        Trial.objects.filter(pk=trial.pk).update(episodes_total=len(rows))
        window_fill(trial_id=trial.pk)
        if not rows:
            work_send("finish", trial_id=trial.pk)


def _trial_tasks(run: EvaluationRun, trial_number: int) -> list[Task]:
    """The run's tasks, or a train-then-test run's tasks of the split this trial plays."""
    tasks = Task.objects.filter(pk__in=run.task_pks).order_by("external_id")
    only = trial_split(run, trial_number)
    return [task for task in tasks if only is None or run.task_splits.get(task.external_id) == only]


def window_fill(*, trial_id: int) -> int:
    """Queue the trial's pending episodes, one message per chunk, until `concurrency` chunks' worth
    of them are queued or running. Returns how many episodes it queued."""
    with transaction.atomic():
        trial = Trial.objects.select_for_update(of=("self",)).select_related("run").get(pk=trial_id)
        if trial.run.status != Status.RUNNING or trial.status != Trial.Status.RUNNING:
            return 0
        chunk = chunk_size(trial.run)
        rows = trial.run_episodes
        in_flight = rows.filter(Q(status=RunEpisode.Status.RUNNING)
                                | Q(status=RunEpisode.Status.PENDING, queued_at__isnull=False)).count()
        free = trial.run.run_spec.concurrency * chunk - in_flight
        ids = list(rows.filter(status=RunEpisode.Status.PENDING, queued_at__isnull=True)
                   .order_by("task_key").values_list("pk", flat=True)[:max(free, 0)])
        RunEpisode.objects.filter(pk__in=ids).update(queued_at=timezone.now())
        for first in range(0, len(ids), chunk):
            work_send("episodes", run_episode_ids=ids[first:first + chunk])
    return len(ids)


def chunk_size(run: EvaluationRun) -> int:
    """Episodes one message claims and plays in a row. Offline episodes take milliseconds, so a
    message, a claim and a store per episode would cost more than the episode: they go in chunks,
    about half a slot's share of the trial each (the other half evens out the slots' ends). An LLM
    episode takes seconds: one at a time keeps all `concurrency` slots busy to the trial's end.
    The MEMWEB_RUN_CHUNK_EPISODES setting fixes the size instead."""
    if settings.RUN_CHUNK_EPISODES:
        return settings.RUN_CHUNK_EPISODES
    offline = (run.run_spec.agent.backend == AgentBackend.SCRIPTED
               and run.run_spec.customer.backend == CustomerBackend.AGENDA)
    if not offline:
        return 1
    return max(1, min(MAX_CHUNK_EPISODES, math.ceil(len(run.task_pks) / (2 * run.run_spec.concurrency))))


def _unfinished(trial_ref) -> Exists:
    return Exists(RunEpisode.objects.filter(trial_id=trial_ref, status__in=RunEpisode.UNFINISHED))


def trial_finish(*, trial_id: int, worker: str = INLINE) -> None:
    """After the trial's last episode: its trajectories become Orbs in the run's bank (memory is
    never reset between trials), the review gate applies, and the run advances."""
    token, now = uuid.uuid4(), timezone.now()
    claimed = Trial.objects.filter(pk=trial_id, status=Trial.Status.RUNNING, run__status=Status.RUNNING).filter(
        ~_unfinished(OuterRef("pk"))).update(status=Trial.Status.REFLECTING, claim_token=token, claimed_by=worker,
                                            claimed_at=now)
    if not claimed:
        return
    trial = Trial.objects.select_related("run", "run__bank").get(pk=trial_id)
    try:
        _trial_memorise_retrying(trial)
    except DatabaseError:
        # Still no database after the retries: the claim goes back and the run's watchdog sends
        # the finish again; the run does not fail for an outage that its episodes would survive.
        logger.warning("finishing trial %s of run %s: the database is still failing; the watchdog retries it",
                       trial.number, trial.run_id)
        Trial.objects.filter(pk=trial_id, claim_token=token).update(status=Trial.Status.RUNNING, claim_token=None)
        return
    except Exception as exc:  # recorded on the run for the operator; resume retries the finish
        logger.exception("finishing trial %s of run %s failed", trial.number, trial.run_id)
        Trial.objects.filter(pk=trial_id, claim_token=token).update(status=Trial.Status.RUNNING, claim_token=None)
        run_fail(run_id=trial.run_id, message=f"trial {trial.number}: writing its memories failed: "
                                              f"{type(exc).__name__}: {exc}")
        return
    if Trial.objects.filter(pk=trial_id, claim_token=token, status=Trial.Status.REFLECTING).update(
            status=Trial.Status.DONE, finished_at=timezone.now(), claim_token=None):
        run_advance(run_id=trial.run_id)


def _trial_memorise_retrying(trial: Trial) -> None:
    """Write the trial's feedback and memories, retrying in place when the database fails (a
    restart, a failover, a dropped connection), as a played episode's storage is retried: each
    write skips what an earlier attempt stored, so a retry never writes twice."""
    for attempt, pause in enumerate(FINISH_RETRY_PAUSES + (None,)):
        try:
            if trial.run.run_spec.feedback_enabled:
                _feedback_backfill(trial)
            trial_memorise(trial=trial)
            return
        except DatabaseError:
            if pause is None:
                raise
            logger.warning("finishing trial %s of run %s: database error on attempt %s; retrying in %ss",
                           trial.number, trial.run_id, attempt + 1, pause, exc_info=True)
            _connection_drop_if_broken()
            time.sleep(pause)


def _connection_drop_if_broken() -> None:
    # Outside a transaction the next query opens a fresh connection; inside one (a caller's
    # atomic block) closing would break the caller, which then sees the error itself.
    if not connection.in_atomic_block:
        connection.close()


# --- episodes -------------------------------------------------------------------------------

@dataclass
class _Chunk:
    """Rows claimed together under one token, in play order, sharing one loaded run."""
    token: uuid.UUID
    rows: list[RunEpisode]


def run_episodes_execute(*, run_episode_ids: list[int], worker: str = INLINE,
                         keep_going: float = 0.0) -> list[RunEpisode]:
    """Claim the still-pending rows among `run_episode_ids` (a message's chunk), play them one after
    another and store each once; a second delivery finds nothing to claim. Then, for up to
    `keep_going` seconds, claim and play further chunks of the trial: quick (offline) episodes need
    not wait for a broker round trip each, and the messages of rows taken that way find nothing left
    to do. The message that completes the trial also finishes it. Returns the rows it stored."""
    chunk = _chunk_claim(RunEpisode.objects.filter(pk__in=run_episode_ids), worker)
    if chunk is None:
        return []
    trial_id, size = chunk.rows[0].trial_id, chunk_size(chunk.rows[0].run)
    stored = _chunk_play(chunk)
    deadline = time.monotonic() + keep_going
    while time.monotonic() < deadline and (chunk := _chunk_claim_next(trial_id, worker, size)):
        stored += _chunk_play(chunk)
    window_fill(trial_id=trial_id)
    if not RunEpisode.objects.filter(trial_id=trial_id, status__in=RunEpisode.UNFINISHED).exists():
        trial_finish(trial_id=trial_id, worker=worker)
    return stored


def _chunk_claim(rows, worker: str) -> _Chunk | None:
    """Claim the pending ones among `rows` of a running run with one UPDATE; None when none was."""
    token, now = uuid.uuid4(), timezone.now()
    claimed = rows.filter(status=RunEpisode.Status.PENDING, run__status=Status.RUNNING).update(
        status=RunEpisode.Status.RUNNING, claim_token=token, claimed_by=worker, claimed_at=now, queued_at=now,
        attempts=F("attempts") + 1)
    if not claimed:
        return None
    loaded = list(RunEpisode.objects.filter(claim_token=token).select_related("run", "run__bank", "task")
                  .order_by("task_key"))
    if not loaded:  # a sweep took them back this instant
        return None
    for row in loaded[1:]:
        row.run = loaded[0].run  # one run object: its bank and config are read once per chunk
    return _Chunk(token, loaded)


def _chunk_claim_next(trial_id: int, worker: str, size: int) -> _Chunk | None:
    """The trial's next `size` pending rows, those no message was sent for first. Rows another
    worker is claiming this instant are skipped, not waited for."""
    candidates = (RunEpisode.objects.filter(trial_id=trial_id, status=RunEpisode.Status.PENDING)
                  .order_by(F("queued_at").asc(nulls_first=True), "task_key")
                  .select_for_update(skip_locked=True).values("pk")[:size])
    with transaction.atomic():
        return _chunk_claim(RunEpisode.objects.filter(pk__in=candidates), worker)


def _chunk_play(chunk: _Chunk) -> list[RunEpisode]:
    """Play the chunk's rows in order while the run is running, storing played episodes in bulk
    at least every STORE_EVERY_SECONDS (so the run page moves and a killed worker loses little).
    A cancelled (or failed) run stops it before the next episode; its unplayed rows go back."""
    run, stored, played, started = chunk.rows[0].run, [], [], 0
    store_each = _stores_each_episode(run)
    last_store = time.monotonic()
    try:
        for row in chunk.rows:
            if not _still_running(run):
                break
            started += 1
            played.append((row, _episode_play(row)))
            if store_each or time.monotonic() - last_store >= STORE_EVERY_SECONDS:
                stored += _episodes_store(chunk.token, played)
                played, last_store = [], time.monotonic()
        stored += _episodes_store(chunk.token, played)
    except DatabaseError:
        connection.close()  # the broken one; the next query opens a fresh connection
        _claims_release(chunk.token, unplayed=chunk.rows[started:])
        raise
    if started < len(chunk.rows):
        _claims_release(chunk.token, unplayed=chunk.rows[started:])
        run_cancelled_settle(run_id=run.pk)  # the rows given back are cancelled if the run is
    return stored


def _stores_each_episode(run: EvaluationRun) -> bool:
    """A memory that learns as each episode is stored (DMRM's default): the trial's next episode must
    find this one's lessons."""
    return run.memory_layer.stores_each_episode(run)


def _still_running(run: EvaluationRun) -> bool:
    """Read between episodes (no write, so no commit to wait for): cancellation stops a chunk here."""
    return EvaluationRun.objects.filter(pk=run.pk, status=Status.RUNNING).exists()


def _episode_play(row: RunEpisode) -> EpisodePlay | str:
    """The played episode, or why it could not be played (an infrastructure error)."""
    run = row.run
    if run.memory_layer.has_bank and run.bank is None:
        return "the run's memory bank no longer exists"
    try:
        spec = run.run_spec
        return episode_simulate(task=row.task, agent_config=spec.agent.model_dump(mode="json"),
                                customer_config=spec.customer.model_dump(mode="json"),
                                memory_config=run_memory_config(run, row=row), bank=run.bank, seed=row.seed,
                                max_turns=spec.max_turns)
    except (EpisodeConfigError, pydantic.ValidationError) as exc:
        return f"configuration: {exc}"
    except DatabaseError:
        raise  # the database failed, not the episode: the row is given back and played again
    except Exception as exc:  # one broken episode never stops the run; the operator sees why
        logger.exception("episode %s of run %s failed", row.pk, row.run_id)
        return f"{type(exc).__name__}: {exc}"


def _claims_release(token: uuid.UUID, *, unplayed: list[RunEpisode]) -> None:
    """Give back the rows still claimed under `token` for the watchdog (or a resume) to queue again:
    the rows a cancellation left unplayed, or all of them when the database went away (a restart, a
    failover, a dropped connection), instead of leaving them claimed by a live worker until
    HARD_CLAIM_TIMEOUT. A row that was never played does not count as an attempt."""
    mine = RunEpisode.objects.filter(status=RunEpisode.Status.RUNNING, claim_token=token)
    released = {"status": RunEpisode.Status.PENDING, "claim_token": None, "claimed_by": "", "queued_at": None}
    mine.filter(pk__in=[row.pk for row in unplayed]).update(**released, attempts=F("attempts") - 1)
    mine.update(**released)


VERDICT_FIELDS = ["status", "error", "episode", "finished_at", "claim_token", "success", "reward", "turns", "tokens",
                  "latency_ms"]


def _verdict(episode: Episode | None, error: str) -> dict:
    fields = {"status": RunEpisode.Status.ERROR if error else RunEpisode.Status.DONE, "error": error,
              "episode": episode, "finished_at": timezone.now(), "claim_token": None}
    if episode is not None and not error:
        fields |= {"success": episode.success, "reward": episode.reward, "turns": episode.turns,
                   "tokens": episode.tokens_in + episode.tokens_out, "latency_ms": episode.latency_ms}
    return fields


def _episodes_store(token: uuid.UUID, played: list[tuple[RunEpisode, EpisodePlay | str]]) -> list[RunEpisode]:
    """Store played episodes with their rows' verdicts and the counters in one short transaction,
    only for rows still claimed under `token`: a worker that was presumed dead and comes back
    cannot store a second copy of an episode another worker has played meanwhile."""
    if not played:
        return []
    with transaction.atomic():
        ours = set(RunEpisode.objects.select_for_update().filter(
            pk__in=[row.pk for row, _ in played], status=RunEpisode.Status.RUNNING, claim_token=token)
            .order_by("pk").values_list("pk", flat=True))
        kept = [(row, result) for row, result in played if row.pk in ours]
        episodes = iter(episodes_save(plays=[result for _, result in kept if isinstance(result, EpisodePlay)]))
        for row, result in kept:
            play = result if isinstance(result, EpisodePlay) else None
            episode = next(episodes) if play else None
            if episode is not None:
                run_episode_memory_record(play=play, episode=episode, row=row)
            for name, value in _verdict(episode, play.outcome.infra_error if play else result).items():
                setattr(row, name, value)
        rows = [row for row, _ in kept]
        if rows:
            RunEpisode.objects.bulk_update(rows, VERDICT_FIELDS)
            run_counts_add(row=rows[0], finished=len(rows), errors=sum(bool(r.error) for r in rows),
                           successes=sum(bool(r.success) for r in rows if not r.error))
            RunEpisode.objects.filter(claim_token=token, status=RunEpisode.Status.RUNNING).update(
                claimed_at=timezone.now())  # the rest of the chunk's lease: this worker is still at it
    for row, _ in played:
        if row.pk not in ours:
            logger.warning("run episode %s was reclaimed while it played; this copy is dropped", row.pk)
    for row in rows:
        if row.episode is not None and row.run.run_spec.feedback_enabled and not row.error:
            _feedback(row.episode, row.seed, rounds=row.run.run_spec.feedback_rounds)
    return rows


def run_counts_add(*, row: RunEpisode, finished: int, errors: int, successes: int = 0) -> None:
    changes = {"episodes_finished": F("episodes_finished") + finished, "episodes_error": F("episodes_error") + errors,
               "successes": F("successes") + successes}
    Trial.objects.filter(pk=row.trial_id).update(**changes)
    EvaluationRun.objects.filter(pk=row.run_id).update(**changes)


def _feedback(episode: Episode, seed: int, *, rounds: int) -> None:
    """Simulated user feedback (issue 7) on a stored episode; its failure never fails the episode."""
    from evaluation.feedback.services import feedback_for_episode

    try:
        with llm_traced(LLMTrace(trace_id=episode.trace_id)):  # its scorer's calls count as the episode's
            feedback_for_episode(episode=episode, seed=seed, rounds=rounds)
    except Exception:
        logger.exception("simulated feedback for episode %s failed", episode.pk)


def _feedback_backfill(trial: Trial) -> None:
    """Feedback that a worker died before writing is written before the trial's memories are."""
    rows = trial.run_episodes.filter(status=RunEpisode.Status.DONE, episode__isnull=False)
    for row in rows.select_related("episode"):
        _feedback(row.episode, row.seed, rounds=trial.run.run_spec.feedback_rounds)
