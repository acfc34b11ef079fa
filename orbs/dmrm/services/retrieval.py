"""DMRM retrieval: rank M_s ∪ M_t by cosine similarity of (o, g), drop entries below the bank's
minimum similarity, group the rest by state into experiences, render each experience as the
paper's Figure 3 does, fill the token budget C_max with the rendered experiences in rank order,
suppress the source memory once the target memory has learnt enough, and log the whole decision.

Which entries an agent may see: target entries unless a reviewer rejected or deleted them
(the paper uses M_t as it grows, so waiting for review would defeat it); source
entries when approved, or also pending ones when the bank does not insist on
approved memories.
"""
from collections.abc import Callable
from dataclasses import dataclass, replace

from django.db.models import Q

from orbs.dmrm.models import DMRMRetrievalLog, DMRMSettings, Experience
from orbs.dmrm.qlearning import (
    ACTION_MAX_CHARS,
    GOAL_MAX_CHARS,
    OBSERVATION_MAX_CHARS,
    Choice,
    ExperienceView,
    action_choices,
    budget_fill,
    clipped,
    current_render,
    experience_render,
    prompt_join,
)
from orbs.dmrm.services.learning import dmrm_settings_get, successful_trajectories
from orbs.services.banks import bank_embedder
from orbs.services.search import text_nearest

SOURCE, TARGET = Experience.Memory.SOURCE, Experience.Memory.TARGET
_ENDINGS = {True: "a successful trajectory", False: "a failed trajectory", None: "an unfinished trajectory"}


@dataclass(frozen=True)
class DMRMHit:
    experience: Experience
    memory: str
    raw_score: float
    score: float
    included: bool
    reason: str
    withheld: bool = False  # kept out of the prompt on purpose (randomised withholding)
    block: int | None = None  # which rendered experience of the prompt holds it

    def trace(self) -> dict:
        e = self.experience
        return {"experience_id": e.pk, "memory": self.memory, "raw_score": round(self.raw_score, 6),
                "score": round(self.score, 6), "included": self.included, "withheld": self.withheld,
                "block": self.block, "reason": self.reason, "action": e.action, "q_value": e.q_value,
                "tokens": e.token_length}


@dataclass(frozen=True)
class DMRMResult:
    retrieval_id: int
    prompt_block: str
    suppressed: bool
    successful_trajectories: int
    budget_used: int
    c_max: int
    min_similarity: float
    hits: list[DMRMHit]


def _servable(bank, *, source_allowed: bool):
    # A run's own target entries serve while pending (the run is learning from itself); those an
    # API key wrote behind the bank's gate wait for a reviewer's approval, like a key's Orbs.
    target = (Q(memory=TARGET) & ~Q(status__in=[Experience.Status.REJECTED, Experience.Status.DELETED])
              & ~Q(needs_review=True, status=Experience.Status.PENDING))
    source_statuses = [Experience.Status.APPROVED] + ([] if bank.approved_only else [Experience.Status.PENDING])
    source = Q(memory=SOURCE, status__in=source_statuses)
    wanted = (target | source) if source_allowed else target
    return Experience.objects.filter(wanted, bank=bank, embedding_model=bank.embedding_model)


def _scored(nearest: list[tuple[Experience, float]], *, weight: float) -> list[tuple[Experience, float, float]]:
    """(entry, raw cosine, score used for ranking), best first; equal scores keep the older entry first."""
    scored = [(e, cosine, cosine * (weight if e.memory == SOURCE else 1.0)) for e, cosine in nearest]
    return sorted(scored, key=lambda item: (-item[2], item[0].pk))


def _suppression(bank, settings: DMRMSettings, domain: str) -> tuple[bool, int]:
    successes = successful_trajectories(bank=bank, domain=domain)
    return successes >= settings.n_success, successes


def _screened(entry: Experience, raw: float, *, min_similarity: float, withhold) -> tuple[bool, str] | None:
    """(withheld, reason) for an entry kept out before the budget is filled; None when it competes."""
    if raw < min_similarity:
        return False, f"similarity {raw:.3f} below the bank's minimum {min_similarity:g}"
    if withhold and withhold(entry.pk):
        return True, "withheld (randomised withholding, to measure what it is worth)"
    return None


def _state(entry: Experience) -> tuple:
    return entry.memory, entry.source_memory_id, entry.state_key


def _choice(entry: Experience) -> Choice:
    reason = f"reward {entry.reward:g}, seen {entry.visits}×, from {_ENDINGS[entry.success]}"
    return Choice(entry.action, entry.q_value, reason, entry.visits, entry.updated_at.timestamp())


def _view(members: list[tuple[Experience, float]]) -> ExperienceView:
    """One state's retrieved entries as an experience: the best-ranked entry's (o, g), every action
    taken there, and the best- and worst-valued of them."""
    first, raw = members[0]
    encouraged, discouraged = action_choices([_choice(e) for e, _ in members])
    actions = list(dict.fromkeys(e.action for e, _ in members))
    return ExperienceView(f"Experience ({first.memory} memory, similarity {raw:.2f}):", first.observation,
                          first.goal, actions, encouraged, discouraged)


