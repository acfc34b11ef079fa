"""Nearest rows by cosine similarity on pgvector's HNSW index: the one nearest-neighbour search of
memweb's memories (Orbs, DMRM experiences).

Queries are `ORDER BY vector <=> q LIMIT k` so the planner can walk the
index. Filters (bank, status, domain, customer) would make a plain HNSW
scan return fewer than k rows when the index's first candidates are
filtered out, so pgvector 0.8's iterative scan keeps walking until k rows
pass (`relaxed_order`: rows come back nearly sorted; we re-sort the k rows).

The vector column holds vectors of every supported dimension, indexed per dimension
(memweb/vectors.py); the query vector's dimension picks the rows and the index.
"""
from django.db import connection, transaction
from django.db.models import Model, QuerySet
from pgvector.django import CosineDistance

from memweb.embeddings import SUPPORTED_DIMENSIONS, VectorDimensionError
from memweb.vectors import vector_as
from orbs.models import HNSW_EF_SEARCH


def _tune_index_scan() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(f"SET LOCAL hnsw.ef_search = {int(HNSW_EF_SEARCH)}")


def vectors_nearest_query(*, queryset: QuerySet, vector: list[float], k: int) -> QuerySet:
    """The k rows of `queryset` nearest to `vector`, as the query that walks the HNSW index of its dimension."""
    dimension = len(vector)
    if dimension not in SUPPORTED_DIMENSIONS:
        raise VectorDimensionError(f"vector has {dimension} dimensions; stored vectors have "
                                   f"{' or '.join(map(str, SUPPORTED_DIMENSIONS))}")
    distance = CosineDistance(vector_as(dimension), vector)
    return queryset.filter(vector__dims=dimension).defer("vector").annotate(distance=distance).order_by("distance")[:k]


def vectors_nearest(*, queryset: QuerySet, vector: list[float], k: int) -> list[tuple[Model, float]]:
    """(row, cosine similarity) for the k rows of `queryset` (a model with a `vector` column) nearest
    to `vector`, best first, ties by primary key. Only rows of the query vector's dimension are compared."""
    query = vectors_nearest_query(queryset=queryset, vector=vector, k=k)
    with transaction.atomic():
        _tune_index_scan()
        rows = list(query)
    rows.sort(key=lambda row: (row.distance, row.pk))
    return [(row, 1.0 - row.distance) for row in rows]
