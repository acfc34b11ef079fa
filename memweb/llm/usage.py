"""What LLM calls cost in tokens, dollars and time, summed in the database rather than row by row.

A call's cost comes from the model's price (settings.LLM_PRICES); a model without one has an
unknown cost, shown as a dash, never as 0. Offline backends make no calls, so cost nothing.
"""
from datetime import timedelta

from django.conf import settings
from django.db.models import Aggregate, Count, FloatField, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from memweb.models import LLMCall


class Percentile(Aggregate):
    """PostgreSQL's percentile_cont: the value `fraction` of the rows lie below, interpolated."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression, *, fraction: float, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)


def llm_cost(*, model: str, tokens_in: int, tokens_out: int) -> float | None:
    price = settings.LLM_PRICES.get(model)
    return price.cost(tokens_in, tokens_out) if price else None


def _costs_by(calls, key: str) -> dict[str, float | None]:
    """Dollars per value of `key`: None where any of its calls' models has no price."""
    costs: dict[str, float | None] = {}
    rows = calls.order_by().values(key, "model").annotate(tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"))
    for row in rows:
        cost = llm_cost(model=row["model"], tokens_in=row["tokens_in"], tokens_out=row["tokens_out"])
        known = costs.get(row[key], 0.0)
        costs[row[key]] = None if cost is None or known is None else known + cost
    return costs


def llm_usage_by_role(*, calls) -> list[dict]:
    """Per role of `calls` (an LLMCall queryset): calls, retries, failures, tokens, dollars and the
    calls' latency p50/p95 in ms."""
    rows = list(calls.order_by("role").values("role").annotate(
        calls=Count("pk"), retries=Sum("attempts") - Count("pk"),
        errors=Count("pk", filter=Q(status=LLMCall.Status.ERROR)),
        tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"),
        p50_ms=Percentile("latency_ms", fraction=0.5), p95_ms=Percentile("latency_ms", fraction=0.95)))
    costs = _costs_by(calls, "role")
    return [{**row, "cost": costs.get(row["role"])} for row in rows]


def llm_usage_total(rows: list[dict]) -> dict:
    """The roles' rows of llm_usage_by_role added up (cost unknown when one role's is)."""
    costs = [row["cost"] for row in rows]
    return {"calls": sum(row["calls"] for row in rows), "tokens_in": sum(row["tokens_in"] for row in rows),
            "tokens_out": sum(row["tokens_out"] for row in rows),
            "cost": None if None in costs else sum(costs)}


def llm_cost_per_day(*, workspace, days: int = 30) -> dict:
    """Chart data: dollars a day by role over the last `days` days, for models with a price, and how
    many calls were left out for lack of one. LLM endpoints are the server's (one configuration for
    every workspace) and so are their calls: the chart is the same in every `workspace`."""
    since = timezone.now() - timedelta(days=days)
    calls = LLMCall.objects.filter(created_at__gte=since).annotate(day=TruncDate("created_at"))
    rows = calls.order_by().values("day", "role", "model").annotate(tokens_in=Sum("tokens_in"),
                                                                   tokens_out=Sum("tokens_out"), n=Count("pk"))
    cost: dict[tuple[str, str], float] = {}
    unpriced = 0
    for row in rows:
        dollars = llm_cost(model=row["model"], tokens_in=row["tokens_in"], tokens_out=row["tokens_out"])
        if dollars is None:
            unpriced += row["n"]
            continue
        key = (row["day"].isoformat(), row["role"])
        cost[key] = cost.get(key, 0.0) + dollars
    labels = sorted({day for day, _ in cost})
    roles = sorted({role for _, role in cost})
    series = [{"label": role, "values": [round(cost.get((day, role), 0.0), 6) for day in labels]} for role in roles]
    note = f"{unpriced} call{'s' if unpriced != 1 else ''} of models without a price (MEMWEB_LLM_PRICES) left out" \
        if unpriced else ""
    return {"labels": labels, "series": series, "unit": "$", "kind": "bar", "note": note}


def llm_calls_traced(*, trace_id) -> list[dict]:
    """The calls made under one trace (an episode), oldest first, each with its cost."""
    if trace_id is None:
        return []
    calls = LLMCall.objects.filter(trace_id=trace_id).order_by("created_at", "pk").values(
        "pk", "role", "model", "turn", "tokens_in", "tokens_out", "latency_ms", "attempts", "status", "error")
    return [{**call, "cost": llm_cost(model=call["model"], tokens_in=call["tokens_in"], tokens_out=call["tokens_out"])}
            for call in calls]


def llm_calls_of_traces(traces) -> QuerySet:
    """The calls made under any of `traces` (a queryset of trace ids, say a run's episodes')."""
    return LLMCall.objects.filter(trace_id__in=traces)
