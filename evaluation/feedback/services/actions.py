"""The like / dislike / none and copy actions drawn from a satisfaction score."""
import numpy as np

from evaluation.feedback import formulas as fm
from evaluation.feedback.models import CalibrationSetting, EpisodeFeedback
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.services.score import Satisfaction


def action_streams(*, seed: int, episode_pk: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent noise and action streams per (seed, episode): one seed for a whole run still
    gives every episode its own draws, and turning noise on leaves the action draws unchanged."""
    noise, actions = np.random.SeedSequence([seed % 2**64, episode_pk]).spawn(2)
    return np.random.default_rng(noise), np.random.default_rng(actions)


def action_model(*, params: FeedbackParams, method: str) -> fm.FeedbackModel:
    """The binary model for correctness scores under the correctness metric; the graded model for
    everything else (LLM and shop scores, and correctness as the fallback of an unscored episode)."""
    if params.metric == CalibrationSetting.Metric.CORRECTNESS and method == EpisodeFeedback.ScoreMethod.CORRECTNESS:
        return params.binary_model()
    return params.graded_model()


def action_sample(*, satisfaction: Satisfaction, params: FeedbackParams, long_output: bool,
                  noise_rng: np.random.Generator, action_rng: np.random.Generator) -> tuple[int, fm.Action]:
    """(S the action was drawn from, action). Under the binary model a perturbed S snaps back to
    the nearer of its two values."""
    model = action_model(params=params, method=satisfaction.method)
    noisy = fm.perturb_scores([satisfaction.score], sigma=params.score_sigma, rng=noise_rng)[0]
    if isinstance(model, fm.BinaryActionModel):
        noisy = model.low_score if noisy < (model.low_score + model.high_score) / 2 else model.high_score
    return noisy, fm.sample_action(model, noisy, long_output=long_output, rng=action_rng)
