"""Competence (MACE-style EM) and spammer flags on simulated studies with planted
spammers (no Django, no database)."""
import random

import pytest

from annotation.competence import Vote, mace_competence, position_test, spammer_reasons
from annotation.metrics import HUMAN, SIMULATED

CRITERIA = ("naturalness", "relevance", "overall_quality")


def _sides(n: int, draw: random.Random) -> list[bool]:
    """Balanced like the allocation: alternate, first side by coin, so no item has all on one side."""
    first = draw.random() < 0.5
    sides = [first if index % 2 == 0 else not first for index in range(n)]
    draw.shuffle(sides)
    return sides


def _study(seed: int, *, items: int = 100, honest: int = 7, per_item: int = 3):
    """Votes of `honest` annotators (75-95 % right), one random clicker and one always-A clicker."""
    draw = random.Random(seed)
    people = {f"honest-{i}": draw.uniform(0.75, 0.95) for i in range(honest)} | {"random": None, "always-a": None}
    votes, a_counts = [], {name: [0, 0] for name in people}
    for item in range(items):
        overall = draw.choice((HUMAN, SIMULATED))
        truths = {key: overall if draw.random() < 0.7 else draw.choice((HUMAN, SIMULATED)) for key in CRITERIA}
        for name, side_a_is_human in zip(draw.sample(sorted(people), per_item), _sides(per_item, draw)):
            labels = {key: _vote(name, people[name], truth, side_a_is_human, draw) for key, truth in truths.items()}
            votes.extend(Vote(unit=f"{item}:{key}", annotator=name, label=label) for key, label in labels.items())
            # Position is tested per judgment (the side most of its criteria chose), as the results page does.
            a_votes = sum((label == HUMAN) == side_a_is_human for label in labels.values())
            a_counts[name][0] += a_votes * 2 > len(labels)
            a_counts[name][1] += 1
    return votes, a_counts


def _vote(name: str, accuracy, truth: str, side_a_is_human: bool, draw: random.Random) -> str:
    if name == "always-a":
        return HUMAN if side_a_is_human else SIMULATED
    if name == "random":
        return draw.choice((HUMAN, SIMULATED))
    other = SIMULATED if truth == HUMAN else HUMAN
    return truth if draw.random() < accuracy else other


def _flagged(seed: int) -> dict[str, bool]:
    votes, a_counts = _study(seed)
    competence = mace_competence(votes)
    return {name: bool(spammer_reasons(competence=competence.get(name), a_count=a, decided=n))
            for name, (a, n) in a_counts.items()}


def test_it_flags_planted_spammers_and_spares_honest_annotators():
    runs = [_flagged(seed) for seed in range(100)]
    spammers = [flag for run in runs for name, flag in run.items() if not name.startswith("honest")]
    honest = [flag for run in runs for name, flag in run.items() if name.startswith("honest")]
    spam_rate, honest_rate = sum(spammers) / len(spammers), sum(honest) / len(honest)
    print(f"spammers flagged {spam_rate:.1%} of {len(spammers)}, honest flagged {honest_rate:.1%} of {len(honest)}")
    assert spam_rate >= 0.95
    assert honest_rate <= 0.05


def test_it_gives_a_perfect_annotator_high_competence_and_a_random_one_low():
    votes, _ = _study(7, honest=5)
    competence = mace_competence(votes)
    best = max((name for name in competence if name.startswith("honest")), key=competence.get)
    assert competence[best] > 0.5 > competence["random"]


def test_it_needs_shared_units_for_competence():
    assert mace_competence([Vote("1:x", "ann", HUMAN), Vote("2:x", "bob", SIMULATED)]) == {}


def test_it_tests_the_position_share_two_sided():
    assert position_test(30, 60) == pytest.approx(1.0)
    assert position_test(60, 60) < 1e-15
    assert position_test(0, 60) == position_test(60, 60)
    assert position_test(0, 0) is None


def test_it_names_why_an_annotator_is_flagged():
    reasons = spammer_reasons(competence=0.05, a_count=60, decided=60)
    assert len(reasons) == 2 and "competence" in reasons[0] and reasons[1].startswith("side A 60/60")
    assert spammer_reasons(competence=0.8, a_count=31, decided=60) == []


def test_it_keeps_unanimous_annotators_competent_when_one_label_dominates():
    """Every item truly "human": EM must not explain two agreeing annotators as spamming "human"."""
    draw = random.Random(1)
    votes = [Vote(str(item), name, label) for item in range(90)
             for name, label in (("h1", HUMAN), ("h2", HUMAN), ("r", draw.choice((HUMAN, SIMULATED))))]
    competence = mace_competence(votes)
    assert competence["h1"] > 0.8 and competence["r"] < 0.3
