"""Running a run: the MemOrb protocol as Celery work.

start -> trial 1 -> episodes (a window of `concurrency` messages at a time) -> trial finish
(the run's memory learns from the trial, the review gate applies) -> trial 2 ... -> completed.

Every step claims its row with a conditional UPDATE, so a message delivered twice does nothing
the second time. An episode is played outside any transaction and stored, together with its
row's verdict, in one short transaction that only commits while the claim is still ours: a
worker that was presumed dead and comes back cannot store a second copy. Each active run arms
its next watchdog sweep here (watchdog.py does the sweeping).
"""
import logging
import time
import uuid
from datetime import timedelta

import pydantic
from django.db import DatabaseError, connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from evaluation.models import Episode, Task
from evaluation.runs.models import EvaluationRun, MemoryMode, ReviewGate, RunEpisode, Trial
from evaluation.runs.services.announce import run_finished_announce
from evaluation.runs.services.dispatch import work_send
from evaluation.runs.services.memory import (
    run_episode_dmrm_record,
    run_episode_outcome_record,
    run_memory_config,
    run_pending_memories,
    trial_memorise,
)
from evaluation.runs.services.results import run_metrics_compute
from evaluation.services import EpisodeConfigError, EpisodePlay, episode_save, episode_simulate
from memweb.services import worker_liveness_window

logger = logging.getLogger(__name__)
Status = EvaluationRun.Status
INLINE = "inline"
ADVANCING = (Status.RUNNING, Status.WAITING_FOR_REVIEW)


def watch_interval() -> timedelta:
    """How long a claim may go without its worker's heartbeat (the workers' liveness window)."""
    return worker_liveness_window()


def episode_seed(run: EvaluationRun, trial_number: int) -> int:
    """One seed per (run seed, trial): runs with equal seeds plan the same errors, so they pair up."""
    return run.seed * 1000 + trial_number


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
    if trial.number > 1 and run.uses_memorb and run.review_gate == ReviewGate.WAIT:
        waiting = run_pending_memories(run=run)
    if waiting:
        message = f"{waiting} memor{'y' if waiting == 1 else 'ies'} from this run await review before trial {trial.number}"
        EvaluationRun.objects.filter(pk=run.pk, status__in=ADVANCING).update(
            status=Status.WAITING_FOR_REVIEW, status_message=message)
        return False
    return bool(EvaluationRun.objects.filter(pk=run.pk, status__in=ADVANCING).update(
        status=Status.RUNNING, status_message=""))


def run_complete(*, run: EvaluationRun) -> None:
    metrics = run_metrics_compute(run=run, trials=run.trials)
    if EvaluationRun.objects.filter(pk=run.pk, status__in=ADVANCING).update(
            status=Status.COMPLETED, metrics=metrics, metrics_trials=run.trials, status_message="",
            finished_at=timezone.now(), watch_until=None):
        run_finished_announce(run_id=run.pk)


def run_fail(*, run_id: int, message: str) -> None:
    if EvaluationRun.objects.filter(pk=run_id, status__in=EvaluationRun.ACTIVE).update(
            status=Status.FAILED, status_message=message, finished_at=timezone.now(), watch_until=None):
        run_finished_announce(run_id=run_id)


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
        tasks = Task.objects.filter(pk__in=run.task_pks).order_by("external_id")
        rows = [RunEpisode(run=run, trial=trial, task=task, task_key=task.external_id, seed=seed) for task in tasks]
        RunEpisode.objects.bulk_create(rows, ignore_conflicts=True)
        Trial.objects.filter(pk=trial.pk).update(episodes_total=len(rows))
        window_fill(trial_id=trial.pk)
        if not rows:
            work_send("finish", trial_id=trial.pk)


