"""Retrieval: real embeddings rank paraphrases first; filters gate what agents see; every call is logged."""
from django.db import connection, transaction

from memweb.embeddings import embedder
from orbs.models import Orb, RetrievalHit, RetrievalLog
from orbs.services import bank_get_or_create, orb_reject, orbs_retrievable, orbs_retrieve
from orbs.services.retrieval import PROMPT_HEADER
from orbs.services.search import vectors_nearest_query

SITUATIONS = [
    "My new washing machine leaks water all over the kitchen floor.",
    "I want to exchange the jeans I bought for a larger size.",
    "Can you apply my discount code to the order for the coffee maker?",
    "The winter jacket I ordered has not been shipped yet.",
    "How do I cancel my subscription to the newsletter?",
]


def test_it_ranks_a_paraphrase_above_unrelated_orbs(bank, make_orb):
    orbs = [make_orb(text) for text in SITUATIONS]
    result = orbs_retrieve(bank=bank, query="water is leaking out of the washer I just got", context={})
    assert result.hits[0].orb == orbs[0]
    assert [hit.rank for hit in result.hits] == [1, 2, 3, 4, 5]
    scores = [hit.score for hit in result.hits]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] - scores[1] > 0.1


def test_it_serves_only_approved_orbs_by_default(bank, make_orb, reviewer_user):
    approved = make_orb(SITUATIONS[0])
    pending = make_orb("My washing machine leaks water on the floor.", approve=False)
    rejected = make_orb("The washer leaks water everywhere.", approve=True)
    orb_reject(orb_id=rejected.pk, expected_version=rejected.version, actor=reviewer_user, reason="vague")
    hit_ids = [hit.orb.pk for hit in orbs_retrieve(bank=bank, query="washer leaks", context={}).hits]
    assert hit_ids == [approved.pk]
    # A request cannot lift the bank's approved-only policy...
    lifted = orbs_retrieve(bank=bank, query="washer leaks", context={}, approved_only=False)
    assert [h.orb.pk for h in lifted.hits] == [approved.pk]
    # ...but a bank that allows pending Orbs serves them on request, never rejected ones.
    bank.approved_only = False
    bank.save(update_fields=["approved_only"])
    hit_ids = {h.orb.pk for h in orbs_retrieve(bank=bank, query="washer leaks", context={}, approved_only=False).hits}
    assert hit_ids == {approved.pk, pending.pk}


def test_it_keeps_to_the_same_customer_when_asked(bank, make_orb):
    mine = make_orb("My order of towels is late.", customer_key="alice")
    make_orb("My order of towels is late, where is it?", customer_key="bob")
    every = orbs_retrieve(bank=bank, query="late towels", context={})
    own = orbs_retrieve(bank=bank, query="late towels", context={}, customer_key="alice")
    assert len(every.hits) == 2
    assert [hit.orb for hit in own.hits] == [mine]


def test_it_filters_by_domain_and_minimum_score(bank, make_orb):
    clothing = make_orb("These boots are too narrow, I need a wider pair.", domain="clothing")
    make_orb("The boot of my car does not fit the fridge box.", domain="appliances")
    hits = orbs_retrieve(bank=bank, query="boots too narrow", context={}, domain="clothing").hits
    assert [h.orb for h in hits] == [clothing]
    assert orbs_retrieve(bank=bank, query="boots too narrow", context={}, min_score=0.99).hits == []


def test_it_bounds_the_prompt_block_by_tokens(bank, make_orb):
    for text in SITUATIONS:
        make_orb(text)
    bank.prompt_token_budget = 120
    bank.save(update_fields=["prompt_token_budget"])
    result = orbs_retrieve(bank=bank, query="leaking washer", context={})
    assert result.prompt_block.startswith(PROMPT_HEADER + "\n[1] Situation: My new washing machine leaks")
    assert embedder().count_tokens(result.prompt_block) <= 120
    assert "[1]" in result.prompt_block and "[5]" not in result.prompt_block
    logged = RetrievalLog.objects.get(pk=result.retrieval_id)
    assert logged.prompt_tokens == embedder().count_tokens(result.prompt_block)


def test_it_logs_every_retrieval_with_hits_and_timings(bank, make_orb):
    orb = make_orb(SITUATIONS[1], domain="clothing")
    result = orbs_retrieve(bank=bank, query="Hello, please help: jeans too small", context={"sku": "JN-32"},
                           k=3, client="agent-7")
    log = RetrievalLog.objects.get(pk=result.retrieval_id)
    assert log.rewritten_query == "help: jeans too small; sku: jn-32"
    assert (log.k, log.client, log.rewriter_backend) == (3, "agent-7", "scripted")
    assert log.filters == {"approved_only": True, "domain": None, "customer_key": None, "min_score": 0.0}
    assert log.hits == [{"orb_id": orb.pk, "content_hash": orb.content_hash, "score": result.hits[0].score, "rank": 1,
                         "withheld": False, "injected": True}]
    assert log.embed_ms > 0 and log.search_ms > 0 and log.rewrite_ms >= 0
    assert RetrievalHit.objects.get(orb=orb).retrieval == log
    orb.refresh_from_db()
    assert orb.times_retrieved == 1 and orb.last_retrieved_at is not None


def test_a_bank_with_nothing_to_serve_is_answered_without_embedding_the_query(bank, make_orb, monkeypatch):
    make_orb(SITUATIONS[0], approve=False)  # pending: not served by an approved-only bank

    def embedding_refused(*args, **kwargs):
        raise AssertionError("the query was embedded although no Orb could be served")

    monkeypatch.setattr("orbs.services.search.query_embed", embedding_refused)
    result = orbs_retrieve(bank=bank, query="washer leaks", context={}, client="agent-7")
    log = RetrievalLog.objects.get(pk=result.retrieval_id)
    assert result.hits == [] and result.prompt_block == "" and log.embed_ms == 0
    assert log.rewritten_query == "washer leaks"  # still rewritten and logged as any retrieval


def test_it_uses_the_hnsw_index_for_filtered_top_k(bank, make_orb):
    make_orb(SITUATIONS[0])
    vector = embedder().embed_one("washer leaks")
    queryset = vectors_nearest_query(queryset=orbs_retrievable(bank=bank, approved_only=True), vector=vector, k=5)
    sql, params = queryset.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        # A tiny table would rather be scanned and sorted; forbid that to see which plan the query allows.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "orb_vector_half384" in plan


def test_it_keeps_banks_apart(bank, make_orb):
    other = bank_get_or_create(name="Other shop")
    make_orb(SITUATIONS[0], target=other)
    assert orbs_retrieve(bank=bank, query="washer leaks", context={}).hits == []
    assert Orb.objects.filter(bank=other).count() == 1
