"""What each Orb is worth, measured by randomised withholding (evaluation/memory.py): success of
the episodes it was served in minus those it was withheld from (`metrics.memory_effect`), a bank's
Orbs ranked by estimated harm, and the review flag on an Orb whose interval lies below 0."""
from collections import defaultdict

from evaluation import metrics
from orbs.services import orb_flag, orb_retrieval_outcomes
from orbs.services.queue import OrbFilters, orbs_filtered


def orb_effects_compute(*, orb_ids) -> dict[int, metrics.MemoryEffect]:
    """One (served, success) pair per (Orb, episode): an episode retrieves an Orb on many turns,
    but withholding is decided once per episode, so the episode is the unit. Retrievals outside an
    episode (no episode reference) were never withheld and are left out."""
    episodes: dict[int, dict[str, tuple[bool, bool]]] = defaultdict(dict)
    for orb_id, episode_ref, withheld, success in orb_retrieval_outcomes(orb_ids=orb_ids):
        if episode_ref:
            episodes[orb_id][episode_ref] = (not withheld, success)
    return {orb_id: metrics.memory_effect(list(episodes[orb_id].values())) for orb_id in orb_ids}


def _bank_orbs(bank):
    return orbs_filtered(filters=OrbFilters(bank=bank.slug))


def bank_effects_rank(*, bank) -> list[dict]:
    """The bank's Orbs with an estimate, most harmful first, then those still short of
    `metrics.MIN_RETRIEVALS` episodes (most retrieved first)."""
    orbs = {orb.pk: orb for orb in _bank_orbs(bank)}
    effects = orb_effects_compute(orb_ids=list(orbs))
    ranked = metrics.memory_effects_by_harm(effects)
    estimated = {orb_id for orb_id, _ in ranked}
    waiting = sorted((item for item in effects.items() if item[0] not in estimated and item[1].served + item[1].withheld),
                     key=lambda item: (-(item[1].served + item[1].withheld), item[0]))
    return [{"orb": orbs[orb_id], "effect": effect} for orb_id, effect in [*ranked, *waiting]]


def _flag_note(effect: metrics.MemoryEffect) -> str:
    return (f"Served in {effect.served} episodes ({effect.served_successes} succeeded), withheld from "
            f"{effect.withheld} ({effect.withheld_successes} succeeded): success "
            f"{100 * effect.estimate:+.1f} points when served, 95 % CI {100 * effect.low:+.1f} to "
            f"{100 * effect.high:+.1f}. Even the upper bound says it lowers success; review it.")


def bank_harmful_flag(*, bank) -> list[int]:
    """Flag for review every Orb of the bank whose interval lies below 0 and is not flagged yet;
    nothing is deleted or rejected. Returns the Orbs flagged now."""
    effects = orb_effects_compute(orb_ids=list(_bank_orbs(bank).filter(flagged_at__isnull=True)
                                               .values_list("pk", flat=True)))
    return [orb_id for orb_id, effect in effects.items()
            if effect.harmful and orb_flag(orb_id=orb_id, note=_flag_note(effect))]
