"""Algorithm 1 of the MemOrb paper: a finished episode becomes an Orb.

obs = the user utterances concatenated; emotion = tag of the last user
utterance; outcome = the reflector's policy reflection on the whole
trajectory; context = reward and metadata; id = SHA-256(obs ‖ emotion ‖ outcome).
"""
import logging
from dataclasses import dataclass
from datetime import timedelta

import pydantic
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from memweb.errors import problems_of
from orbs.backends import BackendResult
from orbs.backends.emotion import emotion_tag
from orbs.backends.reflector import RECENT_REFLECTIONS_M, ReflectionStyle, reflection_write
from orbs.errors import InvalidTrajectory
from orbs.models import EpisodeRecord, MemoryBank, Orb, ReviewEvent, Source, content_hash_of, orb_document
from orbs.schemas import TrajectoryIn
from orbs.services.banks import bank_embedder, bank_resolve
from orbs.services.retrieval import retrieval_outcome_record
from orbs.services.review import orb_snapshot
from orbs.services.search import vectors_nearest

logger = logging.getLogger(__name__)
RETRIEVAL_IDS_KEY = "retrieval_ids"  # metadata key: retrievals this episode used, to record how it ended
STALE_CLAIM_AFTER = timedelta(minutes=10)


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
    def content_hash(self) -> str:
        return content_hash_of(obs=self.obs, emotion=self.emotion.value, outcome=self.outcome.value)

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


def _stored(trajectory: TrajectoryIn) -> dict:
    """The trajectory as the caller sent it (no defaults added), for the transcript and export."""
    return trajectory.model_dump(mode="json", exclude_unset=True)


def recent_reflections(bank: MemoryBank) -> list[str]:
    """The outcomes of the bank's last m live Orbs, newest first, which the reflector builds on."""
    live = Orb.objects.filter(bank=bank, status__in=[Orb.Status.PENDING, Orb.Status.APPROVED])
    return list(live.order_by("-created_at", "-pk").values_list("outcome", flat=True)[:RECENT_REFLECTIONS_M])


def orb_draft(*, trajectory: TrajectoryIn, recent: list[str] = (),
              style: str = ReflectionStyle.SIMPLE) -> OrbDraft:
    utterances = trajectory.user_utterances
    metadata = {key: value for key, value in trajectory.metadata.items() if key != RETRIEVAL_IDS_KEY}
    return OrbDraft(
        obs="\n".join(utterances),
        emotion=emotion_tag(text=utterances[-1]),
        outcome=reflection_write(trajectory=trajectory, recent=recent, style=style),
        context={"reward": trajectory.reward, "success": trajectory.success, **metadata},
    )


def _near_duplicate(bank: MemoryBank, vector: list[float]) -> tuple[Orb | None, float | None]:
    live = Orb.objects.filter(bank=bank, status__in=[Orb.Status.PENDING, Orb.Status.APPROVED])
    nearest = vectors_nearest(queryset=live, vector=vector, k=1)
    if nearest and nearest[0][1] >= bank.near_duplicate_threshold:
        return nearest[0]
    return None, None


def _auto_approval(bank: MemoryBank, draft: OrbDraft, duplicate: Orb | None) -> dict:
    """Status fields for a new Orb. Near-duplicates always wait for a reviewer's merge decision."""
    reward = draft.context["reward"]
    if duplicate is None and bank.approves_automatically(reward=reward, emotion=draft.emotion.value):
        note = f"auto-approved by the bank's policy ({bank.get_auto_approve_display()})"
        return {"status": Orb.Status.APPROVED, "reviewed_at": timezone.now(), "review_note": note}
    return {"status": Orb.Status.PENDING}


def _orb_create(*, bank, draft, trajectory, vector, duplicate, score, episode: EpisodeRecord) -> Orb:
    return Orb.objects.create(
        bank=bank, content_hash=draft.content_hash, obs=draft.obs, emotion=draft.emotion.value,
        outcome=draft.outcome.value, context=draft.context, customer_key=trajectory.customer_key,
        domain=trajectory.domain, source=episode.source, source_label=episode.source_label,
        episode_ref=episode.episode_ref, episode=episode, near_duplicate_of=duplicate, near_duplicate_score=score,
        vector=vector, embedding_model=bank.embedding_model, emotion_backend=draft.emotion.backend,
        reflector_backend=draft.outcome.backend, backend_error=draft.backend_error,
        **_auto_approval(bank, draft, duplicate),
    )


