"""Read-only queries on feedback: per-run and per-selection rows, realised rates against the
targets, and the browser's filters."""
from dataclasses import dataclass

import numpy as np
from django.apps import apps
from django.db.models import Q, QuerySet

from evaluation.feedback import formulas as fm
from evaluation.feedback.models import CalibrationSetting, EpisodeFeedback
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.services.actions import action_model
from evaluation.models import Episode

Backend = EpisodeFeedback.Backend
# The browser filters on the critique's backend by these keys (query-string values), e.g. ?backend=fallback.
BACKEND_FILTERS = {backend.name.lower(): backend for backend in Backend}


def feedback_of(episodes) -> QuerySet[EpisodeFeedback]:
    """The feedback rows of a queryset or list of episodes (or episode ids)."""
    if isinstance(episodes, QuerySet):
        ids = episodes.values("pk")
    else:
        ids = [e.pk if isinstance(e, Episode) else int(e) for e in episodes]
    return EpisodeFeedback.objects.filter(episode__in=ids)


def _runs() -> QuerySet:
    # Runs sit above feedback in the stack (docs/ARCHITECTURE.md): their model is reached through
    # Django's app registry, which EvaluationConfig fills, never by importing evaluation.runs.
    return apps.get_model("evaluation", "EvaluationRun").objects.all()


def runs_all() -> QuerySet:
    """Every evaluation run, for choosing whose episodes' feedback to look at."""
    return _runs()


def run_find(*, run_id: int):
    """The evaluation run `run_id`, or None."""
    return _runs().filter(pk=run_id).first()


def run_episodes(*, run) -> QuerySet[Episode]:
    """All episodes of an evaluation run (evaluation.runs), for rates, recalibration and browsing."""
    return Episode.objects.filter(run_episode__run=run)


def run_calibration_source(*, episode: Episode) -> tuple[str, list[int]]:
    """(where the episode's run takes p(S) from, the satisfaction scores realised in the run's
    finished trials before the episode's). An episode outside a run: the reference, no scores.
    Earlier trials only: trials run one after another, so every episode of a trial is calibrated on
    the same scores whatever order its episodes were judged in."""
    place = Episode.objects.filter(pk=episode.pk).values(
        "run_episode__run_id", "run_episode__trial__number", "run_episode__run__spec__feedback_calibration").first()
    if not place or place["run_episode__run_id"] is None:
        return CalibrationSetting.CalibrateOn.REFERENCE.value, []
    scores = EpisodeFeedback.objects.filter(
        episode__run_episode__run_id=place["run_episode__run_id"],
        episode__run_episode__trial__number__lt=place["run_episode__trial__number"]).values_list("score", flat=True)
    # A run's spec stores every setting; one stored without it (a bare row) had the default.
    calibrate_on = place["run_episode__run__spec__feedback_calibration"] or CalibrationSetting.CalibrateOn.REFERENCE.value
    return calibrate_on, list(scores)


@dataclass(frozen=True)
class FeedbackRates:
    n: int
    histogram: list[int]  # count of S = 1..10
    counts: dict  # like, dislike, none, copy
    realised: dict  # like, dislike, none, copy as shares of n
    targets: dict  # like, dislike
    expected: dict | None  # like, dislike under the current model and these episodes' sampled scores


RATE_FIELDS = ("score", "sampled_score", "score_method", "action", "copied")


def feedback_rates(*, episodes=None, params: FeedbackParams | None = None,
                   rows: list[dict] | None = None) -> FeedbackRates:
    """Score histogram and realised action rates of `episodes` (or of feedback `rows` holding
    RATE_FIELDS, as an imported run keeps them) against the targets. `expected` is what the
    calibrated model predicts for these very scores; it equals the targets after recalibrating on them."""
    params = params or CalibrationSetting.current().params()
    rows = list(feedback_of(episodes).values(*RATE_FIELDS)) if rows is None else rows
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


def feedback_browse(*, episodes=None, action: str = "", score_min: int | None = None,
                    score_max: int | None = None, backend: str = "") -> QuerySet[EpisodeFeedback]:
    """Feedback rows, newest first; `backend` filters on the critique's, by a BACKEND_FILTERS key."""
    rows = (feedback_of(episodes) if episodes is not None else EpisodeFeedback.objects.all())
    rows = rows.select_related("episode", "episode__task")
    if action:
        rows = rows.filter(action=action)
    if score_min is not None:
        rows = rows.filter(score__gte=score_min)
    if score_max is not None:
        rows = rows.filter(score__lte=score_max)
    return rows.filter(_backend_filter(BACKEND_FILTERS[backend])) if backend else rows


def _backend_filter(backend: Backend) -> Q:
    if backend == Backend.LLM:
        return Q(critique_backend__startswith=Backend.of_llm(""))
    return Q(critique_backend=backend.value)

