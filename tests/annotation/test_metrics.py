"""Fleiss' kappa, win rates and majority agreement against worked examples."""
import random

import pytest

from annotation import metrics
from annotation.metrics import (
    counts_from_labels,
    fleiss_kappa,
    majority_agreement,
    majority_label,
    median_or_none,
    win_rates,
)

# Wikipedia's "Fleiss' kappa" worked example: 10 subjects, 14 raters, 5 categories.
# Published: P-bar = 0.378, P-bar-e = 0.213, kappa = 0.210.
WIKIPEDIA_TABLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_it_matches_the_published_worked_example():
    assert fleiss_kappa(WIKIPEDIA_TABLE) == pytest.approx(0.2099, abs=5e-4)


def test_it_gives_one_for_perfect_agreement():
    assert fleiss_kappa([[3, 0], [0, 3], [3, 0]]) == pytest.approx(1.0)


def test_it_matches_a_hand_computed_case():
    # P-bar = (1 + 1/3 + 1) / 3 = 7/9; shares 5/9 and 4/9 give P-e = 41/81;
    # kappa = (7/9 - 41/81) / (1 - 41/81) = 22/40.
    assert fleiss_kappa([[3, 0], [2, 1], [0, 3]]) == pytest.approx(0.55)


def test_it_gives_minus_one_for_systematic_disagreement_of_two_raters():
    assert fleiss_kappa([[1, 1], [1, 1]]) == pytest.approx(-1.0)


def test_it_is_undefined_when_every_rating_is_in_one_category():
    assert fleiss_kappa([[3, 0], [3, 0]]) is None
    assert fleiss_kappa([]) is None


@pytest.mark.parametrize("table, message", [
    ([[3, 0], [2, 0]], "same number of ratings"),
    ([[1, 0], [0, 1]], "at least two ratings"),
    ([[3, 0], [1, 1, 1]], "every category"),
])
def test_it_rejects_malformed_tables(table, message):
    with pytest.raises(ValueError, match=message):
        fleiss_kappa(table)


def test_it_builds_count_rows_from_source_labels():
    labels = [["human", "simulated", "human"], ["tie", "tie", "simulated"]]
    assert counts_from_labels(labels, ("human", "simulated", "tie")) == [[2, 1, 0], [0, 1, 2]]
    with pytest.raises(ValueError, match="not one of"):
        counts_from_labels([["A"]], ("human", "simulated"))


def test_it_counts_ties_separately_in_win_rates():
    rates = win_rates(["simulated", "human", "simulated", "tie", "simulated"])
    assert (rates.total, rates.simulated, rates.human, rates.ties) == (5, 3, 1, 1)
    assert rates.simulated_rate == pytest.approx(0.6)
    assert rates.tie_rate == pytest.approx(0.2)
    assert rates.simulated_vs_human == pytest.approx(0.75)
    assert rates.as_dict()["human_rate"] == pytest.approx(0.2)


def test_it_reports_no_rate_without_judgments():
    rates = win_rates([])
    assert rates.simulated_rate is None and rates.simulated_vs_human is None
    assert win_rates(["tie"]).simulated_vs_human is None
    with pytest.raises(ValueError, match="unknown"):
        win_rates(["A"])


def test_it_needs_a_strict_majority():
    assert majority_label(["human", "human", "simulated"]) == "human"
    assert majority_label(["human", "simulated", "tie"]) is None
    assert majority_label(["human", "simulated"]) is None
    assert majority_label([]) is None


def test_it_counts_agreement_only_where_a_majority_exists():
    assert majority_agreement([("human", "human"), ("tie", "human"), ("human", None)]) == (1, 2)
    assert median_or_none([]) is None
    assert median_or_none([3.0, 1.0, 2.0]) == 2.0


# --- Krippendorff's alpha, Cohen's kappa, intervals ---

def test_it_computes_a_hand_worked_alpha():
    # Coincidences aa=2, ab=ba=1, bb=2: Do = 2/6, De = (36 - 9 - 9) / 30, alpha = 1 - (1/3) / 0.6.
    assert metrics.krippendorff_alpha_nominal([["a", "a"], ["a", "b"], ["b", "b"]]) == pytest.approx(4 / 9)


