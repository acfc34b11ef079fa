"""The active calibration of the action model: its P(·|S) table, editing it, recalibrating it to
realised scores or refitting it to people's actions in an annotation campaign, and the chart data
that compares the two."""
from dataclasses import dataclass

from django.utils import timezone

from annotation.services import campaign_action_fit
from evaluation.feedback import formulas as fm
from evaluation.feedback.models import CalibrationSetting
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.services.selectors import FeedbackRates, feedback_of

CURVE_KEYS = ("score", "p_like", "p_dislike", "p_none", "p_copy")
# Each curve has three free parameters; with fewer conversations than this the fit follows noise.
MIN_FIT_PAIRS = 10


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
    if params.metric != CalibrationSetting.Metric.CORRECTNESS:
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
class PeopleFit:
    """The action model refitted to a campaign's people, beside the active one (nothing saved)."""

    campaign_id: int
    campaign: str
    n: int
    params: FeedbackParams | None  # the active parameters with the fitted curves, rates and p(S)
    rows: list[dict]  # score, n, before_like, before_dislike, fit_like, fit_dislike, observed_like, observed_dislike
    problem: str | None  # why `params` cannot become the calibration; None when they can
    active: bool  # the fit is already the calibration (e.g. just applied)


def calibration_fit(*, campaign) -> PeopleFit:
    """Fit P(L|S) and P(D|S) to (simulated score, people's majority action) pairs of an annotation
    campaign. ValueError when it has fewer than MIN_FIT_PAIRS such conversations."""
    fit = campaign_action_fit(campaign=campaign)
    n = fit.n if fit else 0
    if n < MIN_FIT_PAIRS:
        raise ValueError(f"campaign “{campaign.name}” has {n} conversation{'s' if n != 1 else ''} with a simulated "
                         f"score and a majority action of people; refitting needs at least {MIN_FIT_PAIRS}")
    current = CalibrationSetting.current().params()
    rows = [_before_after(before, after) for before, after in zip(calibration_table(params=current).rows, fit.rows)]
    found = {"campaign_id": campaign.pk, "campaign": campaign.name, "n": n, "rows": rows}
    try:
        params = FeedbackParams(**{**current.model_dump(), **fit.params})
        params.check()
    except ValueError as exc:
        return PeopleFit(**found, params=None, problem=str(exc), active=False)
    return PeopleFit(**found, params=params, problem=None, active=params == current)


def _before_after(before: dict, fitted: dict) -> dict:
    return {"score": before["score"], "n": fitted["n"], "before_like": before["p_like"],
            "before_dislike": before["p_dislike"], "fit_like": fitted["p_like"], "fit_dislike": fitted["p_dislike"],
            "observed_like": fitted["observed_like"], "observed_dislike": fitted["observed_dislike"]}


def calibration_refit(*, campaign, user=None, label: str = "") -> CalibrationSetting:
    """Make the fit to a campaign's people the active calibration; ValueError (nothing saved) when
    the campaign has too few conversations or the fitted curves cannot be met as targets."""
    fit = calibration_fit(campaign=campaign)
    if fit.problem:
        raise ValueError(f"the fit to people cannot be used: {fit.problem}")
    source = f"refitted to people's actions in campaign “{fit.campaign}” ({fit.n} conversations)"
    source += f" ({label})" if label else ""
    return calibration_update(setting=CalibrationSetting.current(), params=fit.params, user=user, source=source)


def calibration_curves(*, table: CalibrationTable) -> dict:
    """P(L|S), P(D|S), P(N|S), P(C|S) over S, one list per key, for the calibration page's chart."""
    return {key: [row[key] for row in table.rows] for key in CURVE_KEYS}


def calibration_histogram(*, table: CalibrationTable, rates: FeedbackRates) -> dict:
    """Realised share of each S beside the distribution the model is calibrated under."""
    return {"scores": [row["score"] for row in table.rows], "p_score": [row["p_score"] for row in table.rows],
            "realised": [count / rates.n for count in rates.histogram] if rates.n else []}
