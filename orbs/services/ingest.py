"""Algorithm 1 of the MemOrb paper: a finished episode becomes an Orb.

obs = the user utterances concatenated; emotion = tag of the last user
utterance; outcome = the reflector's policy reflection on the whole
trajectory; context = reward and metadata; id = SHA-256(obs ‖ emotion ‖ outcome)
(with the customer appended in a per-customer bank). A lesson remembered as text
becomes an Orb the same way, through the same duplicate checks and review gate.
"""
import logging
from dataclasses import dataclass, replace
from datetime import timedelta

import pydantic
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from memweb.errors import problems_of
from memweb.services import claims_stale, worker_liveness_window
from orbs.backends import BackendResult
from orbs.backends.emotion import emotion_tag, emotion_text
from orbs.backends.reflector import RECENT_REFLECTIONS_M, ReflectionStyle, reflection_write
from orbs.content import content_normalise
from orbs.context_filter import context_size_problem
from orbs.errors import FieldRequired, InvalidTrajectory
from orbs.models import EpisodeRecord, MemoryBank, Orb, ReviewEvent, Source, orb_document
from orbs.schemas import TrajectoryIn
from orbs.services.announce import episode_ingested_announce, orb_created_announce
from orbs.services.banks import bank_embedder, bank_resolve
from orbs.services.history import ORB_REVISION, REVIEW_EVENT, history_append
from orbs.services.identity import orb_current
from orbs.services.retrieval import retrieval_outcome_record
from orbs.services.review import orb_snapshot
from orbs.services.search import vectors_nearest

logger = logging.getLogger(__name__)
RETRIEVAL_IDS_KEY = "retrieval_ids"  # metadata key: retrievals this episode used, to record how it ended
STALE_CLAIM_AFTER = timedelta(minutes=10)
# An episode still waiting this long after its commit with no message sent lost it (the worker beat sends it).
UNSENT_AFTER = timedelta(seconds=30)
SWEEP_BATCH = 500  # episodes sent again per worker beat, so one beat stays short
# A remembered lesson has no customer utterances; the marker keeps obs non-empty (edit forms and
# bank files require it) and tells a reader of the prompt block where the lesson came from.
REMEMBERED_OBS = "(a lesson remembered as text, not from a dialogue)"
REMEMBERED_EMOTION = "neutral"


@dataclass(frozen=True)
class OrbIngestResult:
    orb: Orb
    created: bool
    near_duplicate_of: Orb | None


@dataclass(frozen=True)
class OrbDraft:
    obs: str
    emotion: BackendResult
    outcome: BackendResult
    context: dict

    @property
    def document(self) -> str:
        return orb_document(obs=self.obs, emotion=self.emotion.value, outcome=self.outcome.value, context=self.context)

    @property
    def backend_error(self) -> str:
        return "\n".join(error for error in (self.emotion.error, self.outcome.error) if error)


def trajectory_parse(trajectory: dict | TrajectoryIn) -> TrajectoryIn:
    if isinstance(trajectory, TrajectoryIn):
        return trajectory
    try:
        return TrajectoryIn.model_validate(trajectory)
    except pydantic.ValidationError as exc:
        problems = problems_of(exc, whole="trajectory")
        raise InvalidTrajectory(problems) from None


def trajectory_stored(trajectory: TrajectoryIn) -> dict:
    """The trajectory as the caller sent it (no defaults added), for the transcript and export."""
    return trajectory.model_dump(mode="json", exclude_unset=True)


def recent_reflections(bank: MemoryBank, customer_key: str = "") -> list[str]:
    """The outcomes of the bank's last m live Orbs, newest first, which the reflector builds on; in a
    per-customer bank only the customer's own, so no other customer's lesson leaks into the reflection."""
    live = live_orbs(bank, customer_key)
    return list(live.order_by("-created_at", "-pk").values_list("outcome", flat=True)[:RECENT_REFLECTIONS_M])


