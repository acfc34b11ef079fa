"""Metadata filters on Orb context: the grammar, each operator, and/or, the bounds, top-k among
matches, the GIN index, and the bound on a context's size at write time."""
import pytest
from django.db import connection, transaction
from django.db.models import F
from django.test import override_settings

from orbs.context_filter import (
    FILTER_MAX_CONDITIONS,
    FILTER_MAX_DEPTH,
    FILTER_MAX_IN_VALUES,
    ContextMatches,
    InvalidFilter,
    context_filter_path,
)
from orbs.errors import FieldRequired
from orbs.models import Orb, RetrievalLog
from orbs.services import orb_remember, orbs_retrieve
from tests.orbs.conftest import post, success_trajectory

API = "/api/orbs"
QUERY = "the washing machine leaks water"


@pytest.fixture
def catalogue(make_orb):
    """Four near-identical Orbs that differ only in their context, so only the filter tells them apart."""
    contexts = {
        "low": {"domain": "appliances", "priority": 1, "sku": "WM-1"},
        "high": {"domain": "appliances", "priority": 3.5, "sku": "WM-2", "vip": True},
        "clothes": {"domain": "clothing", "priority": 5, "sku": "JK-9"},
        # A number spelled as a string and a list holding the value: neither is that value.
        "odd": {"domain": ["appliances"], "priority": "4", "sku": "WM-1x"},
    }
    return {name: make_orb(f"My washing machine leaks water ({name}).", metadata=context)
            for name, context in contexts.items()}


def matching(bank, catalogue, context_filter, k=10) -> set[str]:
    names = {orb.pk: name for name, orb in catalogue.items()}
    hits = orbs_retrieve(bank=bank, query=QUERY, context={}, k=k, filter=context_filter).hits
    return {names[hit.orb.pk] for hit in hits}


@pytest.mark.parametrize(("context_filter", "expected"), [
    ({"field": "domain", "eq": "appliances"}, {"low", "high"}),
    ({"field": "priority", "eq": 1.0}, {"low"}),
    ({"field": "vip", "eq": True}, {"high"}),
    ({"field": "sku", "in": ["WM-1", "JK-9", "absent"]}, {"low", "clothes"}),
    ({"field": "priority", "gt": 1}, {"high", "clothes"}),
    ({"field": "priority", "gte": 1, "lt": 5}, {"low", "high"}),
    ({"field": "priority", "lte": 3.5}, {"low", "high"}),
    ({"and": [{"field": "domain", "eq": "appliances"}, {"field": "priority", "gte": 2}]}, {"high"}),
    ({"or": [{"field": "vip", "eq": True}, {"field": "domain", "eq": "clothing"}]}, {"high", "clothes"}),
    ({"or": [{"field": "missing", "eq": 1}, {"and": [{"field": "sku", "eq": "WM-1"}]}]}, {"low"}),
    ({"field": "missing", "gte": 0}, set()),
])
def test_each_operator_and_group_selects_the_matching_orbs(bank, catalogue, context_filter, expected):
    assert matching(bank, catalogue, context_filter) == expected


def test_top_k_is_taken_among_matching_orbs_and_the_filter_is_logged(bank, catalogue):
    # Unfiltered, k=1 would be whichever Orb sits nearest; filtered, it is the one match.
    only_clothes = {"field": "domain", "eq": "clothing"}
    assert matching(bank, catalogue, only_clothes, k=1) == {"clothes"}
    assert RetrievalLog.objects.latest("pk").filters["context"] == only_clothes