def _record_creation(orb: Orb) -> None:
    ReviewEvent.objects.create(orb=orb, action=ReviewEvent.Action.CREATED, after=orb_snapshot(orb))
    if orb.status == Orb.Status.APPROVED:
        ReviewEvent.objects.create(
            orb=orb, action=ReviewEvent.Action.AUTO_APPROVED, before={"status": Orb.Status.PENDING},
            after={"status": orb.status}, note=orb.review_note,
        )


def _ingest(*, bank: MemoryBank, trajectory: TrajectoryIn, episode: EpisodeRecord | None,
            style: str = ReflectionStyle.SIMPLE, **provenance) -> OrbIngestResult:
    """The work shared by the synchronous call and the Celery task; LLM and embedder run
    before the transaction so no lock is held while they think."""
    draft = orb_draft(trajectory=trajectory, recent=recent_reflections(bank), style=style)
    ref = episode.episode_ref if episode else provenance["episode_ref"]
    existing = Orb.objects.filter(bank=bank, content_hash=draft.content_hash).first()
    if existing is not None:
        return _finish(OrbIngestResult(existing, False, existing.near_duplicate_of), episode, trajectory, ref)
    vector = bank_embedder(bank).embed_one(draft.document)
    duplicate, score = _near_duplicate(bank, vector)
    try:
        with transaction.atomic():
            record = episode or EpisodeRecord.objects.create(bank=bank, trajectory=_stored(trajectory), **provenance)
            orb = _orb_create(bank=bank, draft=draft, trajectory=trajectory, vector=vector, duplicate=duplicate,
                              score=score, episode=record)
            _record_creation(orb)
            return _finish(OrbIngestResult(orb, True, duplicate), record, trajectory, ref)
    except IntegrityError:
        # Another worker stored the same Orb a moment ago: same id, nothing new.
        existing = Orb.objects.get(bank=bank, content_hash=draft.content_hash)
        return _finish(OrbIngestResult(existing, False, existing.near_duplicate_of), episode, trajectory, ref)


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
    """Store the episode and, with `queue`, queue its reflection (sent when the transaction commits)."""
    from orbs.tasks import reflect_episode

    with transaction.atomic():
        record = EpisodeRecord.objects.create(
            bank=bank, trajectory=_stored(trajectory), source=source, source_label=source_label,
            episode_ref=episode_ref, submitted_by=user,
        )
        if queue:
            reflect_episode.delay_on_commit(record.pk)
    return record


def _claim(ingest_id: int) -> bool:
    """Take the episode unless another worker holds a fresh claim or it is finished
    (a re-delivered task is harmless: the Orb's hash makes ingest idempotent)."""
    now = timezone.now()
    claimable = Q(status=EpisodeRecord.Status.QUEUED) | Q(
        status=EpisodeRecord.Status.RUNNING, started_at__lt=now - STALE_CLAIM_AFTER
    )
    return bool(
        EpisodeRecord.objects.filter(claimable, pk=ingest_id).update(
            status=EpisodeRecord.Status.RUNNING, started_at=now, attempts=F("attempts") + 1
        )
    )


def episode_reflect(*, ingest_id: int) -> EpisodeRecord:
    """Turn a stored episode into its Orb; a failure is recorded on the episode, never raised."""
    if _claim(ingest_id):
        record = EpisodeRecord.objects.select_related("bank").get(pk=ingest_id)
        try:
            _ingest(bank=record.bank, trajectory=trajectory_parse(record.trajectory), episode=record)
        except Exception as exc:  # recorded for the operator; one bad episode never stops the worker
            logger.exception("reflecting episode %s failed", ingest_id)
            EpisodeRecord.objects.filter(pk=ingest_id).update(
                status=EpisodeRecord.Status.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
            )
    return EpisodeRecord.objects.select_related("orb").get(pk=ingest_id)