def live_orbs(bank: MemoryBank, customer_key: str):
    """Pending and approved Orbs the new one is compared with: in a per-customer bank, the customer's."""
    live = Orb.objects.filter(bank=bank, status__in=[Orb.Status.PENDING, Orb.Status.APPROVED])
    return live.filter(customer_key=customer_key) if bank.is_per_customer else live


def orb_draft(*, trajectory: TrajectoryIn, recent: list[str] = (),
              style: str = ReflectionStyle.SIMPLE) -> OrbDraft:
    utterances = trajectory.user_utterances
    metadata = {key: value for key, value in trajectory.metadata.items() if key != RETRIEVAL_IDS_KEY}
    emotion = emotion_tag(text=emotion_text(utterances))  # before the reflection: the order the LLM is asked in
    outcome = reflection_write(trajectory=trajectory, recent=recent, style=style)
    return OrbDraft(
        obs=content_normalise("\n".join(utterances)),
        emotion=emotion,
        outcome=replace(outcome, value=content_normalise(outcome.value)),
        context={"reward": trajectory.reward, "success": trajectory.success, **metadata},
    )


def customer_key_check(bank: MemoryBank, customer_key: str, *, field: str = "customer_key") -> None:
    """A per-customer bank's Orb belongs to a customer; without one no customer could ever retrieve it."""
    if bank.is_per_customer and not customer_key.strip():
        raise FieldRequired(field, f"bank {bank.slug!r} keeps Orbs per customer: name the customer")


def _near_duplicate(bank: MemoryBank, vector: list[float], customer_key: str) -> tuple[Orb | None, float | None]:
    """The closest live Orb at the bank's threshold; in a per-customer bank, only the same customer's."""
    nearest = vectors_nearest(queryset=live_orbs(bank, customer_key), vector=vector, k=1)
    if nearest and nearest[0][1] >= bank.near_duplicate_threshold:
        return nearest[0]
    return None, None


def auto_approval_fields(bank: MemoryBank, *, reward: float | None, emotion: str, duplicate: Orb | None) -> dict:
    """Status fields for a new Orb. Near-duplicates always wait for a reviewer's merge decision."""
    if duplicate is None and bank.approves_automatically(reward=reward, emotion=emotion):
        note = f"auto-approved by the bank's policy ({bank.get_auto_approve_display()})"
        return {"status": Orb.Status.APPROVED, "reviewed_at": timezone.now(), "review_note": note}
    return {"status": Orb.Status.PENDING}


def _orb_create(*, bank: MemoryBank, fields: dict, vector, duplicate: Orb | None, score: float | None,
                reward: float | None) -> Orb:
    return Orb.objects.create(
        bank=bank, **fields, near_duplicate_of=duplicate, near_duplicate_score=score, vector=vector,
        embedding_model=bank.embedding_model,
        **auto_approval_fields(bank, reward=reward, emotion=fields["emotion"], duplicate=duplicate),
    )


def episode_orb_fields(*, content_hash: str, draft: OrbDraft, trajectory: TrajectoryIn,
                        episode: EpisodeRecord) -> dict:
    return {
        "content_hash": content_hash, "obs": draft.obs, "emotion": draft.emotion.value,
        "outcome": draft.outcome.value, "context": draft.context, "customer_key": trajectory.customer_key,
        "domain": trajectory.domain, "source": episode.source, "source_label": episode.source_label,
        "episode_ref": episode.episode_ref, "episode": episode, "emotion_backend": draft.emotion.backend,
        "reflector_backend": draft.outcome.backend, "backend_error": draft.backend_error,
    }


def draft_hash(bank: MemoryBank, draft: OrbDraft, trajectory: TrajectoryIn) -> str:
    return bank.orb_hash(obs=draft.obs, emotion=draft.emotion.value, outcome=draft.outcome.value,
                         customer_key=trajectory.customer_key)