def window_fill(*, trial_id: int) -> int:
    """Queue pending episodes until `concurrency` of the trial's episodes are queued or running."""
    with transaction.atomic():
        trial = Trial.objects.select_for_update(of=("self",)).select_related("run").get(pk=trial_id)
        if trial.run.status != Status.RUNNING or trial.status != Trial.Status.RUNNING:
            return 0
        rows = trial.run_episodes
        in_flight = rows.filter(Q(status=RunEpisode.Status.RUNNING)
                                | Q(status=RunEpisode.Status.PENDING, queued_at__isnull=False)).count()
        free = trial.run.concurrency - in_flight
        ids = list(rows.filter(status=RunEpisode.Status.PENDING, queued_at__isnull=True)
                   .order_by("task_key").values_list("pk", flat=True)[:max(free, 0)])
        RunEpisode.objects.filter(pk__in=ids).update(queued_at=timezone.now())
        for pk in ids:
            work_send("episode", run_episode_id=pk)
    return len(ids)


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
        if trial.run.feedback_enabled:
            _feedback_backfill(trial)
        trial_memorise(trial=trial)
    except Exception as exc:  # recorded on the run for the operator; resume retries the finish
        logger.exception("finishing trial %s of run %s failed", trial.number, trial.run_id)
        Trial.objects.filter(pk=trial_id, claim_token=token).update(status=Trial.Status.RUNNING, claim_token=None)
        run_fail(run_id=trial.run_id, message=f"trial {trial.number}: writing its memories failed: "
                                              f"{type(exc).__name__}: {exc}")
        return
    if Trial.objects.filter(pk=trial_id, claim_token=token, status=Trial.Status.REFLECTING).update(
            status=Trial.Status.DONE, finished_at=timezone.now(), claim_token=None):
        run_advance(run_id=trial.run_id)


# --- episodes -------------------------------------------------------------------------------

def _episode_claim(run_episode_id: int, worker: str) -> uuid.UUID | None:
    token = uuid.uuid4()
    claimed = RunEpisode.objects.filter(pk=run_episode_id, status=RunEpisode.Status.PENDING,
                                        run__status=Status.RUNNING).update(
        status=RunEpisode.Status.RUNNING, claim_token=token, claimed_by=worker, claimed_at=timezone.now(),
        attempts=F("attempts") + 1)
    return token if claimed else None


def run_episode_execute(*, run_episode_id: int, worker: str = INLINE, keep_going: float = 0.0) -> RunEpisode | None:
    """Play one (run, trial, task) episode and store it once; a second delivery does nothing.
    Then, for up to `keep_going` seconds, play the trial's other pending episodes: quick (offline)
    episodes need not wait for a broker round trip each, and their own messages find nothing
    left to do. The episode that completes the trial also finishes it."""
    token = _episode_claim(run_episode_id, worker)
    if token is None:
        return None
    row = RunEpisode.objects.select_related("run", "run__bank", "task").get(pk=run_episode_id)
    stored = _episode_complete(row, token)
    deadline = time.monotonic() + keep_going
    while time.monotonic() < deadline and (claimed := _episode_claim_next(row.trial_id, worker)):
        _episode_complete(*claimed)
    window_fill(trial_id=row.trial_id)
    if not RunEpisode.objects.filter(trial_id=row.trial_id, status__in=RunEpisode.UNFINISHED).exists():
        trial_finish(trial_id=row.trial_id, worker=worker)
    return stored


def _episode_claim_next(trial_id: int, worker: str) -> tuple[RunEpisode, uuid.UUID] | None:
    candidates = RunEpisode.objects.filter(trial_id=trial_id, status=RunEpisode.Status.PENDING,
                                           run__status=Status.RUNNING).order_by("task_key")
    for pk in candidates.values_list("pk", flat=True)[:3]:
        token, now = uuid.uuid4(), timezone.now()
        if RunEpisode.objects.filter(pk=pk, status=RunEpisode.Status.PENDING).update(
                status=RunEpisode.Status.RUNNING, claim_token=token, claimed_by=worker, claimed_at=now, queued_at=now,
                attempts=F("attempts") + 1):
            return RunEpisode.objects.select_related("run", "run__bank", "task").get(pk=pk), token
    return None


def _episode_complete(row: RunEpisode, token: uuid.UUID) -> RunEpisode | None:
    try:
        stored = _episode_store(row, token, _episode_play(row))
    except DatabaseError:
        _claim_release(row, token)
        raise
    if stored is not None and stored.episode is not None and row.run.feedback_enabled and not stored.error:
        _feedback(stored.episode, stored.seed, rounds=row.run.feedback_rounds)
    return stored


