"""The simulated user checked against people on the same conversations (no Django).

For each conversation the simulated user gave a satisfaction score (1-10), a
like/dislike/none action and, when known, the probability of a like; people
gave their own score and action. Every figure comes with its human-human
ceiling: the same figure for one person against the other people, which is as
close as the simulator can hope to get.
"""
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import fmean

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from annotation.metrics import bootstrap_sums, majority_label

LIKE, DISLIKE, NONE = "like", "dislike", "none"
ACTIONS = (LIKE, DISLIKE, NONE)
SCORES = tuple(range(1, 11))
BINS = 10


@dataclass(frozen=True)
class Conversation:
    simulated_score: int | None
    simulated_action: str | None
    simulated_like_probability: float | None
    human: tuple[tuple[int, str], ...] = field(default_factory=tuple)  # (score, action) per person


def _others(ratings: tuple, index: int) -> tuple:
    return ratings[:index] + ratings[index + 1:]


# --- the figures: each conversation contributes a vector of sums, so intervals bootstrap fast ---

def _mae_parts(conversations: Sequence[Conversation]) -> np.ndarray:
    """Per conversation: [|simulated score - mean human score|, 1], or zeros without both."""
    return np.array([[abs(c.simulated_score - fmean(s for s, _ in c.human)), 1.0]
                     if c.simulated_score is not None and c.human else [0.0, 0.0] for c in conversations])


def _mae_ceiling_parts(conversations: Sequence[Conversation]) -> np.ndarray:
    """Per conversation: [sum over people of |their score - the others' mean|, people compared]."""
    return np.array([[sum(abs(c.human[i][0] - fmean(s for s, _ in _others(c.human, i))) for i in range(len(c.human))),
                      len(c.human)] if len(c.human) > 1 else [0.0, 0.0] for c in conversations])


def _ratio(sums: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sums[:, 1] > 0, sums[:, 0] / np.where(sums[:, 1] > 0, sums[:, 1], 1), np.nan)


def _simulated_action_pairs(c: Conversation) -> list[tuple[str, str]]:
    majority = majority_label([action for _, action in c.human])
    return [(c.simulated_action, majority)] if c.simulated_action and majority is not None else []


def _ceiling_action_pairs(c: Conversation) -> list[tuple[str, str]]:
    """Each person against the strict majority of the others."""
    return [(c.human[i][1], majority) for i in range(len(c.human)) if len(c.human) > 1
            if (majority := majority_label([action for _, action in _others(c.human, i)])) is not None]


def _confusion_parts(conversations: Sequence[Conversation], pairs_of) -> np.ndarray:
    """Per conversation: its (first, second) action pairs as a flattened 3 x 3 count matrix."""
    rows = np.zeros((len(conversations), len(ACTIONS) ** 2))
    for row, conversation in enumerate(conversations):
        for first, second in pairs_of(conversation):
            rows[row, ACTIONS.index(first) * len(ACTIONS) + ACTIONS.index(second)] += 1
    return rows


def _cohen_finish(sums: np.ndarray) -> np.ndarray:
    matrices = sums.reshape(len(sums), len(ACTIONS), len(ACTIONS))
    total = matrices.sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = np.trace(matrices, axis1=1, axis2=2) / total
        chance = (matrices.sum(axis=2) * matrices.sum(axis=1)).sum(axis=1) / (total * total)
        kappa = (observed - chance) / (1 - chance)
    return np.where((total > 0) & (chance < 1 - 1e-12), kappa, np.nan)


def _simulated_predictions(c: Conversation) -> list[tuple[float, bool]]:
    """(simulated like probability, did this person like it) for every person's rating."""
    if c.simulated_like_probability is None:
        return []
    return [(c.simulated_like_probability, action == LIKE) for _, action in c.human]


def _ceiling_predictions(c: Conversation) -> list[tuple[float, bool]]:
    """The share of the other people who liked it, as a prediction of this person's like."""
    if len(c.human) < 2:
        return []
    return [(sum(a == LIKE for _, a in _others(c.human, i)) / (len(c.human) - 1), c.human[i][1] == LIKE)
            for i in range(len(c.human))]


def like_predictions(conversations: Sequence[Conversation]) -> list[tuple[float, bool]]:
    return [pair for c in conversations for pair in _simulated_predictions(c)]


def like_predictions_ceiling(conversations: Sequence[Conversation]) -> list[tuple[float, bool]]:
    return [pair for c in conversations for pair in _ceiling_predictions(c)]


