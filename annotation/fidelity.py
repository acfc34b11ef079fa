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

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from annotation.metrics import bootstrap_interval, cohen_kappa, majority_label

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


# --- the figures, each a function of a list of conversations (so it can be bootstrapped) ---

def score_mae(conversations: Sequence[Conversation]) -> float | None:
    """Mean |simulated score - mean human score| on the 1-10 scale."""
    errors = [abs(c.simulated_score - np.mean([score for score, _ in c.human]))
              for c in conversations if c.simulated_score is not None and c.human]
    return float(np.mean(errors)) if errors else None


def score_mae_ceiling(conversations: Sequence[Conversation]) -> float | None:
    """Each person against the mean of the others on the same conversation."""
    errors = [abs(c.human[i][0] - np.mean([score for score, _ in _others(c.human, i)]))
              for c in conversations if len(c.human) > 1 for i in range(len(c.human))]
    return float(np.mean(errors)) if errors else None


def action_kappa(conversations: Sequence[Conversation]) -> float | None:
    """Cohen's kappa, simulated action against the human strict-majority action."""
    pairs = [(c.simulated_action, majority) for c in conversations if c.simulated_action
             if (majority := majority_label([action for _, action in c.human])) is not None]
    return cohen_kappa(pairs)


def action_kappa_ceiling(conversations: Sequence[Conversation]) -> float | None:
    """Each person against the strict majority of the others."""
    pairs = [(c.human[i][1], majority) for c in conversations if len(c.human) > 1 for i in range(len(c.human))
             if (majority := majority_label([action for _, action in _others(c.human, i)])) is not None]
    return cohen_kappa(pairs)


def like_predictions(conversations: Sequence[Conversation]) -> list[tuple[float, bool]]:
    """(simulated like probability, did this person like it) for every person's rating."""
    return [(c.simulated_like_probability, action == LIKE) for c in conversations
            if c.simulated_like_probability is not None for _, action in c.human]


def like_predictions_ceiling(conversations: Sequence[Conversation]) -> list[tuple[float, bool]]:
    """The share of the other people who liked it, as a prediction of this person's like."""
    return [(sum(a == LIKE for _, a in _others(c.human, i)) / (len(c.human) - 1), c.human[i][1] == LIKE)
            for c in conversations if len(c.human) > 1 for i in range(len(c.human))]


def reliability_bins(predictions: Sequence[tuple[float, bool]], bins: int = BINS) -> list[dict]:
    """Equal-width bins of predicted probability: mean prediction, observed share, count."""
    rows = []
    for index in range(bins):
        low, high = index / bins, (index + 1) / bins
        inside = [(p, y) for p, y in predictions if low <= p < high or (index == bins - 1 and p == 1.0)]
        if inside:
            rows.append({"low": low, "high": high, "n": len(inside), "predicted": float(np.mean([p for p, _ in inside])),
                         "observed": float(np.mean([y for _, y in inside]))})
    return rows


def expected_calibration_error(predictions: Sequence[tuple[float, bool]], bins: int = BINS) -> float | None:
    """Sum over bins of (bin share) x |mean prediction - observed share|."""
    if not predictions:
        return None
    return sum(row["n"] / len(predictions) * abs(row["predicted"] - row["observed"])
               for row in reliability_bins(predictions, bins))


def _ece(conversations):
    return expected_calibration_error(like_predictions(conversations))


def _ece_ceiling(conversations):
    return expected_calibration_error(like_predictions_ceiling(conversations))


FIGURES = (
    ("score_mae", "Satisfaction score MAE (1-10)", score_mae, score_mae_ceiling, "lower"),
    ("action_kappa", "κ, like/dislike/none vs human majority", action_kappa, action_kappa_ceiling, "higher"),
    ("like_ece", "Expected calibration error of P(like)", _ece, _ece_ceiling, "lower"),
)


def fidelity_summary(conversations: Sequence[Conversation], *, reps: int = 1000, seed: int = 0) -> dict:
    """Every figure with its bootstrap interval over conversations, beside the human-human ceiling."""
    figures = []
    for key, label, simulated, ceiling, better in FIGURES:
        figures.append({"key": key, "label": label, "better": better,
                        "simulated": bootstrap_interval(conversations, simulated, reps=reps, seed=seed).as_dict(),
                        "ceiling": bootstrap_interval(conversations, ceiling, reps=reps, seed=seed).as_dict()})
    return {"conversations": len(conversations), "figures": figures,
            "reliability": reliability_bins(like_predictions(conversations)),
            "reliability_ceiling": reliability_bins(like_predictions_ceiling(conversations)),
            "mean_scores": _mean_scores(conversations)}


def _mean_scores(conversations: Sequence[Conversation]) -> dict:
    """Whether the simulator is "uniformly more positive": mean scores side by side."""
    simulated = [c.simulated_score for c in conversations if c.simulated_score is not None and c.human]
    human = [np.mean([s for s, _ in c.human]) for c in conversations if c.simulated_score is not None and c.human]
    return {"simulated": float(np.mean(simulated)) if simulated else None,
            "human": float(np.mean(human)) if human else None}


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
