"""The home page's share of the runs: failed runs to look at, and success over time by memory mode
and by model, one point a day from the runs' stored counters (no episode is read)."""
from datetime import timedelta

from django.db.models import F, OuterRef, Subquery, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from evaluation.memory_layers.registry import memory_layer_label
from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun

RECENT_FAILURES = timedelta(days=7)
TREND_DAYS = 90


def runs_count_failed_recently(*, workspace) -> int:
    since = timezone.now() - RECENT_FAILURES
    return EvaluationRun.objects.of(workspace).filter(status=EvaluationRun.Status.FAILED,
                                                      created_at__gte=since).count()


def _runs_with_verdicts(workspace):
    since = timezone.now() - timedelta(days=TREND_DAYS)
    return (EvaluationRun.objects.of(workspace).filter(created_at__gte=since, imported=False)
            .filter(episodes_finished__gt=F("episodes_error")).annotate(day=TruncDate("created_at")))


def _daily_success(runs, group: str, label) -> dict:
    """Chart data: success % a day per value of `group`, over the episodes that got a verdict."""
    rows = runs.order_by().values("day", group).annotate(
        successes=Sum("successes"), judged=Sum("episodes_finished") - Sum("episodes_error"))
    days = sorted({row["day"].isoformat() for row in rows})
    rates: dict[str, dict[str, float]] = {}
    for row in rows:
        rates.setdefault(label(row[group]), {})[row["day"].isoformat()] = round(100 * row["successes"] / row["judged"], 1)
    return {"labels": days, "unit": "%", "kind": "line",
            "series": [{"label": name, "values": [by_day.get(day) for day in days]} for name, by_day in sorted(rates.items())]}


def success_by_memory_mode(*, workspace) -> dict:
    return _daily_success(_runs_with_verdicts(workspace), "memory_mode", memory_layer_label)


def success_by_model(*, workspace) -> dict:
    """The model is the agent backend its episodes record ("scripted" or "llm:<model>")."""
    model = Episode.objects.filter(run_episode__run=OuterRef("pk")).values("agent_backend")[:1]
    return _daily_success(_runs_with_verdicts(workspace).annotate(model=Subquery(model)), "model",
                          lambda name: name or "unknown")
