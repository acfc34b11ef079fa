"""Simulated user feedback on finished episodes (MemoryBench): verbose critique, satisfaction
score, like/dislike/copy actions; calibration; feedback as procedural memory; off- and on-policy
orchestration. The design and its choices are described in docs/FEEDBACK_SIMULATION.md.

What is judged: the agent's final reply (its last message with text), with the whole conversation
before it as history. The shop's reward, and so the metric score and the offline critique, exist
only for an episode's end state; judging earlier turns would give the two backends different
shapes. One episode therefore has one feedback tuple.
"""
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from pydantic import BaseModel, Field, model_validator

from evaluation import feedback_model as fm
from evaluation.feedback.models import SCRIPTED_PREFIX, CalibrationSetting, EpisodeFeedback, FeedbackProfile
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.prompts import SCORER_SYSTEM, profile_defaults, scorer_prompt, test_prompt
from evaluation.models import Episode
from evaluation.services import episode_ref, episode_trajectory
from evaluation.shop.customers import STOP, render_intent
from memweb.llm import LLMError, llm_json, role_config
from orbs.models import MemoryBank
from orbs.services import OrbIngestResult, bank_resolve, orb_from_episode

SCRIPTED = SCRIPTED_PREFIX
SCRIPTED_FALLBACK = f"{SCRIPTED_PREFIX} (LLM failed)"
CRITIQUE_ROLE, SCORER_ROLE = "user_simulator", "scorer"
FEEDBACK_SOURCE_LABEL = "simulated feedback"
MAX_CRITIQUE_CHARS = 4000


# --- the LLM answers' shapes -------------------------------------------------------------------

class VerboseFeedbackOut(BaseModel):
    reasoning: str = Field(min_length=1, max_length=8000)
    behavior: Literal["continue_conversation", "end_conversation"]
    response: str | None = Field(default=None, max_length=8000)

    @model_validator(mode="after")
    def _response_matches_behavior(self):
        # A broken contract goes back to the model as a repair request rather than being guessed at.
        if self.behavior == "end_conversation" and self.response is not None:
            raise ValueError("response must be null when behavior is end_conversation")
        if self.behavior == "continue_conversation" and not (self.response or "").strip():
            raise ValueError("response must be the next message when behavior is continue_conversation")
        return self


class ScoreOut(BaseModel):
    score: int = Field(ge=1, le=10)


@dataclass(frozen=True)
class Verbose:
    reasoning: str
    behavior: str
    response: str


@dataclass(frozen=True)
class Satisfaction:
    score: int
    method: str


@dataclass(frozen=True)
class Judged:
    """The reply being judged and the conversation before it, as the customer saw it."""
    index: int | None
    history: list[tuple[str, str]]
    response: str


# --- profiles ----------------------------------------------------------------------------------

def profile_for(*, key: str) -> FeedbackProfile:
    """The profile of a task family, created with the defaults the first time it is needed."""
    profile, _ = FeedbackProfile.objects.get_or_create(key=key, defaults=profile_defaults(key))
    return profile


def profiles_ensure_defaults() -> list[FeedbackProfile]:
    for key in ("appliances", "clothing"):
        profile_for(key=key)
    return list(FeedbackProfile.objects.all())


# --- the conversation as the customer saw it ---------------------------------------------------

def _visible(message: dict) -> tuple[str, str] | None:
    """Customers see text, not tool calls or results."""
    text = (message.get("content") or "").replace(STOP, "").strip()
    if message["role"] == "user" and text:
        return "Customer", text
    if message["role"] == "assistant" and text:
        return "Agent", text
    return None


def episode_judged(episode: Episode) -> Judged:
    transcript = episode.transcript
    replies = [i for i, m in enumerate(transcript) if m["role"] == "assistant" and (m.get("content") or "").strip()]
    index = replies[-1] if replies else None
    before = transcript[:index] if index is not None else transcript
    history = [line for line in map(_visible, before) if line]
    return Judged(index=index, history=history, response=transcript[index]["content"].strip() if replies else "")


