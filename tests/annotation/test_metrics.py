"""Fleiss' kappa, win rates and majority agreement against worked examples."""
import pytest

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
