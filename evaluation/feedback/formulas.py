"""MemoryBench-style simulated user feedback formulas (plain Python, no Django).

Two parts, both documented with their tables in docs/FEEDBACK_MODEL.md:
- the metric path to a satisfaction score S in 1..10 (binary correctness, F1, shop reward);
- the action model: like / dislike / none and copy, sampled from S with probabilities
  calibrated so that, under a distribution of S, the global like and dislike rates hit targets.
"""
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from numbers import Real
from typing import NamedTuple, Protocol

import numpy as np
from scipy.special import expit

SCORES = tuple(range(1, 11))
LIKE_RATE = 0.065 * 0.86  # 6.5 % of users act on a response, 86:14 like-to-dislike
DISLIKE_RATE = 0.065 * 0.14
# Share of S = 1..10 in percent (MemoryBench's reference distribution); normalised before use.
DEFAULT_SCORE_DISTRIBUTION = (0.02, 0.93, 3.06, 1.93, 0.40, 2.56, 17.5, 32.12, 41.05, 0.43)
COPY_FACTOR = 4.0
# MemoryBench's task formats call a task's output long (its answers worth copying) past this many
# tokens; the copy rule applies per task family (FeedbackProfile.long_output), not per reply.
LONG_OUTPUT_TOKENS = 600
# The binary model's share of low (wrong) answers in the paper's example: with it, P(D|S_low) ≈ 2.1 %
# and P(L|S_high) ≈ 9.9 % under the default targets.
BINARY_LOW_SHARE = 0.433
# Fewer realised scores than this make a distribution that follows noise (and often leaves the
# like or dislike region empty): calibration then falls back to the reference distribution.
MIN_REALISED_SCORES = 20

CORRECT_SCORE = 9
INCORRECT_SCORE = 3
# (lowest F1, score), best first; anything under the last threshold scores F1_FLOOR_SCORE.
F1_TABLE = ((0.9, 10), (0.8, 9), (0.5, 6), (0.3, 4), (0.1, 2))
F1_FLOOR_SCORE = 1
# Partial credit weights: a customer cares most that the request was actually carried out.
SHOP_WEIGHTS = {"state": 2.0, "lookups": 1.0, "outputs": 1.0}

LIKE, DISLIKE, NONE = "like", "dislike", "none"


def check_score(score) -> int:
    """S is an integer in 1..10; anything else is a caller bug worth a clear message."""
    if isinstance(score, bool) or not isinstance(score, Real) or not float(score).is_integer() \
            or not 1 <= score <= 10:
        raise ValueError(f"score must be an integer from 1 to 10, got {score!r}")
    return int(score)


def check_scores(scores: Sequence) -> np.ndarray:
    """Vectorised check_score for long score lists (sampling 10^5 actions stays fast)."""
    values = np.asarray(scores)
    if values.dtype == bool or values.dtype.kind not in "iuf":
        raise ValueError(f"scores must be integers from 1 to 10, got {scores[:3]!r}...")
    bad = ~np.isfinite(values) | (values != np.round(values)) | (values < 1) | (values > 10)
    if bad.any():
        check_score(values[bad][0].item())
    return values.astype(int)


# --- satisfaction score from metrics (no LLM) -------------------------------------------------

def score_from_correctness(correct: bool) -> int:
    """Binary-correctness tasks: a correct answer satisfies, a wrong one clearly does not."""
    return CORRECT_SCORE if correct else INCORRECT_SCORE


def score_from_f1(f1: float) -> int:
    """F1-scored tasks: the first table row whose threshold F1 reaches (thresholds inclusive)."""
    if not 0.0 <= f1 <= 1.0:
        raise ValueError(f"f1 must lie between 0 and 1, got {f1!r}")
    return next((score for threshold, score in F1_TABLE if f1 >= threshold), F1_FLOOR_SCORE)


