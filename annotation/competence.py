"""Annotator competence and spammer flags (no Django).

Competence is estimated with a MACE-style EM (the model of Hovy et al., 2013,
implemented here from its description): each annotator j either knows the
item's true label (with probability theta_j) or answers from their own spam
distribution xi_j. theta_j is the competence shown on the results page; a
random clicker has theta near 0 whatever their agreement happens to be.

Votes are in source terms (human/simulated/tie). An annotator who always
clicks "A" looks random in source terms, because sides are balanced per item,
so the competence catches them too; the position test names the cause.
"""
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest

# Flag thresholds, chosen with tests/annotation/test_competence.py's planted
# spammers: honest annotators right 75 %+ of the time sit above both.
SPAM_COMPETENCE = 0.3
POSITION_P_VALUE = 0.001
_ITERATIONS = 50
_SMOOTHING = 0.5
# A Dirichlet prior pulling each spam distribution towards uniform: without it, EM can
# explain a skewed label set (most items go one way) as everyone spamming that label.
_SPAM_PRIOR = 10.0


@dataclass(frozen=True)
class Vote:
    unit: str  # one question: an item and a criterion
    annotator: str
    label: str


def mace_competence(votes: Sequence[Vote]) -> dict[str, float]:
    """theta_j per annotator by EM; units answered by one annotator carry no information and are skipped."""
    by_unit = defaultdict(set)
    for vote in votes:
        by_unit[vote.unit].add(vote.annotator)
    shared = [vote for vote in votes if len(by_unit[vote.unit]) > 1]
    people = sorted({vote.annotator for vote in shared})
    labels = sorted({vote.label for vote in shared})
    if len(people) < 2 or len(labels) < 2:
        return {}
    units = {unit: position for position, unit in enumerate(sorted({vote.unit for vote in shared}))}
    coded = _Coded(
        unit=np.array([units[vote.unit] for vote in shared]),
        person=np.array([people.index(vote.annotator) for vote in shared]),
        label=np.array([labels.index(vote.label) for vote in shared]), units=len(units), labels=len(labels))
    theta, spam = np.full(len(people), 0.7), np.full((len(people), len(labels)), 1 / len(labels))
    for _ in range(_ITERATIONS):
        theta, spam = _mace_step(coded, theta, spam)
    return {name: float(theta[position]) for position, name in enumerate(people)}


@dataclass(frozen=True)
class _Coded:
    unit: np.ndarray
    person: np.ndarray
    label: np.ndarray
    units: int
    labels: int


def _mace_step(coded: _Coded, theta: np.ndarray, spam: np.ndarray):
    """One EM round, vectorised over votes. The pseudo-counts keep theta inside
    (0, 1) and every spam share positive, so no vote has likelihood zero."""
    chance = (1 - theta[coded.person]) * spam[coded.person, coded.label]
    factors = np.repeat(chance[:, None], coded.labels, axis=1)
    factors[np.arange(len(chance)), coded.label] += theta[coded.person]
    log_likelihood = np.zeros((coded.units, coded.labels))
    np.add.at(log_likelihood, coded.unit, np.log(factors))
    posterior = np.exp(log_likelihood - log_likelihood.max(axis=1, keepdims=True))
    posterior /= posterior.sum(axis=1, keepdims=True)
    honest = posterior[coded.unit, coded.label] * theta[coded.person] / (theta[coded.person] + chance)
    people = len(theta)
    knew = np.bincount(coded.person, weights=honest, minlength=people) + _SMOOTHING
    answered = np.bincount(coded.person, minlength=people) + 2 * _SMOOTHING
    guessed = np.full(spam.shape, _SPAM_PRIOR)
    np.add.at(guessed, (coded.person, coded.label), 1 - honest)
    return knew / answered, guessed / guessed.sum(axis=1, keepdims=True)


def position_test(a_count: int, decided: int) -> float | None:
    """Two-sided binomial p-value that an annotator picks side A half the time;
    sides are balanced, so an honest annotator's share of A sits near 1/2."""
    return binomtest(a_count, decided, 0.5).pvalue if decided else None


def spammer_reasons(*, competence: float | None, a_count: int, decided: int) -> list[str]:
    """Why an annotator looks like a spammer; empty when they do not."""
    reasons = []
    if competence is not None and competence < SPAM_COMPETENCE:
        reasons.append(f"competence {competence:.2f} < {SPAM_COMPETENCE}")
    p_value = position_test(a_count, decided)
    if p_value is not None and p_value < POSITION_P_VALUE:
        reasons.append(f"side A {a_count}/{decided} (p < {POSITION_P_VALUE})")
    return reasons
