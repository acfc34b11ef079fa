"""The simulated-feedback JSON API (mounted at /api/evaluation/feedback), for operators only.

Errors are `{"detail": ...}`: 404 unknown episode, run or campaign, or no feedback yet; 422 invalid
input, calibration targets that cannot be met (the message names S or the field), or a campaign with
too few conversations rated by people to refit to.
"""
from dataclasses import asdict
from datetime import datetime
from typing import Any

from ninja import Query, Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status
from pydantic import ConfigDict, Field, model_validator

from annotation.services import campaign_find
from evaluation.feedback.models import CalibrationSetting, EpisodeFeedback
from evaluation.feedback.services import (
    CalibrationTable,
    PeopleFit,
    calibration_fit,
    calibration_recalibrate,
    calibration_refit,
    calibration_table,
    feedback_for_episode,
    feedback_rates,
    run_episodes,
    run_find,
)
from evaluation.models import Domain, Episode
from evaluation.schemas import MAX_SEED
from evaluation.vocabulary import EvaluationScope
from memweb.auth import api_auth
from memweb.roles import Role
from memweb.schemas import StrictBody
from memweb.workspaces import in_workspace

router = Router(tags=["evaluation feedback"])
RUNS_READ = api_auth(Role.OPERATOR, scope=EvaluationScope.RUNS_READ)
RUNS_LAUNCH = api_auth(Role.OPERATOR, scope=EvaluationScope.RUNS_LAUNCH)


class ErrorOut(Schema):
    detail: str


class FeedbackOut(Schema):
    episode_id: int
    judged_index: int | None
    behavior: str
    reasoning: str
    response: str | None = Field(description="null when the user ends the conversation")
    critique_backend: str
    critique_scripted: bool
    score: int
    sampled_score: int
    score_method: str
    score_backend: str
    score_scripted: bool
    action: str
    copied: bool
    errors: list[dict[str, str]]
    seed: int
    params: dict[str, Any]
    created_at: datetime


class GenerateIn(StrictBody, Schema):
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seed of the action draw (mixed with the episode id).")


class CalibrationRowOut(Schema):
    score: int
    p_score: float
    p_like: float
    p_dislike: float
    p_none: float
    p_copy: float


class CalibrationOut(Schema):
    params: dict[str, Any]
    distribution_source: str
    c_like: float
    c_dislike: float
    global_like: float
    global_dislike: float
    rows: list[CalibrationRowOut]
    binary: dict[str, float] | None


class RecalibrateIn(StrictBody, Schema):
    episode_ids: list[int] | None = Field(None, max_length=100_000, description="Episodes whose scores to use.")
    run_id: int | None = Field(None, description="…or all episodes of an evaluation run.")
    latest: int | None = Field(None, ge=1, le=100_000, description="…or the latest N episodes with feedback.")

    @model_validator(mode="after")
    def _one_selection(self):
        if sum(value is not None for value in (self.episode_ids, self.run_id, self.latest)) != 1:
            raise ValueError("give exactly one of episode_ids, run_id or latest")
        return self


class RefitIn(StrictBody, Schema):
    model_config = ConfigDict(extra="forbid", strict=True)

    campaign_id: int = Field(description="An annotation campaign whose people rated its conversations.")
    apply: bool = Field(False, description="Make the fit the active calibration; otherwise only preview it.")


class RefitRowOut(Schema):
    score: int
    n: int = Field(description="Conversations with this simulated score and a majority action of people.")
    before_like: float
    before_dislike: float
    fit_like: float
    fit_dislike: float
    observed_like: float | None = Field(description="null where n is 0")
    observed_dislike: float | None = Field(description="null where n is 0")


class RefitOut(Schema):
    campaign_id: int
    campaign: str
    n: int
    params: dict[str, Any] | None = Field(description="The calibration with the fit in it; null when it cannot be.")
    problem: str | None = Field(description="Why the fit cannot become the calibration; null when it can.")
    applied: bool
    distribution_source: str = Field(description="Of the active calibration, after this request.")
    rows: list[RefitRowOut]


class RatesQuery(Schema):
    run_id: int | None = Field(None, description="All episodes of this run; otherwise the latest ones.")
    latest: int = Field(200, ge=1, le=100_000)
    domain: Domain | None = None


class RatesOut(Schema):
    n: int
    histogram: list[int]
    counts: dict[str, int]
    realised: dict[str, float]
    targets: dict[str, float]
    expected: dict[str, float] | None


def _feedback_out(feedback: EpisodeFeedback) -> dict:
    out = {name: getattr(feedback, name) for name in FeedbackOut.model_fields}
    out["response"] = feedback.response or None
    return out


def _calibration_out(table: CalibrationTable, setting: CalibrationSetting) -> dict:
    return {"params": table.params.model_dump(mode="json"), "distribution_source": setting.distribution_source,
            "c_like": table.c_like, "c_dislike": table.c_dislike, "global_like": table.global_like,
            "global_dislike": table.global_dislike, "rows": table.rows, "binary": table.binary}


