"""Retrieval for agents: q' = rewrite(q ⊕ C), e = embed(q'), top-k Orbs by
cosine similarity, a token-bounded prompt block, and a log of every call."""
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memweb.embeddings import embedder
from orbs.backends.rewriter import query_rewrite
from orbs.budget import SITUATION_MAX_CHARS
from orbs.context_filter import ContextMatches, context_filter_path
from orbs.errors import FieldRequired
from orbs.models import MemoryBank, Orb, RetrievalHit, RetrievalLog
from orbs.services.banks import bank_embedder, bank_resolve
from orbs.services.search import text_nearest

logger = logging.getLogger(__name__)
PROMPT_HEADER = "Memories from past customer-service episodes (most relevant first):"


@dataclass(frozen=True)
class Hit:
    orb: Orb
    score: float
    rank: int
    withheld: bool = False  # kept out of the prompt on purpose (randomised withholding)
    injected: bool = False  # in the prompt block; a served hit that is not was cut by the token budget


@dataclass(frozen=True)
class RetrievalResult:
    retrieval_id: int
    hits: list[Hit]
    prompt_block: str
    rewritten_query: str = ""
    rewriter_backend: str = ""
    timings: dict = field(default_factory=dict)  # rewrite_ms, embed_ms, search_ms

    @property
    def injected_count(self) -> int:
        """Hits that reached the prompt: fewer than retrieved when withheld or cut by the budget."""
        return sum(hit.injected for hit in self.hits)


