"""The simulated-feedback JSON API (mounted at /api/evaluation/feedback), for operators only.

Errors are `{"detail": ...}`: 404 unknown episode, run or campaign, or no feedback yet; 422 invalid
input, calibration targets that cannot be met (the message names S or the field), or a campaign with
too few conversations rated by people to refit to.
"""
from dataclasses import asdict

from ninja import Query, Router
from ninja.errors import HttpError
from ninja.responses import Status

from annotation.services import campaign_find
from evaluation.feedback.models import CalibrationSetting, EpisodeFeedback
from evaluation.feedback.schemas import (
    CalibrationOut,
    FeedbackOut,
    GenerateIn,
    RatesOut,
    RatesQuery,
    RecalibrateIn,
    RefitIn,
    RefitOut,
)
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
from evaluation.models import Episode
from evaluation.vocabulary import EvaluationScope
from memweb.auth import api_auth
from memweb.roles import Role
from memweb.schemas import ErrorOut

router = Router(tags=["evaluation feedback"])
RUNS_READ = api_auth(Role.OPERATOR, scope=EvaluationScope.RUNS_READ)
RUNS_LAUNCH = api_auth(Role.OPERATOR, scope=EvaluationScope.RUNS_LAUNCH)
























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
    episode = Episode.objects.filter(pk=episode_id).first()
    if episode is None:
        raise HttpError(404, f"No episode #{episode_id}")
    return episode


def _latest(request, latest: int, domain: str | None = None):
    episodes = Episode.objects.filter(simulated_feedback__isnull=False)
    return (episodes.filter(task__domain=domain) if domain else episodes)[:latest]


def _run_episodes(request, run_id: int):
    run = run_find(run_id=run_id)
    if run is None or run.workspace_id != request.workspace.pk:
        raise HttpError(404, f"No evaluation run #{run_id}")
    return run_episodes(run=run)


def _selection(request, payload: RecalibrateIn) -> tuple:
    """(episodes, label) of a recalibration request, from the request's workspace only."""
    if payload.episode_ids is not None:
        mine = Episode.objects.filter(pk__in=payload.episode_ids)
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