def evaluation_context(spec: dict) -> dict:
    """The ground truth the simulated user judges against (the agent never saw it)."""
    return {
        "requests": [{"kind": i["kind"], **i["slots"]} for i in spec["intents"]],
        "expected_changes": spec["gold_actions"],
        "expected_lookups": [call["name"] for call in spec["gold_lookups"]],
        "facts_the_customer_must_be_told": {o["label"]: o["value"] for o in spec["required_outputs"]},
    }


# --- verbose feedback ----------------------------------------------------------------------------

def _with_fallback(*, role: str, stage: str, params: FeedbackParams, llm: Callable, offline: Callable,
                   errors: list[dict]):
    """(value, backend label): the LLM's answer, or the offline one, labelled; a failure is recorded."""
    config = role_config(role)
    if not params.use_llm or config.is_offline:
        return offline(), SCRIPTED
    try:
        return llm(), f"llm:{config.model}"
    except LLMError as exc:
        errors.append({"stage": stage, "error": str(exc)})
        return offline(), SCRIPTED_FALLBACK


def critique_llm(*, episode: Episode, judged: Judged, profile: FeedbackProfile) -> Verbose:
    spec = episode.task_snapshot
    prompt = test_prompt(history=judged.history, response=judged.response, task_description=spec["instructions"],
                         evaluation_context=evaluation_context(spec), language=profile.language)
    messages = [{"role": "system", "content": profile.system_prompt()}, {"role": "user", "content": prompt}]
    answer = llm_json(role=CRITIQUE_ROLE, messages=messages, schema=VerboseFeedbackOut)
    return Verbose(reasoning=answer.reasoning.strip(), behavior=answer.behavior,
                   response=(answer.response or "").strip())


def _problems(episode: Episode) -> list[tuple[str, str]]:
    """(reason for the judge's reasoning, what the customer says) per thing that went wrong."""
    breakdown, details, spec = episode.reward_breakdown, episode.reward_details, episode.task_snapshot
    problems = []
    if details.get("invented_ids"):
        ids = ", ".join(details["invented_ids"])
        problems.append((f"the agent mentioned order ids the shop does not have ({ids})",
                         f"Order {ids} does not exist. Please do not make things up."))
    if breakdown.get("state") == 0:
        kinds = ", ".join(sorted({e["kind"].replace("_", " ") for e in episode.errors})) or "no error diagnosed"
        wishes = " ".join(render_intent(i, random.Random(episode.seed)) for i in spec["intents"])
        problems.append((f"the request was not carried out as asked ({kinds})",
                         f"That is not what I asked for. Once more: {wishes}"))
    if details.get("missing_outputs"):
        labels = ", ".join(o["label"] for o in details["missing_outputs"])
        problems.append((f"the agent never stated: {labels}", f"You still have not told me the {labels}."))
    if details.get("missing_lookups") and not problems:
        names = ", ".join(c["name"] for c in details["missing_lookups"])
        problems.append((f"the agent answered without the look-ups {names}",
                         "Did you actually check my account and order before answering?"))
    return problems


def _circumstances(episode: Episode) -> list[tuple[str, str]]:
    if episode.infra_error:
        return [("the conversation broke off with an infrastructure error", "The chat stopped working halfway.")]
    if episode.ended_by == Episode.EndedBy.MAX_TURNS:
        return [("the conversation ran out of turns", "This is taking far too long.")]
    return []


def critique_offline(*, episode: Episode) -> Verbose:
    """Same shape as the LLM's, built from the reward breakdown and its details."""
    problems = _problems(episode) + _circumstances(episode)
    if episode.success and not problems:
        reasoning = "The request was carried out as asked, every fact I needed was stated and nothing was invented."
        return Verbose(reasoning=reasoning, behavior=EpisodeFeedback.Behavior.END, response="")
    problems = problems or [("the request was not resolved", "My request is still not resolved.")]
    return Verbose(reasoning="Not satisfied: " + "; ".join(reason for reason, _ in problems) + ".",
                   behavior=EpisodeFeedback.Behavior.CONTINUE, response=" ".join(said for _, said in problems))


# --- satisfaction score --------------------------------------------------------------------------

def score_llm(*, episode: Episode, judged: Judged) -> Satisfaction:
    prompt = scorer_prompt(history=judged.history, response=judged.response,
                           evaluation_context=evaluation_context(episode.task_snapshot))
    messages = [{"role": "system", "content": SCORER_SYSTEM}, {"role": "user", "content": prompt}]
    return Satisfaction(llm_json(role=SCORER_ROLE, messages=messages, schema=ScoreOut).score,
                        EpisodeFeedback.ScoreMethod.LLM)