@pytest.mark.parametrize(("context_filter", "path"), [
    ({"field": "priority", "gte": "2"}, "filter.gte"),
    ({"field": "priority", "gte": True}, "filter.gte"),
    ({"field": "priority", "like": "x"}, "filter.like"),
    ({"field": "sku", "eq": "a", "gt": 1}, "filter"),
    ({"field": "sku"}, "filter"),
    ({"eq": "a"}, "filter.field"),
    ({"and": []}, "filter.and"),
    ({"and": [{"field": "a", "eq": 1}], "field": "b"}, "filter"),
    ({"or": [{"field": "a", "eq": {"nested": 1}}]}, "filter.or.0.eq"),
    ({"field": "a", "in": []}, "filter.in"),
    ({"field": "a", "in": list(range(FILTER_MAX_IN_VALUES + 1))}, "filter.in"),
    ({"and": [{"field": f"f{i}", "eq": i} for i in range(FILTER_MAX_CONDITIONS + 1)]},
     f"filter.and.{FILTER_MAX_CONDITIONS}"),
    ({"field": "a", "in": ["x" * 100] * 50}, "filter"),  # over FILTER_MAX_BYTES
])
def test_a_filter_outside_the_grammar_or_its_bounds_is_refused_naming_the_part(context_filter, path):
    with pytest.raises(InvalidFilter) as refused:
        context_filter_path(context_filter)
    assert refused.value.path == path


def test_a_filter_nested_too_deep_is_refused():
    node = {"field": "a", "eq": 1}
    for _ in range(FILTER_MAX_DEPTH):
        node = {"and": [node]}
    context_filter_path(node)  # at the limit: accepted
    with pytest.raises(InvalidFilter, match="nested more than"):
        context_filter_path({"or": [node]})


def test_the_api_answers_a_bad_filter_with_a_422_naming_the_part(agent, bank, catalogue):
    url = f"{API}/banks/{bank.slug}/retrieve"
    good = post(agent, url, {"query": QUERY, "filter": {"and": [{"field": "domain", "eq": "appliances"},
                                                                 {"field": "priority", "gte": 2}]}})
    assert good.status_code == 200
    assert [hit["orb"]["id"] for hit in good.json()["hits"]] == [catalogue["high"].pk]
    bad = post(agent, url, {"query": QUERY, "filter": {"and": [{"field": "domain", "eq": "x"},
                                                                {"field": "priority", "gte": "2"}]}})
    assert bad.status_code == 422
    [entry] = bad.json()["detail"]
    assert entry["loc"] == ["body", "payload", "filter", "and", 1, "gte"]
    assert "number" in entry["msg"]


def test_the_context_is_gin_indexed_for_the_filter_operator(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'orbs_orb' AND indexname = %s",
                       ["orb_context_gin_idx"])
        [(definition,)] = cursor.fetchall()
    assert "USING gin (context jsonb_path_ops)" in definition
    # The compiled predicate is one the index answers: with sequential scans priced out, the
    # planner reaches the rows through it (a few test rows would otherwise be read directly).
    path = context_filter_path({"and": [{"field": "sku", "in": ["WM-1", "WM-2"]}, {"field": "priority", "gte": 2}]})
    queryset = Orb.objects.filter(ContextMatches(F("context"), path))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = queryset.explain()
    assert "orb_context_gin_idx" in plan


@override_settings(ORBS_CONTEXT_MAX_BYTES=1024)
def test_a_context_over_the_limit_is_refused_at_write_time_naming_the_field(agent, bank):
    oversized = {"notes": "x" * 1100}
    remembered = post(agent, f"{API}/banks/{bank.slug}/remember", {"text": "Refund within a week.", "context": oversized})
    assert remembered.status_code == 422
    assert remembered.json()["detail"][0]["loc"][-1] == "context"
    assert "over the limit of 1024" in remembered.json()["detail"][0]["msg"]
    episode = post(agent, f"{API}/banks/{bank.slug}/episodes",
                   {"trajectory": success_trajectory("My kettle is broken.", metadata=oversized)})
    assert episode.status_code == 422
    assert episode.json()["detail"][0]["loc"][-2:] == ["trajectory", "metadata"]
    # The service refuses too (callers other than the API), and nothing was written.
    with pytest.raises(FieldRequired, match="context: the context is"):
        orb_remember(bank=bank, text="Refund within a week.", context=oversized)
    assert not bank.orbs.exists()
    accepted = post(agent, f"{API}/banks/{bank.slug}/remember", {"text": "Refund within a week.",
                                                                 "context": {"notes": "x" * 900}})
    assert accepted.status_code == 201
