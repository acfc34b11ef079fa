"""Storing vectors of any supported embedding model (the recipe every memory model follows).

pgvector can index only vectors of one fixed dimension, while a bank's model fixes the dimension of
its rows (all-MiniLM-L6-v2: 384, bge-m3: 1024). So a memory model keeps one untyped `vector` column
and, per supported dimension, a partial HNSW index over the column cast to that dimension, restricted
to the rows of that dimension (pgvector's documented way to mix dimensions in one column). A search
filters on the dimension and orders by the same cast expression, so the planner walks that index.

The index stores the vectors as `halfvec` (16-bit floats): half the pages of a full-precision index,
so a search reads half as much, for the same recall at 1M rows (docs/PERFORMANCE.md, issue 17). The
column keeps full precision; scores are computed from it, and an exact scan orders by it.

A model with vectors (say `Memory`, with `vector` and `embedding_model` columns) declares:
    vector = VectorField()
    class Meta:
        constraints = [vector_model_constraint("memory")]
        indexes = [*vector_hnsw_indexes("memory", m=16, ef_construction=64)]
and searches with orbs.services.search.vectors_nearest.
"""
from django.contrib.postgres.indexes import OpClass
from django.db.models import CheckConstraint, IntegerField, Q, Transform
from django.db.models.functions import Cast
from pgvector.django import HalfVectorField, HnswIndex, VectorField

from memweb.embeddings import DIMENSIONS, SUPPORTED_DIMENSIONS


@VectorField.register_lookup
class VectorDims(Transform):
    """`vector__dims`: pgvector's vector_dims(), the number of dimensions of a stored vector."""

    lookup_name = "dims"
    function = "vector_dims"
    # Typed, because a parameter (a model's unsaved value, in validate_constraints) would be ambiguous
    # between pgvector's vector and halfvec overloads.
    template = "%(function)s(%(expressions)s::vector)"
    output_field = IntegerField()


def vector_as(dimension: int, column: str = "vector") -> Cast:
    """The column cast to a fixed dimension, at full precision: what scores and exact scans use."""
    return Cast(column, VectorField(dimensions=dimension))


def vector_half_as(dimension: int, column: str = "vector") -> Cast:
    """The column cast to a fixed dimension in half precision: the expression the index of that
    dimension is built on, so a query ordering by it walks that index."""
    return Cast(column, HalfVectorField(dimensions=dimension))


def vector_hnsw_indexes(prefix: str, *, m: int, ef_construction: int, column: str = "vector") -> list[HnswIndex]:
    """One cosine HNSW index of half-precision vectors per supported dimension, each over the rows
    of its dimension only."""
    return [
        HnswIndex(OpClass(vector_half_as(dimension, column), name="halfvec_cosine_ops"),
                  name=f"{prefix}_{column}_half{dimension}", condition=Q(**{f"{column}__dims": dimension}),
                  m=m, ef_construction=ef_construction)
        for dimension in SUPPORTED_DIMENSIONS
    ]


def vector_model_constraint(prefix: str, *, column: str = "vector", model_column: str = "embedding_model"):
    """Every row's vector has the dimension of the model named beside it (and the model is a supported one)."""
    matches = Q()
    for name, dimension in DIMENSIONS.items():
        matches |= Q(**{model_column: name, f"{column}__dims": dimension})
    return CheckConstraint(condition=matches, name=f"{prefix}_{column}_fits_model",
                           violation_error_message="the vector's dimension is not the one its embedding model gives")
