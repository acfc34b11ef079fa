"""The review queue's text search reads indexes, not every Orb: at 1M Orbs a scan of the obs and
outcome columns took seconds (docs/PERFORMANCE.md). The plans are read with whole-table reads made
dear (sequential scans, and index scans that walk an unrelated index end to end), as a large table
would have the planner find them on its own: only an index that answers the search can then win."""
from django.db import connection, transaction

from orbs.services.queue import OrbFilters, orbs_filtered


def _plan(queryset) -> str:
    sql, params = queryset.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_words_are_found_through_the_trigram_indexes_of_obs_and_outcome(make_orb):
    wanted = make_orb("The washing machine leaks onto the kitchen floor.")
    make_orb("The jeans are a size too small.")

    search = orbs_filtered(filters=OrbFilters(text="Washing MACHINE"))
    plan = _plan(search)
    assert all(index in plan for index in ("orb_obs_trgm_idx", "orb_outcome_trgm_idx", "orb_hash_prefix_idx"))
    assert [orb.pk for orb in search] == [wanted.pk]


def test_a_hash_prefix_is_found_through_an_index_too(make_orb):
    wanted = make_orb("The fridge hums all night.")
    make_orb("The boots were charged twice.")

    search = orbs_filtered(filters=OrbFilters(text=wanted.content_hash[:10]))
    assert "orb_hash_prefix_idx" in _plan(search)
    assert [orb.pk for orb in search] == [wanted.pk]
