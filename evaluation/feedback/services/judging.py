"""One episode's simulated feedback: critique, score and action, stored once.

Each of critique and score comes from its LLM role when configured (and `use_llm`), else offline;
an LLM failure is answered offline and recorded on the row, never raised.
"""
from collections.abc import Callable
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from evaluation.feedback import formulas as fm
from evaluation.feedback.models import CalibrationSetting, EpisodeFeedback, FeedbackProfile
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.services.actions import action_sample, action_streams
from evaluation.feedback.services.conversation import Judged, episode_judged
from evaluation.feedback.services.critique import CRITIQUE_ROLE, Verbose, critique_llm, critique_offline
from evaluation.feedback.services.profiles import profile_for
from evaluation.feedback.services.score import SCORER_ROLE, Satisfaction, score_llm, score_offline
from evaluation.feedback.services.selectors import run_scores_before
from evaluation.models import Episode
from memweb.embeddings import embedder
from memweb.llm import LLMError, role_config

Backend = EpisodeFeedback.Backend


def _with_fallback(*, role: str, stage: str, params: FeedbackParams, llm: Callable, offline: Callable,
                   errors: list[dict]):
    """(value, backend label): the LLM's answer, or the offline one, labelled; a failure is recorded."""
    config = role_config(role)
    if not params.use_llm or config.is_offline:
        return offline(), Backend.SCRIPTED.value
    try:
        return llm(), Backend.of_llm(config.model)
    except LLMError as exc:
        errors.append({"stage": stage, "error": str(exc)})
        return offline(), Backend.FALLBACK.value


@dataclass(frozen=True)
class Judgement:
    judged: Judged
    verbose: Verbose
    critique_backend: str
    satisfaction: Satisfaction
    score_backend: str
    errors: list[dict]

    def fields(self) -> dict:
        return {"judged_index": self.judged.index, "behavior": self.verbose.behavior,
                "reasoning": self.verbose.reasoning, "response": self.verbose.response,
                "critique_backend": self.critique_backend, "score": self.satisfaction.score,
                "score_method": self.satisfaction.method, "score_backend": self.score_backend,
                "errors": self.errors}


def _judge(*, episode: Episode, profile: FeedbackProfile, params: FeedbackParams) -> Judgement:
    """Critique, then score; each from its LLM role when configured, else (or on failure) offline."""
    judged, errors = episode_judged(episode), []
    verbose, critique_backend = _with_fallback(
        role=CRITIQUE_ROLE, stage="critique", params=params, errors=errors,
        llm=lambda: critique_llm(episode=episode, judged=judged, profile=profile),
        offline=lambda: critique_offline(episode=episode))
    satisfaction, score_backend = _with_fallback(
        role=SCORER_ROLE, stage="score", params=params, errors=errors,
        llm=lambda: score_llm(episode=episode, judged=judged),
        offline=lambda: score_offline(episode=episode, metric=params.metric))
    return Judgement(judged, verbose, critique_backend, satisfaction, score_backend, errors)


def feedback_for_episode(*, episode: Episode, seed: int, profile: FeedbackProfile | None = None,
                         params: FeedbackParams | None = None) -> EpisodeFeedback:
    """The simulated user's feedback on `episode`'s final reply, stored once: an existing row is
    returned unchanged. LLM failures are recorded on the row (answered offline), never raised;
    parameters whose targets cannot be met raise ValueError before anything is written."""
    existing = EpisodeFeedback.objects.filter(episode=episode).first()
    if existing is not None:
        return existing
    params = params or CalibrationSetting.current().params()
    params.check()
    params, calibrated_on = params.calibrated_to(run_scores_before(episode=episode))
    profile = profile or profile_for(key=episode.task_snapshot["domain"])
    judgement = _judge(episode=episode, profile=profile, params=params)
    long_output = reply_is_long(profile=profile, reply=judgement.judged.response)
    noise_rng, action_rng = action_streams(seed=seed, episode_pk=episode.pk)
    sampled, action = action_sample(satisfaction=judgement.satisfaction, params=params,
                                    long_output=long_output, noise_rng=noise_rng, action_rng=action_rng)
    snapshot = {**params.model_dump(mode="json"), "profile": profile.key, "long_output": long_output,
                "long_output_rule": "profile" if profile.long_output is not None else f"> {fm.LONG_OUTPUT_TOKENS} tokens",
                "calibrated_on": calibrated_on}
    return _store(episode=episode, values={
        **judgement.fields(), "profile": profile, "sampled_score": sampled, "action": action.reaction,
        "copied": action.copy, "seed": seed, "params": snapshot})


def reply_is_long(*, profile: FeedbackProfile, reply: str) -> bool:
    """The profile's choice when it makes one; else the paper's rule on the reply's token count
    (the embedding model's tokenizer: offline, no download)."""
    if profile.long_output is not None:
        return profile.long_output
    return fm.is_long_output(embedder().count_tokens(reply))


def _store(*, episode: Episode, values: dict) -> EpisodeFeedback:
    try:
        with transaction.atomic():
            return EpisodeFeedback.objects.create(episode=episode, **values)
    except IntegrityError:
        # Another worker judged the same episode meanwhile: keep the first row.
        return EpisodeFeedback.objects.get(episode=episode)