def _refit_out(fit: PeopleFit, *, applied: bool) -> dict:
    params = fit.params.model_dump(mode="json") if fit.params else None
    return {"campaign_id": fit.campaign_id, "campaign": fit.campaign, "n": fit.n, "params": params,
            "problem": fit.problem, "applied": applied, "rows": fit.rows,
            "distribution_source": CalibrationSetting.current().distribution_source}


def _episode(request, episode_id: int) -> Episode:
    episode = in_workspace(Episode, request.workspace).filter(pk=episode_id).first()
    if episode is None:
        raise HttpError(404, f"No episode #{episode_id}")
    return episode


def _latest(request, latest: int, domain: str | None = None):
    episodes = in_workspace(Episode, request.workspace).filter(simulated_feedback__isnull=False)
    return (episodes.filter(task__domain=domain) if domain else episodes)[:latest]


def _run_episodes(request, run_id: int):
    run = run_find(run_id=run_id)
    if run is None or run.workspace_id != request.workspace.pk:
        raise HttpError(404, f"No evaluation run #{run_id}")
    return run_episodes(run=run)


def _selection(request, payload: RecalibrateIn) -> tuple:
    """(episodes, label) of a recalibration request, from the request's workspace only."""
    if payload.episode_ids is not None:
        mine = in_workspace(Episode, request.workspace).filter(pk__in=payload.episode_ids)
        return list(mine.values_list("pk", flat=True)), f"{len(payload.episode_ids)} episode ids"
    if payload.run_id is not None:
        return _run_episodes(request, payload.run_id), f"run #{payload.run_id}"
    return _latest(request, payload.latest), f"latest {payload.latest}"


@router.get("/episodes/{episode_id}", response={200: FeedbackOut, 404: ErrorOut}, auth=RUNS_READ)
def feedback_get(request, episode_id: int):
    feedback = EpisodeFeedback.objects.filter(episode=_episode(request, episode_id)).first()
    if feedback is None:
        raise HttpError(404, f"Episode #{episode_id} has no simulated feedback yet")
    return _feedback_out(feedback)


@router.post("/episodes/{episode_id}", response={200: FeedbackOut, 201: FeedbackOut, 404: ErrorOut,
                                                      422: ErrorOut}, auth=RUNS_LAUNCH)
def feedback_generate(request, episode_id: int, payload: GenerateIn):
    """Generate the episode's feedback (201), or return the existing one unchanged (200)."""
    episode = _episode(request, episode_id)
    existed = EpisodeFeedback.objects.filter(episode=episode).exists()
    try:
        feedback = feedback_for_episode(episode=episode, seed=payload.seed)
    except ValueError as exc:
        return Status(422, {"detail": str(exc)})
    return Status(200 if existed else 201, _feedback_out(feedback))


@router.get("/calibration", response=CalibrationOut, auth=RUNS_READ)
def calibration_get(request):
    setting = CalibrationSetting.current()
    return _calibration_out(calibration_table(params=setting.params()), setting)


@router.post("/calibration/recalibrate", response={200: CalibrationOut, 404: ErrorOut, 422: ErrorOut},
             auth=RUNS_LAUNCH)
def calibration_recalibrate_post(request, payload: RecalibrateIn):
    episodes, label = _selection(request, payload)
    try:
        setting = calibration_recalibrate(episodes=episodes, user=request.auth, label=f"API: {label}")
    except ValueError as exc:
        return Status(422, {"detail": str(exc)})
    return _calibration_out(calibration_table(params=setting.params()), setting)


@router.post("/calibration/recalibrate-from-campaign",
             response={200: RefitOut, 404: ErrorOut, 422: ErrorOut}, auth=RUNS_LAUNCH)
def calibration_refit_post(request, payload: RefitIn):
    """The action model refitted to a campaign's people beside the active one, per score; with
    `apply`, also made the active calibration (applying again changes nothing more)."""
    campaign = campaign_find(campaign_id=payload.campaign_id, workspace=request.workspace)
    if campaign is None:
        raise HttpError(404, f"No annotation campaign #{payload.campaign_id}")
    try:
        fit = calibration_fit(campaign=campaign)
        if payload.apply:
            calibration_refit(campaign=campaign, user=request.auth, label="API")
    except ValueError as exc:
        return Status(422, {"detail": str(exc)})
    return _refit_out(fit, applied=payload.apply)


@router.get("/calibration/rates", response={200: RatesOut, 404: ErrorOut}, auth=RUNS_READ)
def calibration_rates(request, query: Query[RatesQuery]):
    """Score histogram and realised action rates of a run's episodes, or of the latest ones."""
    if query.run_id is not None:
        episodes = _run_episodes(request, query.run_id)
        episodes = episodes.filter(task__domain=query.domain) if query.domain else episodes
    else:
        episodes = _latest(request, query.latest, query.domain)
    return asdict(feedback_rates(episodes=episodes))
