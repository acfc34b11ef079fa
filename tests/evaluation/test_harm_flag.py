"""The harm flag's error control (evaluation.metrics.harmful_memories): under a simulated null, over a
run's ten trial ends and several memories, it flags a memory that does no harm at most as often as it
says; the uncorrected rule it replaced did not."""
import numpy as np
import pytest
from scipy import stats

from evaluation import metrics

LOOKS, MEMORIES, EPISODES_PER_LOOK, WITHHOLD = 10, 5, 40, 0.2


def _null_run(rng: np.random.Generator) -> list[dict[int, metrics.MemoryEffect]]:
    """The effects seen at each trial end of one run whose memories make no difference: each episode
    succeeds with its task's own chance, each memory is retrieved in 60 % of episodes and withheld at random."""
    counts = np.zeros((MEMORIES, 4), dtype=int)  # served, served successes, withheld, withheld successes
    looks = []
    for _ in range(LOOKS):
        success = rng.random(EPISODES_PER_LOOK) < rng.beta(2, 1.5, size=EPISODES_PER_LOOK)
        retrieved = rng.random((MEMORIES, EPISODES_PER_LOOK)) < 0.6
        withheld = rng.random((MEMORIES, EPISODES_PER_LOOK)) < WITHHOLD
        served, kept_out = retrieved & ~withheld, retrieved & withheld
        counts += np.stack([served.sum(1), (served & success).sum(1), kept_out.sum(1), (kept_out & success).sum(1)], 1)
        looks.append({memory: metrics.memory_effect_of_counts(served=int(row[0]), served_successes=int(row[1]),
                                                             withheld=int(row[2]), withheld_successes=int(row[3]))
                      for memory, row in enumerate(counts)})
    return looks


def test_the_harm_flag_errs_at_most_at_its_stated_rate_over_ten_looks_and_several_memories():
    rng = np.random.default_rng(7)
    runs = [_null_run(rng) for _ in range(500)]
    flagged = sum(any(metrics.harmful_memories(effects, look=look, looks=LOOKS)
                      for look, effects in enumerate(run, start=1)) for run in runs)
    uncorrected = sum(any(effect.harmful for effects in run for effect in effects.values()) for run in runs)
    assert flagged / len(runs) <= metrics.HARM_ERROR_RATE
    assert uncorrected / len(runs) > 2 * metrics.HARM_ERROR_RATE  # the rule it replaces: every look at 95 %


def test_fishers_one_sided_test_and_holms_step_down_by_hand():
    harmful = metrics.memory_effect_of_counts(served=30, served_successes=6, withheld=10, withheld_successes=8)
    neutral = metrics.memory_effect_of_counts(served=30, served_successes=15, withheld=10, withheld_successes=5)
    unknown = metrics.memory_effect_of_counts(served=5, served_successes=5, withheld=0, withheld_successes=0)
    p_values = metrics.harm_p_values({"h": harmful, "n": neutral, "u": unknown})
    assert set(p_values) == {"h", "n"}
    assert p_values["h"] == pytest.approx(stats.fisher_exact([[6, 24], [8, 2]], alternative="less").pvalue)
    assert metrics.holm_rejections({"a": 0.01, "b": 0.04, "c": 0.03}, alpha=0.05) == ["a"]
    assert metrics.holm_rejections({"a": 0.01, "b": 0.02, "c": 0.04}, alpha=0.05) == ["a", "b", "c"]
    assert metrics.look_error_rate(look=3, looks=10) == pytest.approx(0.005)
    assert metrics.look_error_rate(look=11, looks=10) == 0.0
    assert metrics.harmful_memories({"h": harmful, "n": neutral}, look=1, looks=1) == ["h"]
    assert metrics.harmful_memories({"h": harmful, "n": neutral}, look=1, looks=100) == []


def test_an_orb_cut_by_the_token_budget_counts_neither_as_served_nor_as_withheld():
    from evaluation.services.memory_effects import CUT, SERVED, WITHHELD, _effects
    outcomes = ([(1, f"e{n}", SERVED, False) for n in range(20)] + [(1, f"w{n}", WITHHELD, True) for n in range(10)]
                + [(1, f"c{n}", CUT, True) for n in range(15)]
                + [(1, "e0", CUT, False), (1, "c0", SERVED, True)])  # served on one turn: served in the episode
    effect = _effects(outcomes, [1])[1]
    assert (effect.served, effect.served_successes, effect.withheld, effect.withheld_successes) == (21, 1, 10, 10)
    only_in_run = _effects(outcomes, [1], episode_refs=frozenset({"e1", "w1", "c1"}))[1]
    assert (only_in_run.served, only_in_run.withheld) == (1, 1)
