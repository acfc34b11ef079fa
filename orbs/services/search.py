"""Nearest Orbs by cosine similarity on pgvector's HNSW index.

Queries are `ORDER BY vector <=> q LIMIT k` so the planner can walk the
index. Filters (bank, status, domain, customer) would make a plain HNSW
scan return fewer than k rows when the index's first candidates are
filtered out, so pgvector 0.8's iterative scan keeps walking until k rows
pass (`relaxed_order`: rows come back nearly sorted; we re-sort the k rows).
"""
from django.db import connection, transaction
from pgvector.django import CosineDistance

from orbs.models import HNSW_EF_SEARCH, Orb


def _tune_index_scan() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(f"SET LOCAL hnsw.ef_search = {int(HNSW_EF_SEARCH)}")


def orbs_nearest(*, queryset, vector: list[float], k: int) -> list[tuple[Orb, float]]:
    """(orb, cosine similarity) for the k Orbs of `queryset` nearest to `vector`, best first."""
    with transaction.atomic():
        _tune_index_scan()
        rows = list(
            queryset.defer("vector").annotate(distance=CosineDistance("vector", vector)).order_by("distance")[:k]
        )
    rows.sort(key=lambda orb: (orb.distance, orb.pk))
    return [(orb, 1.0 - orb.distance) for orb in rows]