def _grouped(eligible: list[tuple[Experience, float]]) -> dict[tuple, list[tuple[Experience, float]]]:
    """Entries by state, the states in the rank of their best entry."""
    groups: dict[tuple, list] = {}
    for entry, raw in eligible:
        groups.setdefault(_state(entry), []).append((entry, raw))
    return groups


def _select(scored, *, current: str, settings: DMRMSettings, count, withhold) -> tuple[list[DMRMHit], list[str]]:
    """Every candidate's fate, and the rendered experiences that fitted, in rank order."""
    screens = {e.pk: _screened(e, raw, min_similarity=settings.min_similarity, withhold=withhold)
               for e, raw, _ in scored}
    groups = _grouped([(e, raw) for e, raw, _ in scored if screens[e.pk] is None])
    blocks = [experience_render(_view(members)) for members in groups.values()]
    decisions = dict(zip(groups, budget_fill(current=current, blocks=blocks, c_max=settings.c_max, count=count)))
    numbers = {key: n for n, key in enumerate(groups, start=1)}
    hits = []
    for entry, raw, score in scored:
        screen, key = screens[entry.pk], _state(entry)
        if screen:
            hits.append(DMRMHit(entry, entry.memory, raw, score, False, screen[1], withheld=screen[0]))
            continue
        decision = decisions[key]
        hits.append(DMRMHit(entry, entry.memory, raw, score, decision.included,
                            f"experience {numbers[key]}, {decision.reason}",
                            block=numbers[key] if decision.included else None))
    return hits, [block for block, d in zip(blocks, decisions.values()) if d.included]


def experiences_retrieve(*, bank, goal: str, observation: str, recent_actions: list[str] | None = None,
                         domain: str = "", client: str = "", customer_key: str = "",
                         withhold: Callable[[int], bool] | None = None) -> DMRMResult:
    """The prompt block for the agent's current step: the current state with its history, then
    each retrieved experience, never more than C_max tokens (empty when no experience fits).
    Over-long text is cut with a marker (the bounds of orbs.dmrm.qlearning). `domain`: the task's,
    whose successful trajectories switch M_s off (the whole bank's when empty).
    `customer_key`: whose query this is, kept on the log so erasing the customer removes it.
    `withhold(experience_id)` True keeps that entry out of the prompt while logging it."""
    goal, observation = clipped(goal, GOAL_MAX_CHARS), clipped(observation, OBSERVATION_MAX_CHARS)
    recent_actions = [clipped(action, ACTION_MAX_CHARS) for action in recent_actions or []]
    settings, model = dmrm_settings_get(bank=bank), bank_embedder(bank)
    suppressed, successes = _suppression(bank, settings, domain)
    disable = suppressed and settings.suppression_mode == DMRMSettings.Suppression.DISABLE
    weighted = suppressed and not disable
    nearest, embed_ms, search_ms = text_nearest(queryset=_servable(bank, source_allowed=not disable), model=model,
                                                text=f"{observation}\n{goal}", k=settings.scan_limit)
    current = current_render(recent_actions=recent_actions, observation=observation, instruction=goal)
    hits, blocks = _select(_scored(nearest, weight=settings.source_weight if weighted else 1.0), current=current,
                           settings=settings, count=model.count_tokens, withhold=withhold)
    if weighted:
        hits = [_down_weighted(h) for h in hits]
    block = prompt_join([current, *blocks]) if blocks else ""
    used = model.count_tokens(block) if block else 0
    log = DMRMRetrievalLog.objects.create(
        bank=bank, goal=goal, observation=observation, suppressed=suppressed,
        suppression_mode=settings.suppression_mode, successful_trajectories=successes, c_max=settings.c_max,
        min_similarity=settings.min_similarity, budget_used=used, hits=[h.trace() for h in hits], prompt_block=block,
        embed_ms=round(embed_ms, 3), search_ms=round(search_ms, 3), client=client,
        customer_key=customer_key,
    )
    return DMRMResult(log.pk, block, suppressed, successes, used, settings.c_max, settings.min_similarity, hits)


def _down_weighted(hit: DMRMHit) -> DMRMHit:
    if hit.memory != SOURCE:
        return hit
    return replace(hit, reason=hit.reason + " (source score down-weighted)")


def dmrm_retrieval_outcome_record(*, retrieval_ids: list[int], success: bool, episode_ref: str) -> int:
    """How the episode that made these retrievals ended; returns the retrievals noted."""
    return DMRMRetrievalLog.objects.filter(pk__in=retrieval_ids).update(success=success, episode_ref=episode_ref)


def experience_retrieval_outcomes(*, experience_ids) -> list[tuple[int, str, bool, bool]]:
    """(experience id, episode reference, withheld, success) for every time one of these
    experiences was put in a prompt or withheld from one, in a retrieval whose episode's ending is
    known. Entries cut by the budget or the minimum similarity were neither and are left out."""
    wanted = set(experience_ids)
    banks = Experience.objects.filter(pk__in=wanted).values("bank_id")
    logs = DMRMRetrievalLog.objects.filter(bank_id__in=banks, success__isnull=False).exclude(episode_ref="")
    return [(hit["experience_id"], ref, bool(hit.get("withheld")), success)
            for ref, success, hits in logs.values_list("episode_ref", "success", "hits").iterator()
            for hit in hits
            if hit["experience_id"] in wanted and (hit.get("included") or hit.get("withheld"))]