def _tool_errors(episode: Episode) -> int:
    return sum(1 for m in episode.transcript if m["role"] == "tool" and m.get("ok") is False)


def score_offline(*, episode: Episode, metric: str) -> Satisfaction:
    """The metric path; an episode without the shop's components (an infrastructure error before any
    scoring) falls back to binary correctness."""
    breakdown = episode.reward_breakdown
    if metric == "correctness" or not {"state", "grounded"} <= breakdown.keys():
        return Satisfaction(fm.score_from_correctness(episode.success), EpisodeFeedback.ScoreMethod.CORRECTNESS)
    score = fm.score_from_shop(breakdown=breakdown, turns=episode.turns, max_turns=episode.max_turns,
                               tool_errors=_tool_errors(episode))
    return Satisfaction(score, EpisodeFeedback.ScoreMethod.SHOP)


# --- actions -----------------------------------------------------------------------------------

def _streams(seed: int, episode: Episode) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent noise and action streams per (seed, episode): one seed for a whole run still
    gives every episode its own draws, and turning noise on leaves the action draws unchanged."""
    noise, actions = np.random.SeedSequence([seed % 2**64, episode.pk]).spawn(2)
    return np.random.default_rng(noise), np.random.default_rng(actions)


def action_model(*, params: FeedbackParams, method: str):
    """The binary model for correctness scores under the correctness metric; the graded model for
    everything else (LLM and shop scores, and correctness as the fallback of an unscored episode)."""
    if params.metric == "correctness" and method == EpisodeFeedback.ScoreMethod.CORRECTNESS:
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


# --- one episode's feedback ----------------------------------------------------------------------

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
    profile = profile or profile_for(key=episode.task_snapshot["domain"])
    judgement = _judge(episode=episode, profile=profile, params=params)
    noise_rng, action_rng = _streams(seed, episode)
    sampled, action = action_sample(satisfaction=judgement.satisfaction, params=params,
                                    long_output=profile.long_output, noise_rng=noise_rng, action_rng=action_rng)
    snapshot = {**params.model_dump(mode="json"), "profile": profile.key, "long_output": profile.long_output}
    return _store(episode=episode, values={
        **judgement.fields(), "profile": profile, "sampled_score": sampled, "action": action.reaction,
        "copied": action.copy, "seed": seed, "params": snapshot})


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


def _store(*, episode: Episode, values: dict) -> EpisodeFeedback:
    try:
        with transaction.atomic():
            return EpisodeFeedback.objects.create(episode=episode, **values)
    except IntegrityError:
        # Another worker judged the same episode meanwhile: keep the first row.
        return EpisodeFeedback.objects.get(episode=episode)


# --- calibration ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class CalibrationTable:
    params: FeedbackParams
    rows: list[dict]  # score, p_score, p_like, p_dislike, p_none, p_copy
    c_like: float
    c_dislike: float
    global_like: float
    global_dislike: float
    binary: dict | None  # for the correctness metric: P(D|S_low), P(L|S_high)


def calibration_table(*, params: FeedbackParams) -> CalibrationTable:
    """P(L|S), P(D|S), P(N|S), P(C|S) for S = 1..10 and the global rates they give under p(S).
    With a like-threshold shift, the model is the shifted one (recalibrated, same targets)."""
    model = params.graded_model()
    p = fm.normalise_distribution(params.distribution)
    rows = [{**row, "p_score": float(p[row["score"] - 1])} for row in model.table()]
    like, dislike = model.global_rates()
    return CalibrationTable(params=params, rows=rows, c_like=model.c_like, c_dislike=model.c_dislike,
                            global_like=like, global_dislike=dislike, binary=_binary_table(params))


def _binary_table(params: FeedbackParams) -> dict | None:
    if params.metric != "correctness":
        return None
    model = params.binary_model()
    return {"low_score": model.low_score, "high_score": model.high_score,
            "p_dislike_low": model.p_dislike_low, "p_like_high": model.p_like_high}


def calibration_update(*, setting: CalibrationSetting, params: FeedbackParams, user=None,
                       source: str | None = None) -> CalibrationSetting:
    """Make `params` the active calibration; ValueError (nothing saved) when it is infeasible."""
    params.check()
    for name in CalibrationSetting.PARAM_FIELDS:
        setattr(setting, name, getattr(params, name))
    setting.distribution = list(params.distribution)
    setting.distribution_source = source or setting.distribution_source
    setting.updated_by, setting.updated_at = user, timezone.now()
    setting.save(update_fields=[*CalibrationSetting.PARAM_FIELDS, "distribution", "distribution_source",
                                "updated_by", "updated_at"])
    return setting


def feedback_of(episodes) -> QuerySet[EpisodeFeedback]:
    """The feedback rows of a queryset or list of episodes (or episode ids)."""
    if isinstance(episodes, QuerySet):
        ids = episodes.values("pk")
    else:
        ids = [e.pk if isinstance(e, Episode) else int(e) for e in episodes]
    return EpisodeFeedback.objects.filter(episode__in=ids)


def run_episodes(*, run) -> QuerySet[Episode]:
    """All episodes of an evaluation run (evaluation.runs), for rates, recalibration and browsing."""
    return Episode.objects.filter(run_episode__run=run)


def calibration_recalibrate(*, episodes, user=None, label: str = "") -> CalibrationSetting:
    """Calibrate to the realised satisfaction scores of `episodes` (e.g. a run's), so that the
    global like and dislike rates hit the targets under that distribution. ValueError (nothing
    saved) when none of them has feedback or the targets cannot be met."""
    scores = list(feedback_of(episodes).values_list("score", flat=True))
    if not scores:
        raise ValueError("none of the selected episodes has simulated feedback to recalibrate from")
    setting = CalibrationSetting.current()
    params = setting.params().with_distribution(fm.score_distribution(scores))
    source = f"recalibrated from {len(scores)} realised scores" + (f" ({label})" if label else "")
    return calibration_update(setting=setting, params=params, user=user, source=source)


@dataclass(frozen=True)
class FeedbackRates:
    n: int
    histogram: list[int]  # count of S = 1..10
    counts: dict  # like, dislike, none, copy
    realised: dict  # like, dislike, none, copy as shares of n
    targets: dict  # like, dislike
    expected: dict | None  # like, dislike under the current model and these episodes' sampled scores


def feedback_rates(*, episodes, params: FeedbackParams | None = None) -> FeedbackRates:
    """Score histogram and realised action rates of `episodes` against the targets. `expected` is
    what the calibrated model predicts for these very scores; it equals the targets after
    recalibrating on them."""
    params = params or CalibrationSetting.current().params()
    rows = list(feedback_of(episodes).values("score", "sampled_score", "score_method", "action", "copied"))
    n = len(rows)
    counts = {a: sum(r["action"] == a for r in rows) for a in EpisodeFeedback.Action.values}
    counts["copy"] = sum(r["copied"] for r in rows)
    return FeedbackRates(
        n=n, histogram=[sum(r["score"] == s for r in rows) for s in fm.SCORES], counts=counts,
        realised={k: (v / n if n else 0.0) for k, v in counts.items()},
        targets={"like": params.like_rate, "dislike": params.dislike_rate},
        expected=_expected(params, rows) if n else None)


def _expected(params: FeedbackParams, rows: list[dict]) -> dict:
    models = {method: action_model(params=params, method=method) for method in {r["score_method"] for r in rows}}
    pairs = [(models[r["score_method"]], r["sampled_score"]) for r in rows]
    return {"like": float(np.mean([model.p_like(s) for model, s in pairs])),
            "dislike": float(np.mean([model.p_dislike(s) for model, s in pairs]))}


# --- browsing ------------------------------------------------------------------------------------

def feedback_browse(*, episodes=None, action: str = "", score_min: int | None = None,
                    score_max: int | None = None, backend: str = "") -> QuerySet[EpisodeFeedback]:
    """Feedback rows, newest first; `backend` filters on the critique's: llm, scripted, fallback."""
    rows = (feedback_of(episodes) if episodes is not None else EpisodeFeedback.objects.all())
    rows = rows.select_related("episode", "episode__task")
    if action:
        rows = rows.filter(action=action)
    if score_min is not None:
        rows = rows.filter(score__gte=score_min)
    if score_max is not None:
        rows = rows.filter(score__lte=score_max)
    return rows.filter(_backend_filter(backend)) if backend else rows


def _backend_filter(backend: str) -> Q:
    return {"llm": Q(critique_backend__startswith="llm:"), "scripted": Q(critique_backend=SCRIPTED),
            "fallback": Q(critique_backend=SCRIPTED_FALLBACK)}[backend]


# --- feedback as procedural memory ---------------------------------------------------------------

def feedback_trajectory(*, feedback: EpisodeFeedback) -> dict:
    """The episode's trajectory with the feedback folded in, for orb_from_episode:
    - the user's response (if it continued) becomes the last user message, so it is part of the
      Orb's obs and its emotion tag is the user's reaction;
    - metadata["user_feedback"] carries critique, score, action and copy into the Orb's context
      (and so into its embedded document and the LLM reflector's input);
    - reward_breakdown["user_satisfaction"] = S/10, a component the offline reflector names when unmet."""
    trajectory = episode_trajectory(feedback.episode)
    if feedback.response:
        trajectory["messages"].append({"role": "user", "content": feedback.response[:MAX_CRITIQUE_CHARS]})
    trajectory["metadata"]["user_feedback"] = {
        "critique": feedback.critique[:MAX_CRITIQUE_CHARS], "behavior": feedback.behavior,
        "satisfaction": feedback.score, "action": feedback.action, "copied": feedback.copied,
        "critique_backend": feedback.critique_backend, "score_backend": feedback.score_backend,
    }
    trajectory["reward_breakdown"]["user_satisfaction"] = feedback.score / 10
    return trajectory


def feedback_to_orbs(*, episodes, bank: MemoryBank | str) -> list[OrbIngestResult]:
    """One Orb per episode from its feedback-enriched trajectory (idempotent on the Orb's hash).
    ValueError, before anything is stored, when an episode has no feedback yet."""
    episodes = list(episodes)
    rows = {f.episode_id: f for f in feedback_of(episodes).select_related("episode")}
    missing = [e.pk for e in episodes if e.pk not in rows]
    if missing:
        raise ValueError(f"episodes without simulated feedback: {missing}; generate it first")
    return [orb_from_episode(bank=bank, trajectory=feedback_trajectory(feedback=rows[e.pk]),
                             source_label=FEEDBACK_SOURCE_LABEL, episode_ref=f"{episode_ref(e)}:feedback")
            for e in episodes]


# --- off-policy and on-policy orchestration ------------------------------------------------------

@dataclass(frozen=True)
class FeedbackBatch:
    index: int
    episode_ids: list[int]
    orb_ids: list[int]


def _feed(index: int, episodes: list[Episode], bank: MemoryBank) -> FeedbackBatch:
    results = feedback_to_orbs(episodes=episodes, bank=bank)
    return FeedbackBatch(index=index, episode_ids=[e.pk for e in episodes], orb_ids=[r.orb.pk for r in results])


def feedback_offpolicy(*, episodes: Iterable[Episode], bank: MemoryBank | str, batch_size: int,
                       seed: int = 0) -> list[FeedbackBatch]:
    """Off-policy: the base agent's episodes are judged once, all of them, before memory sees any
    feedback; the logs then go into memory in batches of `batch_size`, in the given order."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    bank, episodes = bank_resolve(bank), list(episodes)
    for episode in episodes:
        feedback_for_episode(episode=episode, seed=seed)
    batches = [episodes[i:i + batch_size] for i in range(0, len(episodes), batch_size)]
    return [_feed(index, batch, bank) for index, batch in enumerate(batches)]


def feedback_onpolicy(*, batches: Iterable[Callable[[MemoryBank], Iterable[Episode]]], bank: MemoryBank | str,
                      seed: int = 0) -> list[FeedbackBatch]:
    """On-policy: each callable plays a batch with the bank as it is now; that batch's own feedback
    goes into memory before the next callable is called."""
    bank, done = bank_resolve(bank), []
    for index, play in enumerate(batches):
        episodes = list(play(bank))
        for episode in episodes:
            feedback_for_episode(episode=episode, seed=seed)
        done.append(_feed(index, episodes, bank))
    return done
