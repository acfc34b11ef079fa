"""What each memory is worth, measured by randomised withholding (evaluation/memory.py): success of
the episodes it was served in minus those it was withheld from (`metrics.memory_effect`), a bank's
memories ranked by estimated harm, and the review flag on a memory whose interval lies below 0.
Orbs and DMRM experiences are measured alike; only where their outcomes come from and how they
are flagged differ."""
from collections import defaultdict

from evaluation import metrics
from orbs.dmrm.services import experience_flag, experience_retrieval_outcomes
from orbs.services import orb_flag, orb_retrieval_outcomes
from orbs.services.queue import OrbFilters, orbs_filtered, orbs_with_outcomes


def _effects(outcomes, memory_ids) -> dict[int, metrics.MemoryEffect]:
    """One (served, success) pair per (memory, episode): an episode retrieves a memory on many
    turns, but withholding is decided once per episode, so the episode is the unit. Retrievals
    outside an episode (no episode reference) were never withheld and are left out."""
    episodes: dict[int, dict[str, tuple[bool, bool]]] = defaultdict(dict)
    for memory_id, episode_ref, withheld, success in outcomes:
        if episode_ref:
            episodes[memory_id][episode_ref] = (not withheld, success)
    return {memory_id: metrics.memory_effect(list(episodes[memory_id].values())) for memory_id in memory_ids}


def orb_effects_compute(*, orb_ids) -> dict[int, metrics.MemoryEffect]:
    return _effects(orb_retrieval_outcomes(orb_ids=orb_ids), orb_ids)


def experience_effects_compute(*, experience_ids) -> dict[int, metrics.MemoryEffect]:
    return _effects(experience_retrieval_outcomes(experience_ids=experience_ids), experience_ids)


def _by_harm(effects: dict[int, metrics.MemoryEffect]) -> list[tuple[int, metrics.MemoryEffect]]:
    """Memories with an estimate, most harmful first, then those still short of
    `metrics.MIN_RETRIEVALS` episodes (most retrieved first)."""
    ranked = metrics.memory_effects_by_harm(effects)
    estimated = {memory_id for memory_id, _ in ranked}
    waiting = sorted((item for item in effects.items() if item[0] not in estimated and item[1].served + item[1].withheld),
                     key=lambda item: (-(item[1].served + item[1].withheld), item[0]))
    return [*ranked, *waiting]


def _bank_orbs(bank):
    return orbs_filtered(filters=OrbFilters(bank=bank.slug))


def bank_effects_rank(*, bank) -> list[dict]:
    """The bank's Orbs with their effect, most harmful first."""
    orbs = {orb.pk: orb for orb in _bank_orbs(bank).filter(pk__in=orbs_with_outcomes(bank=bank))}
    return [{"orb": orbs[orb_id], "effect": effect}
            for orb_id, effect in _by_harm(orb_effects_compute(orb_ids=list(orbs)))]


def bank_experience_effects_rank(*, bank) -> list[dict]:
    """The bank's DMRM experiences with their effect, most harmful first."""
    experiences = {e.pk: e for e in bank.experiences.defer("vector")}
    return [{"experience": experiences[pk], "effect": effect}
            for pk, effect in _by_harm(experience_effects_compute(experience_ids=list(experiences)))]


def _flag_note(effect: metrics.MemoryEffect) -> str:
    return (f"Served in {effect.served} episodes ({effect.served_successes} succeeded), withheld from "
            f"{effect.withheld} ({effect.withheld_successes} succeeded): success "
            f"{100 * effect.estimate:+.1f} points when served, 95 % CI {100 * effect.low:+.1f} to "
            f"{100 * effect.high:+.1f}. Even the upper bound says it lowers success; review it.")


def bank_harmful_flag(*, bank) -> list[int]:
    """Flag for review every Orb of the bank whose interval lies below 0 and is not flagged yet;
    nothing is deleted or rejected. Returns the Orbs flagged now."""
    effects = orb_effects_compute(orb_ids=list(_bank_orbs(bank).filter(flagged_at__isnull=True,
                                                                        pk__in=orbs_with_outcomes(bank=bank))
                                               .values_list("pk", flat=True)))
    return [orb_id for orb_id, effect in effects.items()
            if effect.harmful and orb_flag(orb_id=orb_id, note=_flag_note(effect))]


def bank_harmful_experiences_flag(*, bank) -> list[int]:
    """The same for the bank's DMRM experiences. Returns the experiences flagged now."""
    effects = experience_effects_compute(experience_ids=list(
        bank.experiences.filter(flagged_at__isnull=True).values_list("pk", flat=True)))
    return [pk for pk, effect in effects.items()
            if effect.harmful and experience_flag(experience_id=pk, note=_flag_note(effect))]