def _bin(p: float, bins: int = BINS) -> int:
    return min(int(p * bins), bins - 1)  # 1.0 goes in the last bin


def reliability_bins(predictions: Sequence[tuple[float, bool]], bins: int = BINS) -> list[dict]:
    """Equal-width bins of predicted probability: mean prediction, observed share, count."""
    buckets: dict[int, list[tuple[float, bool]]] = {}
    for p, y in predictions:
        buckets.setdefault(_bin(p, bins), []).append((p, y))
    return [{"low": index / bins, "high": (index + 1) / bins, "n": len(inside),
             "predicted": fmean(p for p, _ in inside), "observed": fmean(y for _, y in inside)}
            for index, inside in sorted(buckets.items())]


def _calibration_parts(conversations: Sequence[Conversation], predictions_of) -> np.ndarray:
    """Per conversation and bin: [count, sum of predictions, sum of outcomes], flattened."""
    rows = np.zeros((len(conversations), 3 * BINS))
    for row, conversation in enumerate(conversations):
        for p, y in predictions_of(conversation):
            rows[row, 3 * _bin(p): 3 * _bin(p) + 3] += (1.0, p, float(y))
    return rows


def _ece_finish(sums: np.ndarray) -> np.ndarray:
    """ECE = sum over bins of (n_b / N) |mean prediction - observed share| = sum |Σp - Σy| / N."""
    per_bin = sums.reshape(len(sums), BINS, 3)
    total = per_bin[:, :, 0].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, np.abs(per_bin[:, :, 1] - per_bin[:, :, 2]).sum(axis=1) / total, np.nan)


# (key, label, simulated parts, ceiling parts, finish, better)
FIGURES = (
    ("score_mae", "Satisfaction score MAE (1-10)", _mae_parts, _mae_ceiling_parts, _ratio, "lower"),
    ("action_kappa", "κ, like/dislike/none vs human majority",
     lambda cs: _confusion_parts(cs, _simulated_action_pairs), lambda cs: _confusion_parts(cs, _ceiling_action_pairs),
     _cohen_finish, "higher"),
    ("like_ece", "Expected calibration error of P(like)",
     lambda cs: _calibration_parts(cs, _simulated_predictions), lambda cs: _calibration_parts(cs, _ceiling_predictions),
     _ece_finish, "lower"),
)


def _point(parts: np.ndarray, finish) -> float | None:
    if not len(parts):
        return None
    value = float(finish(parts.sum(axis=0, keepdims=True))[0])
    return value if np.isfinite(value) else None


def score_mae(conversations: Sequence[Conversation]) -> float | None:
    """Mean |simulated score - mean human score| on the 1-10 scale."""
    return _point(_mae_parts(conversations), _ratio)


def score_mae_ceiling(conversations: Sequence[Conversation]) -> float | None:
    """Each person against the mean of the others on the same conversation."""
    return _point(_mae_ceiling_parts(conversations), _ratio)


def action_kappa(conversations: Sequence[Conversation]) -> float | None:
    """Cohen's kappa, simulated action against the human strict-majority action."""
    return _point(FIGURES[1][2](conversations), _cohen_finish)


def action_kappa_ceiling(conversations: Sequence[Conversation]) -> float | None:
    return _point(FIGURES[1][3](conversations), _cohen_finish)


def expected_calibration_error(predictions: Sequence[tuple[float, bool]]) -> float | None:
    """Sum over bins of (bin share) x |mean prediction - observed share|."""
    return _point(_calibration_parts([None], lambda _: predictions), _ece_finish) if predictions else None


def fidelity_summary(conversations: Sequence[Conversation], *, reps: int = 1000, seed: int = 0) -> dict:
    """Every figure with its bootstrap interval over conversations, beside the human-human ceiling."""
    figures = [{"key": key, "label": label, "better": better,
                "simulated": bootstrap_sums(simulated(conversations), finish, reps=reps, seed=seed).as_dict(),
                "ceiling": bootstrap_sums(ceiling(conversations), finish, reps=reps, seed=seed).as_dict()}
               for key, label, simulated, ceiling, finish, better in FIGURES]
    return {"conversations": len(conversations), "figures": figures,
            "reliability": reliability_bins(like_predictions(conversations)),
            "reliability_ceiling": reliability_bins(like_predictions_ceiling(conversations)),
            "mean_scores": _mean_scores(conversations)}


