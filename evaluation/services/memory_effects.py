"""What each memory is worth, measured by randomised withholding (evaluation/memory_layers/banked.py): success of
the episodes it was served in minus those it was withheld from (`metrics.memory_effect`), a bank's
memories ranked by estimated harm, and the review flag on a memory measured to lower success, with
its error rate controlled over a run's looks and the bank's memories (`metrics.harmful_memories`).
Orbs and DMRM experiences are measured alike; only where their outcomes come from and how they
are flagged differ."""
from collections import defaultdict
from dataclasses import dataclass

from evaluation import metrics
from orbs.dmrm.services import experience_flag, experience_retrieval_outcomes
from orbs.services import orb_flag, orb_retrieval_outcomes
from orbs.services.queue import OrbFilters, orbs_filtered, orbs_with_outcomes

SERVED, WITHHELD, CUT = "served", "withheld", "cut"


@dataclass(frozen=True)
class HarmLook:
    """Where the harm flag looks: at trial end `number` of the `planned` trials of a run, over the run's
    own episodes (`episode_refs`; None: every episode with a known outcome, as one look)."""

    number: int = 1
    planned: int = 1
    episode_refs: frozenset[str] | None = None
    label: str = ""


def _episode_states(outcomes, episode_refs=None) -> dict[int, dict[str, tuple[str, bool]]]:
    """Per memory and episode: served, withheld or only cut by the token budget, and the outcome. An
    episode retrieves a memory on many turns, but withholding is decided once per episode, so the
    episode is the unit; it counts as served when the memory reached the prompt on any turn.
    Retrievals outside an episode (no episode reference) were never withheld and are left out."""
    episodes: dict[int, dict[str, tuple[str, bool]]] = defaultdict(dict)
    for memory_id, episode_ref, state, success in outcomes:
        if episode_ref and (episode_refs is None or episode_ref in episode_refs):
            if episodes[memory_id].get(episode_ref, (None,))[0] != SERVED:
                episodes[memory_id][episode_ref] = (state, success)
    return episodes


def _effects(outcomes, memory_ids, episode_refs=None) -> dict[int, metrics.MemoryEffect]:
    """An Orb cut by the token budget in every retrieval of an episode was neither served nor withheld
    there: that episode is left out of its effect (budget cuts follow rank, not chance)."""
    episodes = _episode_states(outcomes, episode_refs)
    return {memory_id: metrics.memory_effect([(state == SERVED, success) for state, success
                                              in episodes[memory_id].values() if state != CUT])
            for memory_id in memory_ids}


def _orb_state(withheld: bool, injected: bool | None) -> str:
    if withheld:
        return WITHHELD
    return CUT if injected is False else SERVED  # None: logged before cuts were recorded, counted as served


def orb_effects_compute(*, orb_ids, episode_refs=None) -> dict[int, metrics.MemoryEffect]:
    outcomes = [(orb_id, ref, _orb_state(withheld, injected), success)
                for orb_id, ref, withheld, injected, success in orb_retrieval_outcomes(orb_ids=orb_ids)]
    return _effects(outcomes, orb_ids, episode_refs)


def experience_effects_compute(*, experience_ids, episode_refs=None) -> dict[int, metrics.MemoryEffect]:
    outcomes = [(pk, ref, WITHHELD if withheld else SERVED, success)
                for pk, ref, withheld, success in experience_retrieval_outcomes(experience_ids=experience_ids)]
    return _effects(outcomes, experience_ids, episode_refs)


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


def _flag_note(effect: metrics.MemoryEffect, p_value: float, look: HarmLook, tested: int) -> str:
    where = f" in {look.label}" if look.label else ""
    counts = (f"Served in {effect.served} episodes{where} ({effect.served_successes} succeeded), withheld from "
              f"{effect.withheld} ({effect.withheld_successes} succeeded)")
    return (f"Serving it lowers success. {counts}: success {100 * effect.estimate:+.1f} points when served, "
            f"95 % CI {100 * effect.low:+.1f} to {100 * effect.high:+.1f}, one-sided p = {p_value:.2g} at trial end "
            f"{look.number} of {look.planned}. {metrics.harm_guarantee_text(looks=look.planned, memories=tested)} "
            "Review it.")


def _flag(effects: dict[int, metrics.MemoryEffect], look: HarmLook, flag) -> list[int]:
    p_values = metrics.harm_p_values(effects)
    harmful = metrics.harmful_memories(effects, look=look.number, looks=look.planned)
    return [pk for pk in harmful if flag(pk, _flag_note(effects[pk], p_values[pk], look, len(p_values)))]


def bank_harmful_flag(*, bank, look: HarmLook = HarmLook()) -> list[int]:
    """Flag for review the Orbs of the bank, not flagged yet, that this look finds to lower success;
    nothing is deleted or rejected. Returns the Orbs flagged now."""
    effects = orb_effects_compute(orb_ids=list(_bank_orbs(bank).filter(flagged_at__isnull=True,
                                                                        pk__in=orbs_with_outcomes(bank=bank))
                                               .values_list("pk", flat=True)), episode_refs=look.episode_refs)
    return _flag(effects, look, lambda pk, note: orb_flag(orb_id=pk, note=note))


def bank_harmful_experiences_flag(*, bank, look: HarmLook = HarmLook()) -> list[int]:
    """The same for the bank's DMRM experiences. Returns the experiences flagged now."""
    effects = experience_effects_compute(experience_ids=list(
        bank.experiences.filter(flagged_at__isnull=True).values_list("pk", flat=True)), episode_refs=look.episode_refs)
    return _flag(effects, look, lambda pk, note: experience_flag(experience_id=pk, note=note))
