"""The nearest-neighbour search's three answers: nothing to search, an exact scan over a small
filtered set, the HNSW index over a large one; the exact and the index answers agree."""
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memweb.embeddings import embedder
from orbs.models import Orb
from orbs.services import orbs_retrievable, search
from orbs.services.search import vectors_exact_query, vectors_nearest, vectors_nearest_query

SITUATIONS = [
    "My new washing machine leaks water all over the kitchen floor.",
    "The dishwasher leaves a puddle of water under the door.",
    "I want to exchange the jeans I bought for a larger size.",
    "Can you apply my discount code to the order for the coffee maker?",
    "The winter jacket I ordered has not been shipped yet.",
    "How do I cancel my subscription to the newsletter?",
    "The fridge makes a loud humming noise at night.",
    "I was charged twice for the same pair of boots.",
]


def _searches(queries) -> list[str]:
    """The SQL of the statements that compared vectors (`<=>`), in order."""
    return [query["sql"] for query in queries if "<=>" in query["sql"]]


def _index_plan(queryset) -> tuple[str, list[int]]:
    """The plan of the index query with sorting forbidden, and the ids it answers."""
    sql, params = queryset.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        # A tiny table would rather be scanned and sorted; forbid that so the index answers.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        # The test database's index also holds dead entries of earlier tests' rolled-back Orbs: scan
        # on until k live rows are found, as the service's own index search does.
        cursor.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        cursor.execute("SET LOCAL hnsw.ef_search = 1000")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(sql, params)
        ids = [row[0] for row in cursor.fetchall()]
    return plan, ids


def test_a_small_filtered_set_is_scanned_exactly_with_the_index_paths_top_k(bank, make_orb):
    orbs = [make_orb(text) for text in SITUATIONS]
    vector = embedder().embed_one("water is leaking out of the washer")
    queryset = orbs_retrievable(bank=bank, approved_only=True)

    with CaptureQueriesContext(connection) as queries:
        exact = vectors_nearest(queryset=queryset, vector=vector, k=5)
    [statement] = _searches(queries)
    assert "::halfvec" not in statement  # ordered by the full-precision distance: no index is built on it
    assert [orb for orb, _ in exact][:2] == orbs[:2]

    plan, index_ids = _index_plan(vectors_nearest_query(queryset=queryset, vector=vector, k=5))
    assert "orb_vector_half384" in plan
    assert index_ids == [orb.pk for orb, _ in exact]


def test_a_large_filtered_set_is_searched_on_the_index(bank, make_orb, monkeypatch):
    for text in SITUATIONS:
        make_orb(text)
    vector = embedder().embed_one("my boots were billed two times")
    queryset = orbs_retrievable(bank=bank, approved_only=True)
    expected = list(vectors_exact_query(queryset=queryset, vector=vector, k=3))
    monkeypatch.setattr(search, "EXACT_SCAN_MAX_ROWS", 4)  # the bank's 8 Orbs count as a large set

    with CaptureQueriesContext(connection) as queries:
        found = vectors_nearest(queryset=queryset, vector=vector, k=3)
    [statement] = _searches(queries)
    assert "::halfvec" in statement and "hnsw.max_scan_tuples" in " ".join(q["sql"] for q in queries)
    assert [orb.pk for orb, _ in found] == [orb.pk for orb in expected]
    assert [round(score, 6) for _, score in found] == [round(1 - orb.distance, 6) for orb in expected]


def test_an_index_search_that_stops_short_of_k_is_answered_exactly(bank, make_orb, monkeypatch):
    for text in SITUATIONS[:4]:
        make_orb(text)
    vector = embedder().embed_one("the jeans are too small")
    queryset = orbs_retrievable(bank=bank, approved_only=True)
    monkeypatch.setattr(search, "EXACT_SCAN_MAX_ROWS", 1)
    monkeypatch.setattr(search, "_index_rows", lambda *args: [])  # as when hnsw.max_scan_tuples runs out

    found = vectors_nearest(queryset=queryset, vector=vector, k=3)
    assert [orb.pk for orb, _ in found] == [orb.pk for orb in vectors_exact_query(queryset=queryset,
                                                                                   vector=vector, k=3)]
    assert len(found) == 3


def test_a_filter_that_matches_nothing_is_answered_without_comparing_vectors(bank, make_orb):
    make_orb(SITUATIONS[0])
    vector = embedder().embed_one("washer leaks")
    queryset = orbs_retrievable(bank=bank, approved_only=True, customer_key="nobody-has-this-key")

    with CaptureQueriesContext(connection) as queries:
        assert vectors_nearest(queryset=queryset, vector=vector, k=5) == []
    assert _searches(queries) == [] and len(queries) == 1


def test_a_pending_orb_is_not_counted_into_an_approved_only_search(bank, make_orb):
    make_orb(SITUATIONS[0], approve=False)
    vector = embedder().embed_one("washer leaks")
    assert vectors_nearest(queryset=orbs_retrievable(bank=bank, approved_only=True), vector=vector, k=5) == []
    assert Orb.objects.filter(bank=bank).count() == 1
