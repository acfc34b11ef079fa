"""DMRM retrieval: rank M_s ∪ M_t by cosine similarity of (o, g), fill the token
budget C_max in rank order, suppress the source memory once the target memory
has learnt enough, render the paper's prompt block, and log the whole decision.

Which entries an agent may see: target entries unless a reviewer rejected them
(the paper uses M_t as it grows, so waiting for review would defeat it); source
entries when approved, or also pending ones when the bank does not insist on
approved memories.
"""
import time
from dataclasses import dataclass

from django.db.models import Q

from orbs.dmrm.models import DMRMRetrievalLog, DMRMSettings, Experience
from orbs.dmrm.qlearning import action_choices, budget_select, prompt_render
from orbs.dmrm.services.learning import dmrm_settings_get, successful_trajectories
from orbs.services.banks import bank_embedder
from orbs.services.search import vectors_nearest

SOURCE, TARGET = Experience.Memory.SOURCE, Experience.Memory.TARGET


@dataclass(frozen=True)
class DMRMHit:
    experience: Experience
    memory: str
    raw_score: float
    score: float
    included: bool
    reason: str

    def trace(self) -> dict:
        e = self.experience
        return {"experience_id": e.pk, "memory": self.memory, "raw_score": round(self.raw_score, 6),
                "score": round(self.score, 6), "included": self.included, "reason": self.reason,
                "action": e.action, "q_value": e.q_value, "tokens": e.token_length}


@dataclass(frozen=True)
class DMRMResult:
    retrieval_id: int
    prompt_block: str
    suppressed: bool
    successful_trajectories: int
    budget_used: int
    c_max: int
    hits: list[DMRMHit]


def _servable(bank, *, source_allowed: bool):
    target = Q(memory=TARGET) & ~Q(status=Experience.Status.REJECTED)
    source_statuses = [Experience.Status.APPROVED] + ([] if bank.approved_only else [Experience.Status.PENDING])
    source = Q(memory=SOURCE, status__in=source_statuses)
    wanted = (target | source) if source_allowed else target
    return Experience.objects.filter(wanted, bank=bank, embedding_model=bank.embedding_model)


def _scored(nearest: list[tuple[Experience, float]], *, weight: float) -> list[tuple[Experience, float, float]]:
    """(entry, raw cosine, score used for ranking), best first."""
    scored = [(e, cosine, cosine * (weight if e.memory == SOURCE else 1.0)) for e, cosine in nearest]
    return sorted(scored, key=lambda item: (-item[2], item[0].pk))


def _suppression(bank, settings: DMRMSettings) -> tuple[bool, int]:
    successes = successful_trajectories(bank=bank)
    return successes >= settings.n_success, successes


def _hits(scored, decisions, *, weighted: bool) -> list[DMRMHit]:
    hits = []
    for (entry, raw, score), decision in zip(scored, decisions):
        reason = decision.reason + (" (source score down-weighted)" if weighted and entry.memory == SOURCE else "")
        hits.append(DMRMHit(entry, entry.memory, raw, score, decision.included, reason))
    return hits


def _render(hits: list[DMRMHit], *, goal: str, observation: str, recent_actions: list[str]) -> str:
    entries = [(h.experience.action, h.experience.q_value,
                f"{h.memory} memory, similarity {h.raw_score:.2f}, seen {h.experience.visits}×")
               for h in hits if h.included]
    encouraged, discouraged = action_choices(entries)
    return prompt_render(recent_actions=recent_actions, observation=observation, instruction=goal,
                         encouraged=encouraged, discouraged=discouraged)


def experiences_retrieve(*, bank, goal: str, observation: str, recent_actions: list[str] | None = None,
                         client: str = "") -> DMRMResult:
    settings, model = dmrm_settings_get(bank=bank), bank_embedder(bank)
    suppressed, successes = _suppression(bank, settings)
    disable = suppressed and settings.suppression_mode == DMRMSettings.Suppression.DISABLE
    weighted = suppressed and not disable
    start = time.perf_counter()
    vector = model.embed_one(f"{observation}\n{goal}")
    query_tokens = model.count_tokens(f"{observation}\n{goal}")
    embed_ms, start = (time.perf_counter() - start) * 1000, time.perf_counter()
    nearest = vectors_nearest(queryset=_servable(bank, source_allowed=not disable), vector=vector,
                              k=settings.scan_limit)
    search_ms = (time.perf_counter() - start) * 1000
    scored = _scored(nearest, weight=settings.source_weight if weighted else 1.0)
    decisions = budget_select(lengths=[e.token_length for e, _, _ in scored], query_tokens=query_tokens,
                              c_max=settings.c_max)
    hits = _hits(scored, decisions, weighted=weighted)
    used = decisions[-1].used_after if decisions else query_tokens
    block = _render(hits, goal=goal, observation=observation, recent_actions=recent_actions or [])
    log = DMRMRetrievalLog.objects.create(
        bank=bank, goal=goal, observation=observation, suppressed=suppressed,
        suppression_mode=settings.suppression_mode, successful_trajectories=successes, c_max=settings.c_max,
        budget_used=used, hits=[h.trace() for h in hits], prompt_block=block, embed_ms=round(embed_ms, 3),
        search_ms=round(search_ms, 3), client=client,
    )
    return DMRMResult(log.pk, block, suppressed, successes, used, settings.c_max, hits)
