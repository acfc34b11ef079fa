"""Agreement and preference statistics for the annotation study (no Django).

Labels are in *source* terms ("human", "simulated", "tie"), never in the A/B
terms an annotator saw: sides are randomised per assignment, so "A" means a
different feedback on each annotator's screen.
"""
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from statistics import median

import numpy as np

HUMAN = "human"
SIMULATED = "simulated"
TIE = "tie"
SOURCES = (HUMAN, SIMULATED)


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa (Fleiss 1971) for a subjects x categories table of counts.

    Every subject must have been rated by the same number n >= 2 of raters.
    Returns None when kappa is undefined: no subjects, or every rating fell in
    one category (chance agreement is then 1 and the formula divides by zero).
    """
    if not counts:
        return None
    raters = _raters_per_subject(counts)
    subjects = len(counts)
    total = subjects * raters
    category_shares = [sum(column) / total for column in zip(*counts)]
    chance = sum(share * share for share in category_shares)
    if chance >= 1.0:
        return None
    observed = sum(_subject_agreement(row, raters) for row in counts) / subjects
    return (observed - chance) / (1.0 - chance)


def _raters_per_subject(counts: Sequence[Sequence[int]]) -> int:
    sizes = {sum(row) for row in counts}
    if len(sizes) != 1:
        raise ValueError(f"every subject needs the same number of ratings; got {sorted(sizes)}")
    if len({len(row) for row in counts}) != 1:
        raise ValueError("every subject needs a count for every category")
    raters = sizes.pop()
    if raters < 2:
        raise ValueError("Fleiss' kappa needs at least two ratings per subject")
    if any(value < 0 for row in counts for value in row):
        raise ValueError("counts cannot be negative")
    return raters


def _subject_agreement(row: Sequence[int], raters: int) -> float:
    """P_i: the share of rater pairs that agree on this subject."""
    return (sum(value * value for value in row) - raters) / (raters * (raters - 1))


def counts_from_labels(subjects: Iterable[Sequence[str]], categories: Sequence[str]) -> list[list[int]]:
    """Turn each subject's list of labels into a row of per-category counts."""
    index = {category: position for position, category in enumerate(categories)}
    table = []
    for labels in subjects:
        row = [0] * len(categories)
        for label in labels:
            if label not in index:
                raise ValueError(f"label {label!r} is not one of {list(categories)}")
            row[index[label]] += 1
        table.append(row)
    return table


@dataclass(frozen=True)
class WinRates:
    """How often each source was preferred. Rates are shares of all judgments
    (ties included, so the three add up to 1); `simulated_vs_human` leaves ties out."""

    total: int
    simulated: int
    human: int
    ties: int

    def _share(self, count: int) -> float | None:
        return count / self.total if self.total else None

    @property
    def simulated_rate(self) -> float | None:
        return self._share(self.simulated)

    @property
    def human_rate(self) -> float | None:
        return self._share(self.human)

    @property
    def tie_rate(self) -> float | None:
        return self._share(self.ties)

    @property
    def simulated_vs_human(self) -> float | None:
        decided = self.simulated + self.human
        return self.simulated / decided if decided else None

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "simulated_rate": self.simulated_rate,
            "human_rate": self.human_rate,
            "tie_rate": self.tie_rate,
            "simulated_vs_human": self.simulated_vs_human,
        }


def win_rates(preferences: Iterable[str]) -> WinRates:
    tally = Counter(preferences)
    unknown = set(tally) - {HUMAN, SIMULATED, TIE}
    if unknown:
        raise ValueError(f"unknown preference labels: {sorted(unknown)}")
    return WinRates(
        total=sum(tally.values()), simulated=tally[SIMULATED], human=tally[HUMAN], ties=tally[TIE]
    )


def majority_label(labels: Sequence[str]) -> str | None:
    """The label more than half of the raters chose, or None without a strict majority."""
    if not labels:
        return None
    label, count = Counter(labels).most_common(1)[0]
    return label if count * 2 > len(labels) else None


def majority_agreement(pairs: Iterable[tuple[str, str | None]]) -> tuple[int, int]:
    """(agreements, comparisons) over (own label, item majority) pairs;
    items without a majority are not compared."""
    compared = [(own, majority) for own, majority in pairs if majority is not None]
    return sum(1 for own, majority in compared if own == majority), len(compared)


def median_or_none(values: Sequence[float]) -> float | None:
    return median(values) if values else None


def krippendorff_alpha_nominal(units: Iterable[Sequence[str | None]]) -> float | None:
    """Krippendorff's alpha for nominal labels; each unit lists its raters' labels
    (None or missing raters allowed). Units with fewer than two labels are not
    pairable and drop out. None when undefined (no pairable unit or one label only)."""
    coincidences: Counter = Counter()
    for unit in units:
        labels = [label for label in unit if label is not None]
        if len(labels) < 2:
            continue
        tally = Counter(labels)
        for first, count_first in tally.items():
            for second, count_second in tally.items():
                pairs = count_first * (count_second - (first == second))
                coincidences[first, second] += pairs / (len(labels) - 1)
    return _alpha_from_coincidences(coincidences)


