"""Many finished episodes into Orbs at once (an evaluation trial's end): the Orbs, audit rows,
episode records and idempotency of `orb_from_episode` called for each in order, with one
embedding call for all of them, their near-duplicate searches in one transaction and the
rows written with bulk inserts in one more.

What calling one at a time would show the later episodes is kept: each reflection sees the
bank's latest outcomes including those of the batch's earlier new Orbs, and each near-duplicate
check compares with the bank's live Orbs and with the batch's earlier new Orbs (exactly, in
memory, since they are not stored yet). A batch whose insert meets an Orb another writer stored
meanwhile is written one episode at a time instead, which the Orb's hash makes idempotent.
"""
from dataclasses import dataclass, field

import numpy as np
from django.db import IntegrityError, transaction
from django.utils import timezone

from orbs.backends.reflector import RECENT_REFLECTIONS_M, ReflectionStyle
from orbs.models import EpisodeRecord, MemoryBank, Orb, ReviewEvent, Source, orb_ids_draw
from orbs.schemas import TrajectoryIn
from orbs.services.announce import episode_ingested_announce, orb_created_announce
from orbs.services.banks import bank_embedder, bank_resolve
from orbs.services.history import ORB_REVISION, REVIEW_EVENT, history_append
from orbs.services.ingest import (
    RETRIEVAL_IDS_KEY,
    OrbDraft,
    OrbIngestResult,
    auto_approval_fields,
    customer_key_check,
    draft_hash,
    episode_orb_fields,
    live_orbs,
    orb_draft,
    orb_from_episode,
    recent_reflections,
    stored_orb_result,
    trajectory_parse,
    trajectory_stored,
)
from orbs.services.retrieval import retrieval_outcome_record
from orbs.services.review import orb_snapshot
from orbs.services.search import vectors_nearest


@dataclass(frozen=True)
class EpisodeToRemember:
    trajectory: dict | TrajectoryIn
    episode_ref: str = ""


@dataclass
class _Item:
    """One episode on its way: its draft and hash, then (when new) its vector and nearest live Orb."""
    trajectory: TrajectoryIn
    episode_ref: str
    draft: OrbDraft
    content_hash: str
    earlier: int | None = None  # the batch position of an earlier new Orb with the same hash
    orb: Orb | None = None  # the stored Orb: found by its hash, or inserted by this batch
    is_new: bool = False  # this batch creates the Orb
    vector: list[float] = field(default_factory=list)
    duplicate: Orb | None = None
    duplicate_position: int | None = None  # a near-duplicate among the batch's earlier new Orbs (in `new`)
    score: float | None = None


def orbs_from_episodes(*, bank: MemoryBank | str, episodes: list[EpisodeToRemember], source_label: str = "",
                       source: str = Source.EPISODE,
                       reflection_style: str = ReflectionStyle.SIMPLE) -> list[OrbIngestResult]:
    """`orb_from_episode` for each episode, in order, as one batch; one result per episode.
    Raises InvalidTrajectory or FieldRequired for the first bad episode before anything is stored."""
    bank = bank_resolve(bank)
    parsed = [(trajectory_parse(episode.trajectory), episode.episode_ref) for episode in episodes]
    for trajectory, _ in parsed:
        customer_key_check(bank, trajectory.customer_key, field="trajectory.customer_key")
    items = _drafted(bank, parsed, reflection_style)
    new = [item for item in items if item.is_new]
    if new:
        _embed(bank, new)
        _near_duplicates(bank, new)
        try:
            _insert(bank, items, source=source, source_label=source_label)
        except IntegrityError:
            # Another writer stored one of these Orbs a moment ago: one at a time, each idempotent.
            return [orb_from_episode(bank=bank, trajectory=trajectory, source_label=source_label, episode_ref=ref,
                                     source=source, reflection_style=reflection_style) for trajectory, ref in parsed]
    return _results(items)


def _same_reader(bank: MemoryBank, trajectory: TrajectoryIn) -> str:
    """Whose latest reflections and live Orbs an episode is compared with: in a per-customer bank
    the customer's own, else the whole bank's."""
    return trajectory.customer_key if bank.is_per_customer else ""


def _drafted(bank: MemoryBank, parsed: list[tuple[TrajectoryIn, str]], style: str) -> list[_Item]:
    """Reflections in order; each sees the latest outcomes as the one-at-a-time path would, the
    batch's earlier new Orbs being the newest."""
    recent: dict[str, list[str]] = {}
    first_of_hash: dict[str, int] = {}
    items = []
    for position, (trajectory, ref) in enumerate(parsed):
        reader = _same_reader(bank, trajectory)
        if reader not in recent:
            recent[reader] = recent_reflections(bank, trajectory.customer_key)
        draft = orb_draft(trajectory=trajectory, recent=recent[reader], style=style)
        item = _Item(trajectory, ref, draft, draft_hash(bank, draft, trajectory))
        item.earlier = first_of_hash.get(item.content_hash)
        if item.earlier is None:
            stored = stored_orb_result(bank, item.content_hash)
            item.orb = stored.orb if stored else None
            item.is_new = stored is None
        if item.is_new:
            first_of_hash[item.content_hash] = position
            recent[reader] = [draft.outcome.value, *recent[reader]][:RECENT_REFLECTIONS_M]
        items.append(item)
    return items


def _embed(bank: MemoryBank, new: list[_Item]) -> None:
    vectors = bank_embedder(bank).embed([item.draft.document for item in new])
    for item, vector in zip(new, vectors):
        item.vector = vector.tolist()


