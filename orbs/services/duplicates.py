"""Near-duplicate groups in the review queue, and merging a group into the one Orb to keep.

A group is a connected set of a bank's pending Orbs whose vectors are at least the bank's
`near_duplicate_threshold` similar (cosine), pair by pair, as pgvector computes it. The pairs
come from one self-join over at most GROUPING_LIMIT pending Orbs (the oldest), so the work is
bounded whatever the backlog; Orbs beyond the limit are grouped once the older ones are decided.
Only vectors of the bank's own model are compared, and in a per-customer bank only one customer's.
"""
from dataclasses import dataclass

from django.db import connection, transaction

from orbs.errors import OrbsError
from orbs.models import MemoryBank, Orb
from orbs.services.identity import orb_current
from orbs.services.ingest import live_orbs
from orbs.services.review import orb_conflict, orb_edit, orb_merge
from orbs.services.search import vectors_nearest

GROUPING_LIMIT = 500
BANKS_LIMIT = 20  # banks grouped for one queue page
MERGE_NOTE = "merged as a near-duplicate"

_PAIRS_SQL = f"""
WITH pending AS (
    SELECT id, vector, customer_key FROM {Orb._meta.db_table}
    WHERE bank_id = %(bank)s AND status = %(pending)s AND embedding_model = %(model)s
    ORDER BY created_at, id LIMIT %(limit)s
)
SELECT a.id, b.id, 1 - (a.vector <=> b.vector) AS similarity
FROM pending a JOIN pending b ON a.id < b.id AND (NOT %(per_customer)s OR a.customer_key = b.customer_key)
WHERE 1 - (a.vector <=> b.vector) >= %(threshold)s
"""


@dataclass(frozen=True)
class DuplicateGroup:
    orbs: list[Orb]  # oldest first
    similarity: float  # the lowest similarity among the pairs that joined the group

    @property
    def key_id(self) -> int:
        """The stable id that names the group in its page's address (its oldest Orb's)."""
        return self.orbs[0].lineage_id


def _similar_pairs(bank: MemoryBank) -> list[tuple[int, int, float]]:
    params = {"bank": bank.pk, "pending": Orb.Status.PENDING, "model": bank.embedding_model,
              "limit": GROUPING_LIMIT, "per_customer": bank.is_per_customer,
              "threshold": bank.near_duplicate_threshold}
    with connection.cursor() as cursor:
        cursor.execute(_PAIRS_SQL, params)
        return cursor.fetchall()


def _components(pairs: list[tuple[int, int, float]]) -> list[tuple[set[int], float]]:
    """The connected sets of ids the pairs join (union-find), each with its weakest link."""
    parent: dict[int, int] = {}

    def root(node: int) -> int:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for first, second, _ in pairs:
        parent[root(first)] = root(second)
    members: dict[int, set[int]] = {}
    for node in list(parent):
        members.setdefault(root(node), set()).add(node)
    weakest: dict[int, float] = {}
    for first, _, similarity in pairs:
        group = root(first)
        weakest[group] = min(weakest.get(group, 1.0), similarity)
    return [(ids, weakest[group]) for group, ids in members.items()]


def duplicate_groups(*, bank: MemoryBank) -> list[DuplicateGroup]:
    """The bank's groups of pending near-duplicates, largest first."""
    components = _components(_similar_pairs(bank))
    orbs = Orb.objects.select_related("bank").defer("vector").in_bulk(
        [orb_id for ids, _ in components for orb_id in ids])
    groups = [DuplicateGroup(orbs=sorted((orbs[i] for i in ids), key=lambda orb: (orb.created_at, orb.pk)),
                             similarity=weakest) for ids, weakest in components]
    return sorted(groups, key=lambda group: (-len(group.orbs), group.key_id))


def duplicate_groups_in_banks(*, banks) -> list[DuplicateGroup]:
    """The groups of the first BANKS_LIMIT of `banks` (a queryset) that hold pending Orbs."""
    with_pending = banks.filter(orbs__status=Orb.Status.PENDING).distinct().order_by("name")[:BANKS_LIMIT]
    return [group for bank in with_pending for group in duplicate_groups(bank=bank)]


def duplicate_group_of(*, orb: Orb) -> DuplicateGroup | None:
    """The group `orb` (a current revision) belongs to, or None when it is in none."""
    return next((group for group in duplicate_groups(bank=orb.bank)
                 if any(member.pk == orb.pk for member in group.orbs)), None)


def duplicates_merge(*, keep: tuple[int, int], others: list[tuple[int, int]], actor, note: str = "",
                     outcome: str | None = None) -> Orb:
    """Keep one Orb of a group and fold the others into it, all or nothing.

    `keep` and each of `others` are (Orb id, version the reviewer saw). With `outcome`, the kept
    Orb's lesson is first edited (a new revision; the old one stays in its history). Each other Orb
    is superseded, naming the kept one as merged-into, with the note; its review events and
    revisions stay readable. Returns the kept Orb's current revision."""
    keep_id, keep_version = keep
    if not others:
        raise OrbsError("others: choose at least one Orb to merge into the one kept")
    if keep_id in {orb_id for orb_id, _ in others}:
        raise OrbsError(f"keep: Orb #{keep_id} cannot be merged into itself")
    note = note.strip() or MERGE_NOTE
    with transaction.atomic():
        kept = orb_current(orb_id=keep_id)
        if kept.version != keep_version:
            raise orb_conflict(kept, keep_version)
        if outcome is not None and outcome.strip() and outcome.strip() != kept.outcome:
            kept = orb_edit(orb_id=keep_id, expected_version=keep_version, actor=actor, outcome=outcome,
                            note=note, approve=False)
        for orb_id, version in others:
            orb_merge(orb_id=orb_id, expected_version=version, into_id=kept.lineage_id, actor=actor, note=note)
        return orb_current(orb_id=keep_id)


MERGE_CANDIDATES = 5


def merge_candidates(*, orb: Orb, limit: int = MERGE_CANDIDATES) -> list[tuple[Orb, float]]:
    """The Orbs `orb` may be merged into, nearest first with their cosine similarity: the live Orbs
    of its bank (its customer's, in a per-customer bank) whose vectors share its model."""
    live = live_orbs(orb.bank, orb.customer_key).exclude(lineage_id=orb.lineage_id)
    queryset = live.filter(embedding_model=orb.embedding_model).select_related("bank")
    return vectors_nearest(queryset=queryset, vector=[float(value) for value in orb.vector], k=limit)
