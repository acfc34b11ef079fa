"""One episode's simulated feedback: critique, score and action, stored once.

Each of critique and score comes from its LLM role when configured (and `use_llm`), else offline;
an LLM failure is answered offline and recorded on the row, never raised.
"""
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from django.db import IntegrityError, transaction

from evaluation.feedback import formulas as fm
from evaluation.feedback.models import CalibrationSetting, EpisodeFeedback, FeedbackProfile
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.services.actions import action_sample, action_streams
from evaluation.feedback.services.conversation import Judged, episode_judged
from evaluation.feedback.services.critique import CRITIQUE_ROLE, Verbose, critique_llm, critique_offline
from evaluation.feedback.services.profiles import profile_for
from evaluation.feedback.services.revision import (
    REVISION_ROLE,
    agent_is_scripted,
    revision_llm,
    revision_scripted,
    revision_stated,
)
from evaluation.feedback.services.score import SCORER_ROLE, Satisfaction, score_llm, score_offline
from evaluation.feedback.services.selectors import run_calibration_source
from evaluation.models import Episode
from memweb.llm import LLMError, role_config

Backend = EpisodeFeedback.Backend
MAX_FEEDBACK_ROUNDS = 3  # MemoryBench's simulated user gives at most three feedback turns


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


def _judge(*, episode: Episode, profile: FeedbackProfile, params: FeedbackParams, judged: Judged | None = None,
           stated: frozenset[str] = frozenset(), stage: str = "") -> Judgement:
    """Critique, then score; each from its LLM role when configured, else (or on failure) offline.
    Later feedback rounds pass the revision as `judged` and the facts revisions stated."""
    judged, errors = judged or episode_judged(episode), []
    verbose, critique_backend = _with_fallback(
        role=CRITIQUE_ROLE, stage=f"{stage}critique", params=params, errors=errors,
        llm=lambda: critique_llm(episode=episode, judged=judged, profile=profile),
        offline=lambda: critique_offline(episode=episode, stated=stated))
    satisfaction, score_backend = _with_fallback(
        role=SCORER_ROLE, stage=f"{stage}score", params=params, errors=errors,
        llm=lambda: score_llm(episode=episode, judged=judged),
        offline=lambda: score_offline(episode=episode, metric=params.metric, stated=stated))
    return Judgement(judged, verbose, critique_backend, satisfaction, score_backend, errors)


@dataclass
class _Draws:
    """What every round of one episode's feedback shares: who judges, with which parameters, and
    the episode's two random streams, drawn on in round order so a seed replays all rounds."""
    profile: FeedbackProfile
    params: FeedbackParams
    noise_rng: np.random.Generator
    action_rng: np.random.Generator

    def action(self, judgement: Judgement) -> tuple[bool, int, fm.Action]:
        long_output = self.profile.long_output  # the task family's output format, never the single reply's length
        sampled, action = action_sample(satisfaction=judgement.satisfaction, params=self.params,
                                        long_output=long_output, noise_rng=self.noise_rng, action_rng=self.action_rng)
        return long_output, sampled, action


def _revise(*, episode: Episode, params: FeedbackParams, history: list, stated: frozenset[str],
            errors: list[dict], stage: str) -> tuple[str, str]:
    """(the agent's answer to the critique that ends `history`, who wrote it)."""
    scripted = lambda: revision_scripted(episode=episode, stated=stated)  # noqa: E731
    if agent_is_scripted(episode):
        return scripted(), Backend.SCRIPTED.value
    return _with_fallback(role=REVISION_ROLE, stage=f"{stage}revision", params=params, errors=errors,
                          llm=lambda: revision_llm(history=history), offline=scripted)


def _later_rounds(*, episode: Episode, first: Judgement, draws: _Draws, rounds: int) -> list[dict]:
    """Rounds 2..`rounds` (multi-turn feedback): while the user goes on, the agent answers the last
    critique and the user judges that answer."""
    played, last, stated = [], first, frozenset()
    for number in range(2, rounds + 1):
        if last.verbose.behavior == EpisodeFeedback.Behavior.END:
            break
        stage, errors = f"round {number} ", []
        history = [*last.judged.history, ("Agent", last.judged.response), ("Customer", last.verbose.response)]
        revision, revision_backend = _revise(episode=episode, params=draws.params, history=history, stated=stated,
                                             errors=errors, stage=stage)
        stated |= revision_stated(episode=episode, revision=revision)
        last = _judge(episode=episode, profile=draws.profile, params=draws.params, stated=stated, stage=stage,
                      judged=Judged(index=None, history=history, response=revision))
        long_output, sampled, action = draws.action(last)
        played.append({"round": number, "revision": revision, "revision_backend": revision_backend,
                       **{k: v for k, v in last.fields().items() if k not in ("judged_index", "errors")},
                       "errors": errors + last.errors, "sampled_score": sampled, "action": action.reaction,
                       "copied": action.copy, "long_output": long_output})
    return played


def feedback_for_episode(*, episode: Episode, seed: int, profile: FeedbackProfile | None = None,
                         params: FeedbackParams | None = None, rounds: int = 1) -> EpisodeFeedback:
    """The simulated user's feedback on `episode`'s final reply, stored once: an existing row is
    returned unchanged. With `rounds` > 1 (multi-turn feedback, at most MAX_FEEDBACK_ROUNDS) the agent then
    answers each critique while the user goes on. LLM failures are recorded on the row (answered
    offline), never raised; parameters whose targets cannot be met raise ValueError before anything
    is written."""
    if not 1 <= rounds <= MAX_FEEDBACK_ROUNDS:
        raise ValueError(f"rounds must be from 1 to {MAX_FEEDBACK_ROUNDS}, got {rounds!r}")
    existing = EpisodeFeedback.objects.filter(episode=episode).first()
    if existing is not None:
        return existing
    params = params or CalibrationSetting.current().params()
    params.check()
    calibrate_on, scores = run_calibration_source(episode=episode)
    params, calibrated_on = params.model_copy(update={"calibrate_on": calibrate_on}).calibrated_to(scores)
    profile = profile or profile_for(key=episode.task_snapshot["domain"])
    draws = _Draws(profile, params, *action_streams(seed=seed, episode_pk=episode.pk))
    judgement = _judge(episode=episode, profile=profile, params=params)
    long_output, sampled, action = draws.action(judgement)
    snapshot = {**params.model_dump(mode="json"), "profile": profile.key, "long_output": long_output,
                "long_output_rule": "task family",
                "calibrated_on": calibrated_on, "rounds": rounds}
    return _store(episode=episode, values={
        **judgement.fields(), "profile": profile, "sampled_score": sampled, "action": action.reaction,
        "copied": action.copy, "seed": seed, "params": snapshot,
        "rounds": _later_rounds(episode=episode, first=judgement, draws=draws, rounds=rounds)})


def _store(*, episode: Episode, values: dict) -> EpisodeFeedback:
    try:
        with transaction.atomic():
            return EpisodeFeedback.objects.create(episode=episode, **values)
    except IntegrityError:
        # Another worker judged the same episode meanwhile: keep the first row.
        return EpisodeFeedback.objects.get(episode=episode)