def _episode_play(row: RunEpisode) -> EpisodePlay | str:
    """The played episode, or why it could not be played (an infrastructure error)."""
    run = row.run
    if run.memory_mode != MemoryMode.NONE and run.bank is None:
        return "the run's memory bank no longer exists"
    try:
        return episode_simulate(task=row.task, agent_config=run.agent_config, customer_config=run.customer_config,
                                memory_config=run_memory_config(run, row=row), bank=run.bank, seed=row.seed,
                                max_turns=run.max_turns)
    except (EpisodeConfigError, pydantic.ValidationError) as exc:
        return f"configuration: {exc}"
    except DatabaseError:
        raise  # the database failed, not the episode: the row is given back and played again
    except Exception as exc:  # one broken episode never stops the run; the operator sees why
        logger.exception("episode %s of run %s failed", row.pk, row.run_id)
        return f"{type(exc).__name__}: {exc}"


def _claim_release(row: RunEpisode, token: uuid.UUID) -> None:
    """The database went away while the row was ours (a restart, a failover, a dropped connection):
    give the row back for the watchdog to queue again, instead of leaving it claimed by a live
    worker until HARD_CLAIM_TIMEOUT."""
    connection.close()  # the broken one; the next query opens a fresh connection
    RunEpisode.objects.filter(pk=row.pk, status=RunEpisode.Status.RUNNING, claim_token=token).update(
        status=RunEpisode.Status.PENDING, claim_token=None, claimed_by="", queued_at=None)


class _ClaimLost(Exception):
    """The row was given to another worker meanwhile (we looked dead): store nothing."""


def _verdict(play: EpisodePlay | None, episode: Episode | None, error: str) -> dict:
    fields = {"status": RunEpisode.Status.ERROR if error else RunEpisode.Status.DONE, "error": error,
              "episode": episode, "finished_at": timezone.now(), "claim_token": None}
    if episode is not None and not error:
        fields |= {"success": episode.success, "reward": episode.reward, "turns": episode.turns,
                   "tokens": episode.tokens_in + episode.tokens_out, "latency_ms": episode.latency_ms}
    return fields


def _episode_store(row: RunEpisode, token: uuid.UUID, result: EpisodePlay | str) -> RunEpisode | None:
    play = result if isinstance(result, EpisodePlay) else None
    error = play.outcome.infra_error if play else result
    try:
        with transaction.atomic():
            episode = episode_save(play=play) if play else None
            if episode is not None:
                run_episode_outcome_record(play=play, episode=episode)
                run_episode_dmrm_record(episode=episode, run=row.run)
            fields = _verdict(play, episode, error)
            if not RunEpisode.objects.filter(pk=row.pk, status=RunEpisode.Status.RUNNING,
                                             claim_token=token).update(**fields):
                raise _ClaimLost
            run_counts_add(row=row, finished=1, errors=int(bool(error)), successes=int(bool(fields.get("success"))))
    except _ClaimLost:
        logger.warning("run episode %s was reclaimed while it played; this copy is dropped", row.pk)
        return None
    for name, value in fields.items():
        setattr(row, name, value)
    return row


def run_counts_add(*, row: RunEpisode, finished: int, errors: int, successes: int = 0) -> None:
    changes = {"episodes_finished": F("episodes_finished") + finished, "episodes_error": F("episodes_error") + errors,
               "successes": F("successes") + successes}
    Trial.objects.filter(pk=row.trial_id).update(**changes)
    EvaluationRun.objects.filter(pk=row.run_id).update(**changes)


def _feedback(episode: Episode, seed: int, *, rounds: int) -> None:
    """Simulated user feedback (issue 7) on a stored episode; its failure never fails the episode."""
    from evaluation.feedback.services import feedback_for_episode

    try:
        feedback_for_episode(episode=episode, seed=seed, rounds=rounds)
    except Exception:
        logger.exception("simulated feedback for episode %s failed", episode.pk)


def _feedback_backfill(trial: Trial) -> None:
    """Feedback that a worker died before writing is written before the trial's memories are."""
    rows = trial.run_episodes.filter(status=RunEpisode.Status.DONE, episode__isnull=False)
    for row in rows.select_related("episode"):
        _feedback(row.episode, row.seed, rounds=trial.run.feedback_rounds)
