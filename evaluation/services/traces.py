"""LLM calls as traces: each call of the call log (memweb.models.LLMCall) beside the episode and run
it was made for, and each episode's calls summed into tokens and dollars, for the episode list and
the traces page.

The call log has no workspace: a call belongs to the workspace of the episode whose trace id it
carries (memweb.llm.trace). Calls made outside any episode (a reflection written from the API, a
feedback critique with no trace) belong to no workspace's page; they are counted only in the
server-wide cost chart of the home page (memweb.llm.usage.llm_cost_per_day).
"""
from dataclasses import dataclass

from django.conf import settings
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce
from django.db.models.lookups import Exact

from evaluation.models import Episode
from memweb.llm.usage import Percentile, llm_usage_by_role, llm_usage_total
from memweb.models import LLMCall

# A typed NULL: with no price configured, PostgreSQL must still know what the sum of nothing is.
_NO_DOLLARS = Cast(Value(None), FloatField())


def call_cost() -> Case:
    """A call's dollars as a database expression: each priced model's own formula (ModelPrice.cost,
    given the token columns instead of numbers), NULL for a model without a price, so that lists
    sort by cost and a missing price never reads as $0."""
    priced = [When(model=model, then=price.cost(F("tokens_in"), F("tokens_out")))
              for model, price in settings.LLM_PRICES.items()]
    return Case(*priced, default=_NO_DOLLARS, output_field=FloatField())


def _per_episode(aggregate, output_field) -> Subquery:
    """`aggregate` over the calls of the outer episode's trace (NULL when it made none)."""
    calls = LLMCall.objects.filter(trace_id=OuterRef("trace_id")).order_by().values("trace_id")
    return Subquery(calls.annotate(value=aggregate).values("value"), output_field=output_field)


def episodes_with_usage(episodes: QuerySet) -> QuerySet:
    """`episodes`, each with its LLM calls summed: `llm_calls`, `llm_errors`, `llm_tokens_in`,
    `llm_tokens_out` (NULL without calls) and `llm_cost` (NULL without calls or when one call's
    model has no price)."""
    every_call_priced = Exact(Count("pk"), Count(call_cost()))
    return episodes.annotate(
        llm_calls=Coalesce(_per_episode(Count("pk"), IntegerField()), 0),
        llm_errors=Coalesce(_per_episode(Count("pk", filter=Q(status=LLMCall.Status.ERROR)), IntegerField()), 0),
        llm_tokens_in=_per_episode(Sum("tokens_in"), IntegerField()),
        llm_tokens_out=_per_episode(Sum("tokens_out"), IntegerField()),
        llm_cost=_per_episode(Case(When(every_call_priced, then=Sum(call_cost())), default=_NO_DOLLARS,
                                   output_field=FloatField()), FloatField()),
    )


# Sort keys. An episode's tokens as its calls counted them, else as it stored them (episodes played
# before calls were traced); a call's tokens in and out together.
EPISODE_TOKENS = Coalesce(F("llm_tokens_in") + F("llm_tokens_out"), F("tokens_in") + F("tokens_out"))
CALL_TOKENS = F("tokens_in") + F("tokens_out")


def episode_calls_erred() -> Exists:
    """Whether an LLM call of the outer episode's trace ended in an error (after its retries)."""
    return Exists(LLMCall.objects.filter(trace_id=OuterRef("trace_id"), status=LLMCall.Status.ERROR))


def episode_calls_used(model: str) -> Exists:
    return Exists(LLMCall.objects.filter(trace_id=OuterRef("trace_id"), model=model))


def calls_of_workspace(workspace) -> QuerySet:
    """The calls made for the `workspace`'s episodes."""
    traces = Episode.objects.of(workspace).filter(trace_id__isnull=False).values("trace_id")
    return LLMCall.objects.filter(trace_id__in=traces)


def call_models_of(workspace) -> list[str]:
    return list(calls_of_workspace(workspace).order_by("model").values_list("model", flat=True).distinct())


def call_roles_of(workspace) -> list[str]:
    return list(calls_of_workspace(workspace).order_by("role").values_list("role", flat=True).distinct())


@dataclass(frozen=True)
class TraceFilters:
    role: str = ""
    model: str = ""
    status: str = ""
    min_latency: int | None = None  # ms
    run: int | None = None

    def active(self) -> dict[str, object]:
        return {name: value for name, value in vars(self).items() if value not in (None, "")}


def traces_filtered(*, filters: TraceFilters, workspace) -> QuerySet:
    """The `workspace`'s LLM calls that pass every filter."""
    calls = calls_of_workspace(workspace)
    if filters.run is not None:
        # Runs sit above this app: their rows point at episodes, so the reverse relation filters
        # without importing them.
        in_run = Episode.objects.of(workspace).filter(run_episode__run_id=filters.run, trace_id__isnull=False)
        calls = calls.filter(trace_id__in=in_run.values("trace_id"))
    if filters.role:
        calls = calls.filter(role=filters.role)
    if filters.model:
        calls = calls.filter(model=filters.model)
    if filters.status:
        calls = calls.filter(status=filters.status)
    if filters.min_latency is not None:
        calls = calls.filter(latency_ms__gte=filters.min_latency)
    return calls


def traces_listed(calls: QuerySet, *, workspace) -> QuerySet:
    """`calls` newest first, each with its `episode_id`, `run_id` and `cost` (NULL without a price)."""
    episode = Episode.objects.of(workspace).filter(trace_id=OuterRef("trace_id"))
    return calls.annotate(
        episode_id=Subquery(episode.values("pk")[:1]),
        run_id=Subquery(episode.values("run_episode__run_id")[:1]),
        cost=call_cost(),
    ).order_by("-created_at", "-pk")


def traces_summary(calls: QuerySet) -> dict:
    """How many `calls`, their latency p50/p95 in ms, tokens in and out, and dollars (None when a
    call's model has no price)."""
    total = llm_usage_total(llm_usage_by_role(calls=calls))
    latency = calls.order_by().aggregate(p50_ms=Percentile("latency_ms", fraction=0.5),
                                         p95_ms=Percentile("latency_ms", fraction=0.95))
    return {**total, **latency}
