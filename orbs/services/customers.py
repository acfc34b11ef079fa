"""One customer's timeline: everything memweb holds on them across a workspace's banks, newest first.

What belongs to a customer is decided by erasure's `customer_rows` (orbs.services.erasure), so the
timeline shows exactly what an erasure of the customer would remove, and the counts at its top are
the ones the erasure's audit record will hold.
"""
from dataclasses import dataclass

from django.db.models import CharField, F, QuerySet, Value

from orbs.models import MemoryBank
from orbs.services.erasure import customer_rows, customer_rows_counts

# The kinds of rows a timeline lists, in the order its counts are shown, with their names for people.
KINDS = {
    "orbs": "Orbs (every revision and status)",
    "episodes": "stored episodes",
    "retrievals": "retrievals they asked for",
    "dialogues": "raw dialogues",
    "experiences": "DMRM experiences",
    "experience_trajectories": "DMRM trajectories",
    "dmrm_retrievals": "DMRM retrievals",
}


@dataclass(frozen=True)
class CustomerTimeline:
    counts: dict[str, int]  # rows per kind, KINDS' order
    rows: QuerySet  # (kind, pk, created_at) of every row, newest first

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def labelled_counts(self) -> list[tuple[str, str, int]]:
        return [(kind, KINDS[kind], n) for kind, n in self.counts.items()]


def customer_timeline(*, workspace, customer_key: str) -> CustomerTimeline:
    """The rows of `customer_key` in every bank of `workspace` (archived ones included)."""
    found = customer_rows(banks=MemoryBank.objects.of(workspace), customer_key=customer_key)
    stamped = [getattr(found, kind).order_by().annotate(kind=Value(kind, output_field=CharField()),
                                                        at=F("created_at")).values_list("kind", "pk", "at")
               for kind in KINDS]
    rows = stamped[0].union(*stamped[1:], all=True).order_by("-at", "kind", "-pk")
    return CustomerTimeline(counts=customer_rows_counts(found), rows=rows)


def timeline_objects(*, workspace, customer_key: str, entries) -> list[tuple[str, object]]:
    """The rows of one page of a timeline (`entries`: its (kind, pk, created_at)), loaded with their banks,
    in the page's order."""
    found = customer_rows(banks=MemoryBank.objects.of(workspace), customer_key=customer_key)
    wanted: dict[str, list[int]] = {}
    for kind, pk, _at in entries:
        wanted.setdefault(kind, []).append(pk)
    loaded = {kind: getattr(found, kind).select_related("bank").defer(*_heavy(kind)).in_bulk(pks)
              for kind, pks in wanted.items()}
    return [(kind, loaded[kind][pk]) for kind, pk, _at in entries if pk in loaded[kind]]


def _heavy(kind: str) -> tuple[str, ...]:
    """Columns a timeline never shows (vectors), left unread."""
    return ("vector",) if kind in ("orbs", "dialogues", "experiences") else ()