def test_it_matches_the_krippendorff_package_with_missing_ratings():
    krippendorff = pytest.importorskip("krippendorff")
    draw = random.Random(3)
    labels = ("human", "simulated", "tie")
    for _ in range(20):
        units = [[draw.choice(labels + (None,)) for _ in range(4)] for _ in range(25)]
        codes = [[float("nan") if label is None else labels.index(label) for label in unit] for unit in units]
        expected = krippendorff.alpha(reliability_data=list(map(list, zip(*codes))), level_of_measurement="nominal")
        assert metrics.krippendorff_alpha_nominal(units) == pytest.approx(expected)


def test_it_leaves_alpha_undefined_without_pairs_or_variety():
    assert metrics.krippendorff_alpha_nominal([["a"], [None, "b"]]) is None
    assert metrics.krippendorff_alpha_nominal([["a", "a"], ["a", "a"]]) is None


def test_it_computes_cohen_kappa_by_hand():
    # 10 pairs, 7 agree; marginals first (5 like, 5 none), second (6 like, 4 none): pe = (30 + 20) / 100.
    pairs = [("like", "like")] * 4 + [("like", "none")] + [("none", "like")] * 2 + [("none", "none")] * 3
    assert metrics.cohen_kappa(pairs) == pytest.approx((0.7 - 0.5) / 0.5)
    assert metrics.cohen_kappa([("like", "like")] * 3) is None


def test_it_agrees_with_fleiss_on_complete_data():
    """With every item rated by the same raters, alpha = kappa_Fleiss corrected for sample size (Krippendorff 2004)."""
    draw = random.Random(5)
    units = [[draw.choice(("human", "simulated")) for _ in range(3)] for _ in range(40)]
    kappa = metrics.fleiss_kappa(metrics.counts_from_labels(units, ("human", "simulated")))
    alpha = metrics.krippendorff_alpha_nominal(units)
    total = 40 * 3
    assert alpha == pytest.approx(1 - (1 - kappa) * (total - 1) / total)


def _kappa_interval(units, **options):
    parts = metrics.fleiss_parts(units, ("human", "simulated"))
    return metrics.bootstrap_sums(parts, lambda sums: metrics.fleiss_finish(sums, len(units[0])), **options)


def test_it_computes_kappa_and_alpha_from_per_item_sums():
    draw = random.Random(2)
    categories = ("human", "simulated", "tie")
    for _ in range(10):
        complete = [[draw.choice(categories) for _ in range(3)] for _ in range(30)]
        gappy = [[draw.choice(categories + (None,)) for _ in range(4)] for _ in range(30)]
        kappa = metrics.fleiss_finish(metrics.fleiss_parts(complete, categories).sum(0, keepdims=True), 3)[0]
        alpha = metrics.alpha_finish(metrics.alpha_parts(gappy, categories).sum(0, keepdims=True))[0]
        assert kappa == pytest.approx(metrics.fleiss_kappa(metrics.counts_from_labels(complete, categories)))
        assert alpha == pytest.approx(metrics.krippendorff_alpha_nominal(gappy))


def test_it_covers_the_true_kappa_about_95_percent_of_the_time():
    """Raters right with p = 0.8 on balanced items: population kappa = (2p - 1)^2 = 0.36."""
    draw = random.Random(11)
    covered = 0
    runs = 200
    for run in range(runs):
        truths = [draw.choice(("human", "simulated")) for _ in range(80)]
        units = [[truth if draw.random() < 0.8 else ("simulated" if truth == "human" else "human")
                  for _ in range(3)] for truth in truths]
        interval = _kappa_interval(units, reps=1000, seed=run)
        covered += interval.low <= 0.36 <= interval.high
    assert 0.88 <= covered / runs <= 0.99


def test_it_leaves_the_interval_open_when_the_statistic_is_undefined():
    interval = _kappa_interval([["human", "human"]] * 5)
    assert (interval.value, interval.low, interval.high, interval.n) == (None, None, None, 5)


def test_it_computes_wilson_intervals():
    interval = metrics.wilson_interval(0, 20)
    assert interval.value == 0 and interval.low == 0 and 0.15 < interval.high < 0.17
    middle = metrics.wilson_interval(50, 100)
    assert middle.low == pytest.approx(0.4038, abs=1e-3) and middle.high == pytest.approx(0.5962, abs=1e-3)
    assert metrics.wilson_interval(0, 0).value is None