def _ms_since(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def _reads_across_customers(bank: MemoryBank, customer_key: str | None) -> bool:
    """Whether a retrieval without a customer may read a per-customer bank; refused unless the
    bank allows it, since it would hand one customer's memories to another."""
    if customer_key or not bank.is_per_customer:
        return False
    if not bank.cross_customer_retrieval:
        raise FieldRequired("customer_key", f"bank {bank.slug!r} keeps Orbs per customer and does not allow "
                                            "cross-customer retrieval: name the customer")
    return True


def orbs_retrievable(*, bank: MemoryBank, approved_only: bool, domain: str | None = None,
                     customer_key: str | None = None, context_filter: dict | None = None):
    """The Orbs an agent may see. The bank's approved-only policy cannot be lifted by a request;
    rejected and superseded Orbs are never served. A per-customer bank serves a retrieval without
    a customer only when it allows cross-customer retrieval (else FieldRequired naming customer_key).
    `context_filter` keeps the Orbs whose context matches it (orbs.context_filter; InvalidFilter
    naming the part outside the grammar)."""
    _reads_across_customers(bank, customer_key)
    statuses = [Orb.Status.APPROVED]
    if not (approved_only or bank.approved_only):
        statuses.append(Orb.Status.PENDING)
    queryset = Orb.objects.select_related("bank").filter(
        bank=bank, status__in=statuses, embedding_model=bank.embedding_model
    )
    if domain:
        queryset = queryset.filter(domain=domain)
    if customer_key:
        queryset = queryset.filter(customer_key=customer_key)
    if context_filter is not None:
        queryset = queryset.filter(ContextMatches(F("context"), context_filter_path(context_filter)))
    return queryset


def _entry(rank: int, orb: Orb) -> str:
    situation = " / ".join(orb.obs.splitlines())[:SITUATION_MAX_CHARS]
    return f"[{rank}] Situation: {situation}\n    Customer felt: {orb.emotion}\n    Lesson: {orb.outcome}"


def prompt_block_render(*, hits: list[Hit], token_budget: int, count_tokens) -> tuple[str, int, int]:
    """The hits as prompt text, best first, stopping before the budget would be exceeded:
    (block, tokens, how many hits fitted)."""
    if not hits:
        return "", 0, 0
    block, used, fitted = PROMPT_HEADER, count_tokens(PROMPT_HEADER), 0
    for hit in hits:
        candidate = f"{block}\n{_entry(hit.rank, hit.orb)}"
        tokens = count_tokens(candidate)
        if tokens > token_budget:
            break
        block, used, fitted = candidate, tokens, fitted + 1
    return (block, used, fitted) if fitted else ("", 0, 0)


def _served_and_rendered(hits: list[Hit], withhold: Callable[[int], bool] | None, bank: MemoryBank,
                         model) -> tuple[list[Hit], str, int]:
    """Marks each hit withheld or injected; withheld hits never reach the prompt, so a hit that
    is neither was cut by the token budget."""
    hits = [replace(hit, withheld=bool(withhold and withhold(hit.orb.pk))) for hit in hits]
    served = [hit for hit in hits if not hit.withheld]
    block, tokens, fitted = prompt_block_render(hits=served, token_budget=bank.prompt_token_budget,
                                                count_tokens=model.count_tokens)
    injected = {hit.orb.pk for hit in served[:fitted]}
    return [replace(hit, injected=hit.orb.pk in injected) for hit in hits], block, tokens


def _log(*, bank, query, context, rewrite, k, filters, hits, prompt_tokens, timings, client) -> RetrievalLog:
    with transaction.atomic():
        log = RetrievalLog.objects.create(
            bank=bank, query=query, context=context, rewritten_query=rewrite.value, rewriter_backend=rewrite.backend,
            k=k, filters=filters, prompt_tokens=prompt_tokens, client=client, **timings,
            hits=[{"orb_id": h.orb.pk, "content_hash": h.orb.content_hash, "score": h.score, "rank": h.rank,
                   "withheld": h.withheld, "injected": h.injected} for h in hits],
        )
        RetrievalHit.objects.bulk_create(
            [RetrievalHit(retrieval=log, orb=h.orb, rank=h.rank, score=h.score, withheld=h.withheld,
                          injected=h.injected) for h in hits]
        )
        Orb.objects.filter(pk__in=[h.orb.pk for h in hits]).update(
            times_retrieved=F("times_retrieved") + 1, last_retrieved_at=timezone.now()
        )
    return log


def _cross_customer_note(bank: MemoryBank, customer_key: str | None, client: str) -> dict:
    """Marks a per-customer bank's read across customers in the retrieval log (and the server log)."""
    if not _reads_across_customers(bank, customer_key):
        return {}
    logger.info("cross-customer retrieval from per-customer bank %s by client %r", bank.slug, client)
    return {"cross_customer": True}


def orbs_retrieve(*, bank: MemoryBank | str, query: str, context: dict, k: int | None = None,
                  approved_only: bool = True, domain: str | None = None, customer_key: str | None = None,
                  min_score: float | None = None, client: str = "", filter: dict | None = None,
                  withhold: Callable[[int], bool] | None = None) -> RetrievalResult:
    """Top-k Orbs for an agent's current turn. `withhold(orb_id)` True keeps that hit out of the
    prompt while logging it (the caller's randomised withholding, which measures a memory's
    effect). `filter` keeps Orbs whose context matches it, inside the nearest-neighbour search, so the
    top k are taken among the matching ones (orbs.context_filter). Raises MemoryBank.DoesNotExist for
    an unknown bank, InvalidFilter for a filter outside the grammar."""
    bank = bank_resolve(bank)
    k = k or bank.retrieval_k
    min_score = bank.min_score if min_score is None else min_score
    # Refused before the rewriter and the embedder spend time on it.
    queryset = orbs_retrievable(bank=bank, approved_only=approved_only, domain=domain, customer_key=customer_key,
                                context_filter=filter)
    model = bank_embedder(bank)
    start = time.perf_counter()
    rewrite = query_rewrite(query=query, context=context)
    rewrite_ms = _ms_since(start)
    nearest, embed_ms, search_ms = text_nearest(queryset=queryset, model=model, text=rewrite.value, k=k)
    hits = [Hit(orb, round(score, 6), rank) for rank, (orb, score) in enumerate(
        [(orb, score) for orb, score in nearest if score >= min_score], start=1)]
    hits, block, tokens = _served_and_rendered(hits, withhold, bank, model)
    filters = {"approved_only": approved_only or bank.approved_only, "domain": domain, "customer_key": customer_key,
               "min_score": min_score} | _cross_customer_note(bank, customer_key, client)
    if filter is not None:
        filters["context"] = filter
    timings = {"rewrite_ms": rewrite_ms, "embed_ms": embed_ms, "search_ms": search_ms}
    log = _log(bank=bank, query=query, context=context, rewrite=rewrite, k=k, filters=filters, hits=hits,
               prompt_tokens=tokens, client=client, timings=timings)
    return RetrievalResult(log.pk, hits, block, rewrite.value, rewrite.backend, timings)


def orb_retrieval_outcomes(*, orb_ids) -> list[tuple[int, str, bool, bool | None, bool]]:
    """(Orb id, episode ref, withheld, injected, episode succeeded) for every retrieval of these Orbs
    whose episode outcome is known, oldest first. injected is False for a hit cut by the token budget
    (or withheld), None when logged before it was recorded."""
    return list(RetrievalHit.objects.filter(orb_id__in=orb_ids, retrieval__outcome_success__isnull=False)
                .order_by("retrieval__created_at", "retrieval_id")
                .values_list("orb_id", "retrieval__outcome_episode_ref", "withheld", "injected",
                             "retrieval__outcome_success"))


def retrieval_outcome_record(*, retrieval_ids: list[int], success: bool, reward: float | None = None,
                             episode_ref: str = "", unrecorded_only: bool = False) -> int:
    """Note how the episode that used these retrievals ended (shown on each hit Orb's page).
    `unrecorded_only`: for a writer that only learns the outcome second-hand (an ingested
    trajectory), which must not replace what the episode's own writer recorded."""
    if not retrieval_ids:
        return 0
    logs = RetrievalLog.objects.filter(pk__in=retrieval_ids)
    if unrecorded_only:
        logs = logs.filter(outcome_success__isnull=True)
    return logs.update(
        outcome_success=success, outcome_reward=reward, outcome_episode_ref=episode_ref
    )


def orbs_search(*, text: str, queryset, limit: int = 20) -> list[tuple[Orb, float]]:
    """A reviewer's semantic search: the raw text embedded, no rewrite, no retrieval log.
    Vectors of other models are left out so scores stay comparable."""
    model = embedder()
    nearest, _, _ = text_nearest(queryset=queryset.filter(embedding_model=model.model_name), model=model, text=text,
                                 k=limit)
    return nearest