def stored_orb_result(bank: MemoryBank, content_hash: str) -> OrbIngestResult | None:
    """The Orb already holding this content, as its current revision (an edit since may have changed it)."""
    existing = Orb.objects.filter(bank=bank, content_hash=content_hash).values_list("pk", flat=True).first()
    if existing is None:
        return None
    orb = orb_current(orb_id=existing)
    return OrbIngestResult(orb, False, orb.near_duplicate_of)


def _record_creation(orb: Orb, actor=None) -> None:
    """`actor`: the user whose request made the Orb (an API key's user), None for memweb's own work.
    An auto-approval names them too; its note says the bank's policy decided."""
    by = {"actor": actor, "actor_name": actor.get_username() if actor else ""}
    events = [ReviewEvent.objects.create(orb=orb, action=ReviewEvent.Action.CREATED, after=orb_snapshot(orb), **by)]
    if orb.status == Orb.Status.APPROVED:
        events.append(ReviewEvent.objects.create(
            orb=orb, action=ReviewEvent.Action.AUTO_APPROVED, before={"status": Orb.Status.PENDING},
            after={"status": orb.status}, note=orb.review_note, **by,
        ))
    history_append(bank_id=orb.bank_id, rows=[(ORB_REVISION, orb.pk), *((REVIEW_EVENT, e.pk) for e in events)])
    orb_created_announce(orb)


def _ingest(*, bank: MemoryBank, trajectory: TrajectoryIn, episode: EpisodeRecord | None,
            style: str = ReflectionStyle.SIMPLE, **provenance) -> OrbIngestResult:
    """The work shared by the synchronous call and the Celery task; LLM and embedder run
    before the transaction so no lock is held while they think."""
    customer_key_check(bank, trajectory.customer_key, field="trajectory.customer_key")
    draft = orb_draft(trajectory=trajectory, recent=recent_reflections(bank, trajectory.customer_key), style=style)
    ref = episode.episode_ref if episode else provenance["episode_ref"]
    content_hash = draft_hash(bank, draft, trajectory)
    if (stored := stored_orb_result(bank, content_hash)) is not None:
        return _finish(stored, episode, trajectory, ref)
    vector = bank_embedder(bank).embed_one(draft.document)
    duplicate, score = _near_duplicate(bank, vector, trajectory.customer_key)
    try:
        with transaction.atomic():
            record = episode or EpisodeRecord.objects.create(bank=bank, trajectory=trajectory_stored(trajectory), **provenance)
            fields = episode_orb_fields(content_hash=content_hash, draft=draft, trajectory=trajectory, episode=record)
            orb = _orb_create(bank=bank, fields=fields, vector=vector, duplicate=duplicate, score=score,
                              reward=draft.context["reward"])
            _record_creation(orb, actor=record.submitted_by)
            return _finish(OrbIngestResult(orb, True, duplicate), record, trajectory, ref)
    except IntegrityError:
        # Another worker stored the same Orb a moment ago: same id, nothing new.
        return _finish(stored_orb_result(bank, content_hash), episode, trajectory, ref)


def _finish(result: OrbIngestResult, episode: EpisodeRecord | None, trajectory: TrajectoryIn,
            episode_ref: str) -> OrbIngestResult:
    with transaction.atomic():
        retrieval_ids = trajectory.metadata.get(RETRIEVAL_IDS_KEY) or []
        if isinstance(retrieval_ids, list):
            # Only outcomes nobody recorded: the episode's own writer (an evaluation run, an agent
            # posting the outcome) knew it first-hand, and a re-ingested copy must not replace it.
            retrieval_outcome_record(
                retrieval_ids=[i for i in retrieval_ids if isinstance(i, int)], success=trajectory.success,
                reward=trajectory.reward, episode_ref=episode_ref, unrecorded_only=True,
            )
        if episode is not None:
            EpisodeRecord.objects.filter(pk=episode.pk).update(
                status=EpisodeRecord.Status.DONE, orb=result.orb, created_orb=result.created,
                finished_at=timezone.now(), error="",
            )
            episode_ingested_announce(episode, result.orb, created=result.created)
    return result


