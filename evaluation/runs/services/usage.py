"""A run's LLM usage by role (tokens, dollars, latency p50/p95) and its episodes' latency, summed
in the database over the calls its episodes made (memweb.llm.trace links each call to its episode)."""
from django.db.models import Count, Sum

from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, RunEpisode
from memweb.llm.usage import Percentile, llm_calls_of_traces, llm_usage_by_role, llm_usage_total


def run_usage(*, run: EvaluationRun) -> dict:
    traces = Episode.objects.filter(run_episode__run=run, trace_id__isnull=False).values("trace_id")
    roles = llm_usage_by_role(calls=llm_calls_of_traces(traces))
    episodes = RunEpisode.objects.filter(run=run, status=RunEpisode.Status.DONE).aggregate(
        count=Count("pk"), tokens=Sum("tokens"),
        p50_ms=Percentile("latency_ms", fraction=0.5), p95_ms=Percentile("latency_ms", fraction=0.95))
    return {"roles": roles, "total": llm_usage_total(roles), "episodes": episodes}
