"""The parameters of simulated feedback, as one validated value (no Django).

An EpisodeFeedback keeps `FeedbackParams.model_dump()` as its snapshot, so a later change of the
calibration page never changes what an old row means.
"""
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evaluation.feedback import formulas as fm

Metric = Literal["shop", "correctness"]
CalibrateOn = Literal["realised", "reference"]
LOW_SCORE_CEILING = 5  # realised scores up to here count towards the binary model's low share


class FeedbackParams(BaseModel):
    """Action-model shape and targets, the p(S) they are calibrated under, the noise controls and
    where S and the critique come from when no LLM is used."""

    model_config = ConfigDict(frozen=True)

    s0_like: float = Field(7.5, ge=-20, le=30)
    s0_dislike: float = Field(4.5, ge=-20, le=30)
    k_like: float = Field(1.5, gt=0, le=20)
    k_dislike: float = Field(1.5, gt=0, le=20)
    like_rate: float = Field(fm.LIKE_RATE, ge=0, le=1)
    dislike_rate: float = Field(fm.DISLIKE_RATE, ge=0, le=1)
    distribution: tuple[float, ...] = fm.DEFAULT_SCORE_DISTRIBUTION
    like_shift: float = Field(0.0, ge=-10, le=10, description="Noise control: added to S0L (+ selective, - lenient).")
    score_sigma: float = Field(0.0, ge=0, le=10, description="Noise control: std. dev. of the Gaussian added to S.")
    calibrate_on: CalibrateOn = Field(
        "reference", description="reference: always `distribution` (by default MemoryBench's reference p(S), so "
        "like rates can rank systems); realised (variant): the run's own scores of its finished trials (at least "
        f"{fm.MIN_REALISED_SCORES}, else the reference), which pins every system's like rate at the target.")
    binary_low_share: float = Field(fm.BINARY_LOW_SHARE, gt=0, lt=1,
                                    description="Binary model: P(S_low) under the reference (and until a "
                                    "realised run has enough scores).")
    metric: Metric = Field("shop", description="Offline S: shop reward breakdown (1..10) or correctness (9/3).")
    use_llm: bool = Field(True, description="Use the user_simulator and scorer LLMs when they are configured.")

    @field_validator("distribution")
    @classmethod
    def _ten_weights(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        fm.normalise_distribution(value)  # raises with the reason
        return tuple(float(v) for v in value)

    def action_params(self) -> fm.ActionParams:
        return fm.ActionParams(s0_like=self.s0_like, s0_dislike=self.s0_dislike, k_like=self.k_like,
                               k_dislike=self.k_dislike, like_rate=self.like_rate, dislike_rate=self.dislike_rate)

    def base_model(self) -> fm.ActionModel:
        """The calibrated graded model before the like-threshold shift."""
        return fm.calibrate(self.distribution, self.action_params())

    def graded_model(self) -> fm.ActionModel:
        model = self.base_model()
        return fm.shift_like_threshold(model, self.like_shift) if self.like_shift else model

    def binary_model(self) -> fm.BinaryActionModel:
        """Two-score model for correctness scoring, under the share of low scores `binary_low_share`."""
        return fm.calibrate_binary(p_low=self.binary_low_share, like_rate=self.like_rate,
                                   dislike_rate=self.dislike_rate)

    def check(self) -> None:
        """Raise ValueError when the targets cannot be met under the distribution."""
        self.graded_model()
        if self.metric == "correctness":
            self.binary_model()

    def with_distribution(self, distribution) -> "FeedbackParams":
        return FeedbackParams(**{**self.model_dump(), "distribution": tuple(distribution)})

    def calibrated_to(self, scores: list[int]) -> tuple["FeedbackParams", str]:
        """(parameters, where p(S) came from): calibrated on realised `scores` when asked to and
        there are enough of them and the targets can be met under them; else these parameters."""
        if self.calibrate_on == "reference":
            return self, "reference distribution (calibrate_on = reference)"
        if len(scores) < fm.MIN_REALISED_SCORES:
            return self, f"reference distribution ({len(scores)} realised scores, fewer than {fm.MIN_REALISED_SCORES})"
        low_share = sum(score <= LOW_SCORE_CEILING for score in scores) / len(scores)
        realised = FeedbackParams(**{**self.model_dump(), "distribution": fm.score_distribution(scores),
                                     "binary_low_share": low_share if 0 < low_share < 1 else self.binary_low_share})
        try:
            realised.check()
        except ValueError as exc:
            return self, f"reference distribution (the {len(scores)} realised scores are infeasible: {exc})"
        return realised, f"{len(scores)} realised scores"