def score_from_shop(*, breakdown: Mapping[str, float | bool], turns: int, max_turns: int = 12,
                    tool_errors: int = 0) -> int:
    """Shop episodes: hallucination 1-2, failure 3-6 by weighted share of components met,
    success 8-10 (a point off each for tool errors and for using over half the turn budget)."""
    for name in ("grounded", "state"):
        if name not in breakdown:
            raise ValueError(f"breakdown is missing the {name!r} component")
    passed = {name: float(breakdown[name]) == 1.0 for name in SHOP_WEIGHTS if name in breakdown}
    if float(breakdown["grounded"]) != 1.0:
        # Invented facts are the worst outcome for a customer, even if the state came out right.
        return 2 if passed["state"] else 1
    if not all(passed.values()):
        share = sum(SHOP_WEIGHTS[n] for n, ok in passed.items() if ok) / sum(SHOP_WEIGHTS[n] for n in passed)
        return 3 + int(4 * share)
    return 10 - (tool_errors > 0) - (turns > max_turns // 2)


# --- action model -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ActionParams:
    """Shape of the like/dislike curves and the global rates they are calibrated to."""
    s0_like: float = 7.5
    s0_dislike: float = 4.5
    k_like: float = 1.5
    k_dislike: float = 1.5
    like_rate: float = LIKE_RATE
    dislike_rate: float = DISLIKE_RATE

    def __post_init__(self):
        for name in ("k_like", "k_dislike"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        for name in ("like_rate", "dislike_rate"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must lie between 0 and 1, got {getattr(self, name)!r}")
        if self.like_rate + self.dislike_rate > 1:
            raise ValueError("like_rate + dislike_rate must not exceed 1")


def like_shape(scores, params: ActionParams) -> np.ndarray:
    """σ(k_L(S − S0L)): rises with S; calibration scales it by c_L."""
    return expit(params.k_like * (np.asarray(scores, dtype=float) - params.s0_like))


def dislike_shape(scores, params: ActionParams) -> np.ndarray:
    """σ(−k_D(S − S0D)): falls with S; calibration scales it by c_D."""
    return expit(-params.k_dislike * (np.asarray(scores, dtype=float) - params.s0_dislike))


def normalise_distribution(weights: Sequence[float]) -> np.ndarray:
    """p(S) for S = 1..10 from non-negative weights (percentages or counts)."""
    p = np.asarray(weights, dtype=float)
    if p.shape != (10,):
        raise ValueError(f"score distribution needs 10 weights (S = 1..10), got {p.size}")
    if np.any(p < 0) or not np.all(np.isfinite(p)) or p.sum() <= 0:
        raise ValueError("score distribution weights must be finite, non-negative and not all zero")
    return p / p.sum()


@dataclass(frozen=True)
class ActionModel:
    """Calibrated like/dislike model; `distribution` is the p(S) it was calibrated under."""
    params: ActionParams
    c_like: float
    c_dislike: float
    distribution: tuple[float, ...] = field(repr=False)

    def p_like(self, score) -> float:
        return float(self.c_like * like_shape(check_score(score), self.params))

    def p_dislike(self, score) -> float:
        return float(self.c_dislike * dislike_shape(check_score(score), self.params))

    def p_none(self, score) -> float:
        return 1.0 - self.p_like(score) - self.p_dislike(score)

    def global_rates(self) -> tuple[float, float]:
        """(P(L), P(D)) under the calibration distribution: Σ_S p(S)·P(·|S)."""
        p = np.asarray(self.distribution)
        return (float(p @ (self.c_like * like_shape(SCORES, self.params))),
                float(p @ (self.c_dislike * dislike_shape(SCORES, self.params))))

    def table(self) -> list[dict]:
        """One row per S for the calibration page (copy shown for long-output tasks)."""
        return [{"score": s, "p_like": self.p_like(s), "p_dislike": self.p_dislike(s),
                 "p_none": self.p_none(s), "p_copy": p_copy(self, s, long_output=True)} for s in SCORES]


def calibrate(distribution: Sequence[float] = DEFAULT_SCORE_DISTRIBUTION,
              params: ActionParams = ActionParams()) -> ActionModel:
    """Solve c_L and c_D in closed form: P(L) = c_L·Σ p(S)σ(k_L(S − S0L)), likewise P(D)."""
    p = normalise_distribution(distribution)
    model = ActionModel(params=params,
                        c_like=params.like_rate / float(p @ like_shape(SCORES, params)),
                        c_dislike=params.dislike_rate / float(p @ dislike_shape(SCORES, params)),
                        distribution=tuple(float(x) for x in p))
    check_probabilities(model)
    return model


def check_probabilities(model: ActionModel) -> None:
    """A distribution with little mass where likes (or dislikes) happen forces a large c and can
    push P(L|S) + P(D|S) past 1 at some S; such targets cannot be met, so say where."""
    for s in SCORES:
        like, dislike = model.p_like(s), model.p_dislike(s)
        if like > 1 or dislike > 1 or like + dislike > 1:
            raise ValueError(
                f"calibration is infeasible: at S={s}, P(L|S)={like:.4f} and P(D|S)={dislike:.4f} "
                "(sum must stay within 1); the score distribution has too little mass near the "
                "like/dislike thresholds for the target rates")


def score_distribution(scores: Iterable[int]) -> tuple[float, ...]:
    """Empirical p(S) of realised scores, S = 1..10."""
    values = check_scores(list(scores))
    if values.size == 0:
        raise ValueError("cannot build a score distribution from an empty list of scores")
    counts = np.bincount(values, minlength=11)[1:]
    return tuple(float(c) for c in counts / counts.sum())


def recalibrate(scores: Iterable[int], params: ActionParams = ActionParams()) -> ActionModel:
    """Calibrate to a run's own realised scores, so its action rates hit the targets."""
    return calibrate(score_distribution(scores), params)


def shift_like_threshold(model: ActionModel, delta: float) -> ActionModel:
    """Noise control: move S0L (positive = selective users, negative = lenient), recalibrated
    under the same distribution so the global like rate and the dislike curve stay as they were."""
    return calibrate(model.distribution, replace(model.params, s0_like=model.params.s0_like + delta))


# --- binary model (tasks whose score takes only two values) -----------------------------------

@dataclass(frozen=True)
class BinaryActionModel:
    """Only a low score can dislike and only a high score can like."""
    low_score: int
    high_score: int
    p_dislike_low: float
    p_like_high: float

    def p_like(self, score) -> float:
        return self.p_like_high if self._is_high(score) else 0.0

    def p_dislike(self, score) -> float:
        return 0.0 if self._is_high(score) else self.p_dislike_low

    def p_none(self, score) -> float:
        return 1.0 - self.p_like(score) - self.p_dislike(score)

    def _is_high(self, score) -> bool:
        if check_score(score) not in (self.low_score, self.high_score):
            raise ValueError(f"the binary model knows only scores {self.low_score} and "
                             f"{self.high_score}, got {score!r}")
        return score == self.high_score


def calibrate_binary(*, p_low: float, low_score: int = INCORRECT_SCORE, high_score: int = CORRECT_SCORE,
                     like_rate: float = LIKE_RATE, dislike_rate: float = DISLIKE_RATE) -> BinaryActionModel:
    """P(D|S_low) = P(D)/P(S_low) and P(L|S_high) = P(L)/P(S_high), which must stay within 1."""
    if not 0 < p_low < 1:
        raise ValueError(f"p_low (share of low scores) must lie strictly between 0 and 1, got {p_low!r}")
    if check_score(low_score) >= check_score(high_score):
        raise ValueError(f"low_score {low_score} must be below high_score {high_score}")
    dislike, like = dislike_rate / p_low, like_rate / (1 - p_low)
    for name, value in (("P(D|S_low)", dislike), ("P(L|S_high)", like)):
        if value > 1:
            raise ValueError(f"binary calibration is infeasible: {name} = {value:.4f} > 1 "
                             f"with a share of low scores of {p_low:.4f}")
    return BinaryActionModel(low_score, high_score, p_dislike_low=dislike, p_like_high=like)


def binary_from_scores(scores: Iterable[int], *, low_score: int = INCORRECT_SCORE,
                       high_score: int = CORRECT_SCORE, **rates: float) -> BinaryActionModel:
    """Binary model calibrated on realised two-valued scores."""
    values = list(scores)
    if not values:
        raise ValueError("cannot calibrate the binary model on an empty list of scores")
    unknown = sorted({s for s in values if s not in (low_score, high_score)})
    if unknown:
        raise ValueError(f"binary scores must be {low_score} or {high_score}, got {unknown}")
    p_low = values.count(low_score) / len(values)
    return calibrate_binary(p_low=p_low, low_score=low_score, high_score=high_score, **rates)


# --- copy and sampling ------------------------------------------------------------------------

class FeedbackModel(Protocol):
    def p_like(self, score) -> float: ...
    def p_dislike(self, score) -> float: ...


def p_copy(model: FeedbackModel, score, *, long_output: bool) -> float:
    """Copying a long answer goes with liking it: 4·P(L|S), capped at 1; short answers
    (a label, a number) are never worth copying."""
    return min(1.0, COPY_FACTOR * model.p_like(score)) if long_output else 0.0


class Action(NamedTuple):
    """A tuple rather than a frozen dataclass: runs sample hundreds of thousands of these."""
    reaction: str  # LIKE, DISLIKE or NONE
    copy: bool


def _generator(rng: np.random.Generator | int) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def sample_action_arrays(model: FeedbackModel, scores: Sequence[int], *, long_output: bool,
                         rng: np.random.Generator | int) -> tuple[np.ndarray, np.ndarray]:
    """(reactions, copies) arrays for many scores at once. Each action uses two uniform draws
    (reaction, copy), so the i-th reaction is the same whatever long_output is; copy is drawn
    independently of the reaction."""
    values = check_scores(scores)
    unique, index = np.unique(values, return_inverse=True)
    like = np.array([model.p_like(s) for s in unique])[index]
    dislike = np.array([model.p_dislike(s) for s in unique])[index]
    copy = np.array([p_copy(model, s, long_output=long_output) for s in unique])[index]
    draws = _generator(rng).random((values.size, 2))
    reactions = np.where(draws[:, 0] < like, LIKE, np.where(draws[:, 0] < like + dislike, DISLIKE, NONE))
    return reactions, draws[:, 1] < copy


def sample_actions(model: FeedbackModel, scores: Sequence[int], *, long_output: bool,
                   rng: np.random.Generator | int) -> list[Action]:
    """One Action per score, same draws as sample_action_arrays."""
    reactions, copies = sample_action_arrays(model, scores, long_output=long_output, rng=rng)
    return list(map(Action, reactions.tolist(), copies.tolist()))


def sample_action(model: FeedbackModel, score: int, *, long_output: bool,
                  rng: np.random.Generator | int) -> Action:
    """A single seeded draw; pass the same Generator on to keep a sequence reproducible."""
    return sample_actions(model, [score], long_output=long_output, rng=rng)[0]


def perturb_scores(scores: Sequence[int], *, sigma: float, rng: np.random.Generator | int) -> list[int]:
    """Noise control: S + N(0, σ²), rounded and clipped to 1..10, before actions are sampled."""
    if sigma < 0:
        raise ValueError(f"sigma must not be negative, got {sigma!r}")
    values = check_scores(scores).astype(float)
    if sigma == 0:
        return [int(s) for s in values]
    noisy = values + _generator(rng).normal(0.0, sigma, values.size)
    return [int(s) for s in np.clip(np.rint(noisy), 1, 10)]