def _near_duplicates(bank: MemoryBank, new: list[_Item]) -> None:
    """Each new Orb's closest live Orb at the bank's threshold: the stored ones through the index
    (all searches in one transaction), the batch's earlier new ones exactly. A stored Orb wins a tie,
    as its lower id would in one search."""
    with transaction.atomic():
        for item in new:
            nearest = vectors_nearest(queryset=live_orbs(bank, item.trajectory.customer_key), vector=item.vector, k=1)
            if nearest:
                item.duplicate, item.score = nearest[0]
    vectors = np.asarray([item.vector for item in new], dtype=np.float32)
    for position, item in enumerate(new):
        earlier = [i for i in range(position)
                   if _same_reader(bank, new[i].trajectory) == _same_reader(bank, item.trajectory)]
        if earlier:
            scores = vectors[earlier] @ vectors[position]
            best = int(np.argmax(scores))
            if item.score is None or float(scores[best]) > item.score:
                item.duplicate, item.duplicate_position, item.score = None, earlier[best], float(scores[best])
        if item.score is not None and item.score < bank.near_duplicate_threshold:
            item.duplicate, item.duplicate_position, item.score = None, None, None


def _insert(bank: MemoryBank, items: list[_Item], *, source: str, source_label: str) -> None:
    """Episode records, Orbs and their audit rows in bulk, in one transaction; then how each
    episode's retrievals ended, as the one-at-a-time path records them."""
    new = [item for item in items if item.is_new]
    now = timezone.now()
    with transaction.atomic():
        records = EpisodeRecord.objects.bulk_create([
            EpisodeRecord(bank=bank, trajectory=trajectory_stored(item.trajectory), source=source, source_label=source_label,
                          episode_ref=item.episode_ref, status=EpisodeRecord.Status.DONE, created_orb=True,
                          started_at=now, finished_at=now) for item in new])
        orbs = Orb.objects.bulk_create(_orbs(bank, new, records))
        for item, orb in zip(new, orbs):
            item.orb = orb
        _link_batch_duplicates(new)
        for record, orb in zip(records, orbs):
            record.orb = orb
        EpisodeRecord.objects.bulk_update(records, ["orb"])
        events = [_creation_events(orb) for orb in orbs]
        ReviewEvent.objects.bulk_create([event for made in events for event in made])
        history_append(bank_id=bank.pk, rows=[row for orb, made in zip(orbs, events)
                                              for row in [(ORB_REVISION, orb.pk), *((REVIEW_EVENT, e.pk) for e in made)]])
        for record, orb in zip(records, orbs):  # webhooks, as the one-at-a-time path announces them
            orb_created_announce(orb)
            episode_ingested_announce(record, orb, created=True)
    for item in items:
        _outcomes_record(item)


def _orbs(bank: MemoryBank, new: list[_Item], records: list[EpisodeRecord]) -> list[Orb]:
    """The new Orbs, unsaved, each the first revision of its own lineage (bulk_create skips
    Orb.save, which would draw the id). A near-duplicate within the batch holds the review gate shut
    as a stored one does; its link is set once both are stored."""
    orbs: list[Orb] = []
    for item, record, orb_id in zip(new, records, orb_ids_draw(len(new))):
        fields = episode_orb_fields(content_hash=item.content_hash, draft=item.draft, trajectory=item.trajectory,
                                     episode=record)
        duplicate = orbs[item.duplicate_position] if item.duplicate_position is not None else item.duplicate
        orbs.append(Orb(pk=orb_id, lineage_id=orb_id, revision=1, bank=bank, **fields,
                        near_duplicate_of=item.duplicate, near_duplicate_score=item.score,
                        vector=item.vector, embedding_model=bank.embedding_model,
                        **auto_approval_fields(bank, reward=item.draft.context["reward"], emotion=fields["emotion"],
                                         duplicate=duplicate)))
    return orbs


def _link_batch_duplicates(new: list[_Item]) -> None:
    linked = []
    for item in new:
        if item.duplicate_position is not None:
            item.duplicate = item.orb.near_duplicate_of = new[item.duplicate_position].orb
            linked.append(item.orb)
    if linked:
        Orb.objects.bulk_update(linked, ["near_duplicate_of"])


def _creation_events(orb: Orb) -> list[ReviewEvent]:
    """The rows `_record_creation` writes for a new Orb, unsaved."""
    events = [ReviewEvent(orb=orb, action=ReviewEvent.Action.CREATED, after=orb_snapshot(orb), actor_name="")]
    if orb.status == Orb.Status.APPROVED:
        events.append(ReviewEvent(orb=orb, action=ReviewEvent.Action.AUTO_APPROVED,
                                  before={"status": Orb.Status.PENDING}, after={"status": orb.status},
                                  note=orb.review_note))
    return events


def _outcomes_record(item: _Item) -> None:
    """Outcomes nobody recorded of the retrievals the episode used (orbs.services.ingest._finish)."""
    retrieval_ids = item.trajectory.metadata.get(RETRIEVAL_IDS_KEY) or []
    if isinstance(retrieval_ids, list):
        retrieval_outcome_record(retrieval_ids=[i for i in retrieval_ids if isinstance(i, int)],
                                 success=item.trajectory.success, reward=item.trajectory.reward,
                                 episode_ref=item.episode_ref, unrecorded_only=True)


def _results(items: list[_Item]) -> list[OrbIngestResult]:
    """As the one-at-a-time path answers: a new Orb with its near-duplicate, else the stored Orb."""
    results = []
    for item in items:
        orb = items[item.earlier].orb if item.earlier is not None else item.orb
        results.append(OrbIngestResult(orb, item.is_new, item.duplicate if item.is_new else orb.near_duplicate_of))
    return results