def _mean_scores(conversations: Sequence[Conversation]) -> dict:
    """Whether the simulator is "uniformly more positive": mean scores side by side."""
    simulated = [c.simulated_score for c in conversations if c.simulated_score is not None and c.human]
    human = [fmean(s for s, _ in c.human) for c in conversations if c.simulated_score is not None and c.human]
    return {"simulated": fmean(simulated) if simulated else None, "human": fmean(human) if human else None}


# --- refitting the simulated user's action model to people ---

@dataclass(frozen=True)
class ActionFit:
    """The feedback action model's curves fitted to (score, human action) pairs.
    `params` has the field names of evaluation's FeedbackParams / ActionParams
    (s0_like, k_like, like_rate, s0_dislike, k_dislike, dislike_rate,
    distribution), so `calibrate(distribution, ActionParams(...))` reproduces
    `c_like` and `c_dislike` exactly."""

    n: int
    params: dict
    c_like: float
    c_dislike: float
    rows: list[dict]


def action_fit(pairs: Sequence[tuple[int, str]]) -> ActionFit:
    """Maximum-likelihood P(L|S) = c_L σ(k_L(S − S0L)) and P(D|S) = c_D σ(−k_D(S − S0D))
    from (simulated score, human action) pairs; each curve is fitted on its own
    like-or-not (dislike-or-not) outcome."""
    scores = np.array([_checked_score(score) for score, _ in pairs], dtype=float)
    actions = [action for _, action in pairs]
    if not len(scores) or set(actions) - set(ACTIONS):
        raise ValueError(f"need (score 1-10, action in {ACTIONS}) pairs; got {len(scores)} pairs")
    c_like, k_like, s0_like = _curve_fit(scores, np.array([a == LIKE for a in actions]), rising=True)
    c_dislike, k_dislike, s0_dislike = _curve_fit(scores, np.array([a == DISLIKE for a in actions]), rising=False)
    distribution = np.bincount(scores.astype(int), minlength=11)[1:] / len(scores)
    like = c_like * expit(k_like * (np.array(SCORES) - s0_like))
    dislike = c_dislike * expit(-k_dislike * (np.array(SCORES) - s0_dislike))
    params = {"s0_like": s0_like, "k_like": k_like, "like_rate": float(distribution @ like),
              "s0_dislike": s0_dislike, "k_dislike": k_dislike, "dislike_rate": float(distribution @ dislike),
              "distribution": tuple(float(p) for p in distribution)}
    return ActionFit(n=len(scores), params=params, c_like=c_like, c_dislike=c_dislike,
                     rows=_fit_rows(scores, actions, like, dislike))


def _checked_score(score) -> int:
    if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 10:
        raise ValueError(f"score must be an integer from 1 to 10, got {score!r}")
    return score


def _curve_fit(scores: np.ndarray, hits: np.ndarray, *, rising: bool) -> tuple[float, float, float]:
    """(c, k, S0) maximising the Bernoulli likelihood; bounds keep c in (0, 1) and
    k, S0 inside FeedbackParams' limits."""
    sign = 1.0 if rising else -1.0

    def loss(theta):
        c, k, s0 = theta
        p = np.clip(c * expit(sign * k * (scores - s0)), 1e-9, 1 - 1e-9)
        return -float(np.sum(hits * np.log(p) + (1 - hits) * np.log(1 - p)))

    start = (max(float(hits.mean()), 0.01), 1.5, 7.5 if rising else 4.5)
    found = minimize(loss, start, method="L-BFGS-B", bounds=[(1e-6, 1 - 1e-6), (0.05, 20.0), (-20.0, 30.0)])
    c, k, s0 = (float(value) for value in found.x)
    return c, k, s0


def _fit_rows(scores: np.ndarray, actions: list[str], like: np.ndarray, dislike: np.ndarray) -> list[dict]:
    rows = []
    for score in SCORES:
        seen = Counter(action for s, action in zip(scores, actions) if s == score)
        n = sum(seen.values())
        rows.append({"score": score, "n": n, "p_like": float(like[score - 1]), "p_dislike": float(dislike[score - 1]),
                     "p_none": float(1 - like[score - 1] - dislike[score - 1]),
                     "observed_like": seen[LIKE] / n if n else None,
                     "observed_dislike": seen[DISLIKE] / n if n else None})
    return rows
