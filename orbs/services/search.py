"""Nearest rows by cosine similarity: the one nearest-neighbour search of memweb's memories (Orbs,
DMRM experiences, dialogue units).

Two ways to answer, chosen by how many rows the filters (bank, status, domain, customer) leave,
counted first with a capped count (it stops at the cap, so it reads at most EXACT_SCAN_MAX_ROWS
rows through the filters' own indexes):

- none: nothing to search, answered without touching the vectors;
- at most EXACT_SCAN_MAX_ROWS: an exact scan, every filtered row compared at full precision and
  the k best kept. This is what bounds the worst case: an HNSW scan under a filter that matches
  almost nothing would walk the graph looking for rows that are not there;
- more: `ORDER BY <half-precision vector> <=> q LIMIT k`, which the planner answers from the HNSW
  index (memweb/vectors.py). Filters would make a plain HNSW scan return fewer than k rows when
  the index's first candidates are filtered out, so pgvector 0.8's iterative scan keeps walking
  until k rows pass (`relaxed_order`: rows come back nearly sorted; we re-sort them by their
  full-precision distance), up to HNSW_MAX_SCAN_TUPLES tuples. Should it stop there with fewer
  than k rows (the filtered rows all far from the query), the exact scan answers instead.

The decision rests on a count, not on the planner's row estimate, which can be off by orders of
magnitude for a customer or a small bank inside a table of millions.

The vector column holds vectors of every supported dimension, indexed per dimension; the query
vector's dimension picks the rows and the index.
"""
import time

from django.db import connection, transaction
from django.db.models import Model, QuerySet
from pgvector import HalfVector
from pgvector.django import CosineDistance

from memweb.embeddings import SUPPORTED_DIMENSIONS, Embedder, VectorDimensionError, query_embed
from memweb.vectors import vector_as, vector_half_as
from orbs.models import HNSW_EF_SEARCH

# Comparing 2,000 rows exactly takes a few milliseconds; at 1M rows a filter this selective
# would make the iterative index scan visit hundreds of times as many tuples (docs/PERFORMANCE.md).
EXACT_SCAN_MAX_ROWS = 2000
# pgvector's default is 20,000. The filtered set is larger than EXACT_SCAN_MAX_ROWS here, so k
# rows pass within a few thousand tuples unless they all lie far from the query; past the cap
# the exact scan is the cheaper answer.
HNSW_MAX_SCAN_TUPLES = 10_000


def _checked_dimension(vector: list[float]) -> int:
    dimension = len(vector)
    if dimension not in SUPPORTED_DIMENSIONS:
        raise VectorDimensionError(f"vector has {dimension} dimensions; stored vectors have "
                                   f"{' or '.join(map(str, SUPPORTED_DIMENSIONS))}")
    return dimension


def _tune_index_scan() -> None:
    """The transaction's HNSW settings, in one round trip (set_config(..., true) is SET LOCAL)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                       "set_config('hnsw.ef_search', %s, true), set_config('hnsw.max_scan_tuples', %s, true)",
                       [str(int(HNSW_EF_SEARCH)), str(int(HNSW_MAX_SCAN_TUPLES))])


def _with_distance(queryset: QuerySet, vector: list[float]) -> QuerySet:
    """The rows of the query vector's dimension, each with its full-precision cosine distance."""
    dimension = len(vector)
    return (queryset.filter(vector__dims=dimension).defer("vector")
            .annotate(distance=CosineDistance(vector_as(dimension), vector)))


def vectors_nearest_query(*, queryset: QuerySet, vector: list[float], k: int) -> QuerySet:
    """The k rows of `queryset` nearest to `vector`, as the query that walks the HNSW index of its dimension."""
    dimension = _checked_dimension(vector)
    index_distance = CosineDistance(vector_half_as(dimension), HalfVector(vector))
    return _with_distance(queryset, vector).order_by(index_distance)[:k]


def vectors_exact_query(*, queryset: QuerySet, vector: list[float], k: int) -> QuerySet:
    """The k rows of `queryset` nearest to `vector`, compared exactly: ordered by the full-precision
    distance, which no index is built on, so the planner reads the filtered rows and sorts them."""
    _checked_dimension(vector)
    return _with_distance(queryset, vector).order_by("distance", "pk")[:k]


def filtered_rows_at_most(queryset: QuerySet, cap: int) -> int:
    """How many rows `queryset` has, counting no further than `cap + 1`."""
    return queryset.order_by().values("pk")[:cap + 1].count()


def _index_rows(queryset: QuerySet, vector: list[float], k: int) -> list[Model]:
    query = vectors_nearest_query(queryset=queryset, vector=vector, k=k)
    with transaction.atomic():
        _tune_index_scan()
        return list(query)


def vectors_nearest(*, queryset: QuerySet, vector: list[float], k: int) -> list[tuple[Model, float]]:
    """(row, cosine similarity) for the k rows of `queryset` (a model with a `vector` column) nearest
    to `vector`, best first, ties by primary key. Only rows of the query vector's dimension are compared."""
    _checked_dimension(vector)
    filtered = filtered_rows_at_most(queryset, EXACT_SCAN_MAX_ROWS)
    if filtered == 0:
        return []
    rows = [] if filtered <= EXACT_SCAN_MAX_ROWS else _index_rows(queryset, vector, k)
    if len(rows) < min(k, filtered):
        rows = list(vectors_exact_query(queryset=queryset, vector=vector, k=k))
    rows.sort(key=lambda row: (row.distance, row.pk))
    return [(row, 1.0 - row.distance) for row in rows]


def text_nearest(*, queryset: QuerySet, model: Embedder, text: str,
                 k: int) -> tuple[list[tuple[Model, float]], float, float]:
    """vectors_nearest for a text: (row, similarity) pairs, the milliseconds spent embedding the text
    and those spent searching. When the filters leave no row the text is not embedded at all: a run's
    first trial retrieves from an empty bank before every decision, each time a forward pass of the model."""
    if not queryset.exists():
        return [], 0.0, 0.0
    start = time.perf_counter()
    vector = query_embed(model, text)
    embedded = time.perf_counter()
    nearest = vectors_nearest(queryset=queryset, vector=vector, k=k)
    return nearest, (embedded - start) * 1000, (time.perf_counter() - embedded) * 1000