def orb_from_episode(*, bank: MemoryBank | str, trajectory: dict | TrajectoryIn, source_label: str = "",
                     episode_ref: str = "", source: str = Source.EPISODE,
                     reflection_style: str = ReflectionStyle.SIMPLE) -> OrbIngestResult:
    """Store one finished episode as an Orb (idempotent on the Orb's hash); `reflection_style`
    chooses the reflection (the complex structured one is the paper's ablation).
    Raises InvalidTrajectory naming each bad field, or MemoryBank.DoesNotExist."""
    bank = bank_resolve(bank)
    parsed = trajectory_parse(trajectory)
    return _ingest(bank=bank, trajectory=parsed, episode=None, style=reflection_style, source=source,
                   source_label=source_label,
                   episode_ref=episode_ref, status=EpisodeRecord.Status.RUNNING, started_at=timezone.now())


def episode_submit(*, bank: MemoryBank, trajectory: TrajectoryIn, source_label: str = "", episode_ref: str = "",
                   source: str = Source.API, user=None, queue: bool = True) -> EpisodeRecord:
    """Store the episode and, with `queue`, queue its reflection (sent when the transaction commits;
    a message that never leaves is sent by the worker beat, episodes_send_unsent).
    Raises FieldRequired when a per-customer bank is given no customer, before anything is stored."""
    customer_key_check(bank, trajectory.customer_key, field="trajectory.customer_key")
    with transaction.atomic():
        record = EpisodeRecord.objects.create(
            bank=bank, trajectory=trajectory_stored(trajectory), source=source, source_label=source_label,
            episode_ref=episode_ref, submitted_by=user,
        )
        if queue:
            # robust: a broker that cannot take the message must not fail the write that committed.
            transaction.on_commit(lambda: _message_send(record.pk), robust=True)
    return record


def _message_send(ingest_id: int) -> None:
    from orbs.tasks import reflect_episode

    reflect_episode.delay(ingest_id)
    EpisodeRecord.objects.filter(pk=ingest_id).update(message_sent_at=timezone.now())


def _unsent(now) -> Q:
    """Episodes that no message will reflect: waiting with no message sent (a crash between the commit
    and the send, a broker down), or none recently (lost with the broker's queue), or claimed by a
    worker that died; the sync path claims its own at once, well within UNSENT_AFTER."""
    no_recent_message = Q(message_sent_at__isnull=True) | Q(message_sent_at__lt=now - STALE_CLAIM_AFTER)
    waiting = Q(status=EpisodeRecord.Status.QUEUED, created_at__lt=now - UNSENT_AFTER)
    return no_recent_message & (waiting | Q(status=EpisodeRecord.Status.RUNNING) & _claim_dead(now))


def _claim_dead(now) -> Q:
    """A reflection claim no live worker process holds (memweb.services.claims_stale: at once for a
    worker restarted under its name), or one older than any reflection takes (the synchronous path's
    claims name no worker: a web request that died rolled its claim back with it)."""
    named = ~Q(claimed_by="") & claims_stale(field="claimed_by", at="started_at", grace=worker_liveness_window())
    return named | Q(started_at__lt=now - STALE_CLAIM_AFTER)


def episodes_send_unsent() -> int:
    """Worker beat, the outbox of reflections: send the task again for each episode that no message
    will reflect (_unsent); how many were sent. Each send is claimed with a conditional update, so of
    many workers' beats one sends it, and a duplicate message finds the episode claimed (_claim)."""
    from orbs.tasks import reflect_episode

    now = timezone.now()
    sent = 0
    for ingest_id in list(EpisodeRecord.objects.filter(_unsent(now)).values_list("pk", flat=True)[:SWEEP_BATCH]):
        if not EpisodeRecord.objects.filter(_unsent(now), pk=ingest_id).update(message_sent_at=now):
            continue
        try:
            reflect_episode.delay(ingest_id)
        except Exception:
            # The broker is down: unclaimed, the episode is the next beat's again.
            EpisodeRecord.objects.filter(pk=ingest_id).update(message_sent_at=None)
            raise
        sent += 1
    return sent