def _alpha_from_coincidences(coincidences: Counter) -> float | None:
    margins: Counter = Counter()
    for (first, _), value in coincidences.items():
        margins[first] += value
    total = sum(margins.values())
    if total <= 1:
        return None
    observed = sum(value for (first, second), value in coincidences.items() if first != second) / total
    expected = (total * total - sum(m * m for m in margins.values())) / (total * (total - 1))
    return None if expected == 0 else 1.0 - observed / expected


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's kappa between two raters over (first, second) label pairs; None
    when chance agreement is 1 (both always gave the same single label)."""
    if not pairs:
        return None
    total = len(pairs)
    observed = sum(1 for first, second in pairs if first == second) / total
    firsts, seconds = Counter(first for first, _ in pairs), Counter(second for _, second in pairs)
    chance = sum(firsts[label] * seconds[label] for label in firsts) / (total * total)
    return None if chance >= 1.0 else (observed - chance) / (1.0 - chance)


@dataclass(frozen=True)
class Interval:
    """A point estimate with a 95 % interval; None parts mean undefined."""

    value: float | None
    low: float | None
    high: float | None
    n: int

    def as_dict(self) -> dict:
        return asdict(self)


def bootstrap_sums(parts, finish, *, reps: int = 1000, seed: int = 0, level: float = 0.95) -> Interval:
    """Percentile bootstrap over units (items or conversations, resampled with
    replacement), for a statistic that reads only the sum of per-unit vectors
    (`parts`, units x k): a resample's sum is a weighted sum, so all resamples
    are one matrix product, fast for thousands of items. `finish` maps sums
    (m x k) to m estimates, NaN where undefined; undefined resamples are skipped."""
    parts = np.asarray(parts, dtype=float)
    if parts.ndim != 2 or len(parts) == 0:
        return Interval(None, None, None, 0)
    value = float(finish(parts.sum(axis=0, keepdims=True))[0])
    if not np.isfinite(value) or len(parts) < 2:
        return Interval(value if np.isfinite(value) else None, None, None, len(parts))
    weights = np.random.default_rng(seed).multinomial(len(parts), np.full(len(parts), 1 / len(parts)), size=reps)
    estimates = finish(weights @ parts)
    estimates = estimates[np.isfinite(estimates)]
    if len(estimates) < reps / 2:
        return Interval(value, None, None, len(parts))
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(estimates, [tail, 100 - tail])
    return Interval(value, float(low), float(high), len(parts))


def _divide(top, bottom):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(bottom != 0, top / np.where(bottom != 0, bottom, 1), np.nan)


def fleiss_parts(units: Sequence[Sequence[str]], categories: Sequence[str]) -> np.ndarray:
    """Per item: [P_i, count of each category, 1], for bootstrap_sums with fleiss_finish."""
    counts = np.asarray(counts_from_labels(units, categories), dtype=float)
    raters = counts.sum(axis=1, keepdims=True)
    agreement = ((counts ** 2).sum(axis=1, keepdims=True) - raters) / (raters * (raters - 1))
    return np.hstack([agreement, counts, np.ones_like(raters)])


def fleiss_finish(sums: np.ndarray, raters: int) -> np.ndarray:
    items = sums[:, -1]
    shares = sums[:, 1:-1] / (items * raters)[:, None]
    chance = (shares ** 2).sum(axis=1)
    kappa = _divide(sums[:, 0] / items - chance, 1 - chance)
    return np.where(chance >= 1 - 1e-12, np.nan, kappa)


def alpha_parts(units: Sequence[Sequence[str | None]], categories: Sequence[str]) -> np.ndarray:
    """Per item: its coincidence matrix (categories x categories), flattened, for alpha_finish."""
    index = {category: position for position, category in enumerate(categories)}
    rows = []
    for unit in units:
        labels = [index[label] for label in unit if label is not None]
        matrix = np.zeros((len(categories), len(categories)))
        if len(labels) >= 2:
            tally = np.bincount(labels, minlength=len(categories)).astype(float)
            matrix = (np.outer(tally, tally) - np.diag(tally)) / (len(labels) - 1)
        rows.append(matrix.ravel())
    return np.array(rows).reshape(len(rows), len(categories) ** 2)


def alpha_finish(sums: np.ndarray) -> np.ndarray:
    size = int(round(sums.shape[1] ** 0.5))
    matrices = sums.reshape(len(sums), size, size)
    margins = matrices.sum(axis=2)
    total = margins.sum(axis=1)
    disagreement = total - np.trace(matrices, axis1=1, axis2=2)
    expected = total * total - (margins ** 2).sum(axis=1)
    return np.where(total > 1, 1 - _divide((total - 1) * disagreement, expected), np.nan)


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> Interval:
    """A share with its Wilson score interval (behaves at 0 % and 100 %, unlike the Wald one)."""
    if trials == 0:
        return Interval(None, None, None, 0)
    share = successes / trials
    centre = (share + z * z / (2 * trials)) / (1 + z * z / trials)
    spread = z * ((share * (1 - share) / trials + z * z / (4 * trials * trials)) ** 0.5) / (1 + z * z / trials)
    return Interval(share, max(0.0, centre - spread), min(1.0, centre + spread), trials)