def _claim(ingest_id: int, worker: str) -> bool:
    """Take the episode unless a live worker holds it or it is finished
    (a re-delivered task is harmless: the Orb's hash makes ingest idempotent)."""
    now = timezone.now()
    claimable = Q(status=EpisodeRecord.Status.QUEUED) | Q(status=EpisodeRecord.Status.RUNNING) & _claim_dead(now)
    return bool(
        EpisodeRecord.objects.filter(claimable, pk=ingest_id).update(
            status=EpisodeRecord.Status.RUNNING, started_at=now, claimed_by=worker, attempts=F("attempts") + 1
        )
    )


def episode_reflect(*, ingest_id: int, worker: str = "") -> EpisodeRecord:
    """Turn a stored episode into its Orb; a failure is recorded on the episode, never raised.
    `worker`: the claimant a worker's task claims it under (empty in a web request)."""
    if _claim(ingest_id, worker):
        record = EpisodeRecord.objects.select_related("bank").get(pk=ingest_id)
        try:
            _ingest(bank=record.bank, trajectory=trajectory_parse(record.trajectory), episode=record)
        except Exception as exc:  # recorded for the operator; one bad episode never stops the worker
            logger.exception("reflecting episode %s failed", ingest_id)
            EpisodeRecord.objects.filter(pk=ingest_id).update(
                status=EpisodeRecord.Status.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
            )
    return EpisodeRecord.objects.select_related("orb").get(pk=ingest_id)


def orb_remember(*, bank: MemoryBank | str, text: str, context: dict | None = None, customer_key: str = "",
                 domain: str = "", source_label: str = "", actor=None) -> OrbIngestResult:
    """A lesson given as text, without a trajectory, becomes an Orb: outcome = the lesson, obs a marker,
    emotion neutral. Same identity, near-duplicate check and review gate as an episode's Orb; with no
    reward, a by-rule bank leaves it to a reviewer. Raises FieldRequired naming `text`, `customer_key` or
    `context` (over ORBS_CONTEXT_MAX_BYTES)."""
    bank = bank_resolve(bank)
    lesson = content_normalise(text)
    if not lesson:
        raise FieldRequired("text", "the lesson to remember is empty")
    customer_key_check(bank, customer_key)
    if problem := context_size_problem(context or {}):
        raise FieldRequired("context", problem)
    fields = {"obs": REMEMBERED_OBS, "emotion": REMEMBERED_EMOTION, "outcome": lesson, "context": context or {},
              "customer_key": customer_key, "domain": domain, "source": Source.REMEMBERED,
              "source_label": source_label}
    content_hash = bank.orb_hash(obs=REMEMBERED_OBS, emotion=REMEMBERED_EMOTION, outcome=lesson,
                                 customer_key=customer_key)
    if (stored := stored_orb_result(bank, content_hash)) is not None:
        return stored
    document = orb_document(obs=REMEMBERED_OBS, emotion=REMEMBERED_EMOTION, outcome=lesson, context=fields["context"])
    vector = bank_embedder(bank).embed_one(document)
    duplicate, score = _near_duplicate(bank, vector, customer_key)
    try:
        with transaction.atomic():
            orb = _orb_create(bank=bank, fields={**fields, "content_hash": content_hash}, vector=vector,
                              duplicate=duplicate, score=score, reward=None)
            _record_creation(orb, actor=actor)
            return OrbIngestResult(orb, True, duplicate)
    except IntegrityError:
        # The same lesson was stored a moment ago by a concurrent call: same id, nothing new.
        return stored_orb_result(bank, content_hash)
