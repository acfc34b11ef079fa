"""A run's tokens, cost and latency by role, summed in the database over its episodes' LLM calls."""
import uuid

import pytest
from django.urls import reverse

from evaluation.runs.services import run_drive
from evaluation.runs.services.usage import run_usage
from memweb.llm.config import ModelPrice
from memweb.models import LLMCall


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


def _call(trace_id, role: str, model: str, latency_ms: int, attempts: int = 1) -> LLMCall:
    return LLMCall.objects.create(trace_id=trace_id, turn=1, role=role, model=model, base_url="http://x/v1",
                                  status="ok", tokens_in=1000, tokens_out=100, latency_ms=latency_ms, attempts=attempts)


def test_the_run_page_sums_its_episodes_calls_by_role(operator, launch, settings, django_assert_max_num_queries):
    settings.LLM_PRICES = {"priced": ModelPrice(prompt=2.0, completion=10.0)}
    run = run_drive(run=launch(trials=1, memory_mode="none"))
    page = operator.get(reverse("evaluation:run_detail", args=[run.pk])).content.decode()
    assert 'id="run-usage-scripted"' in page  # a scripted run: no calls, no cost

    first, second = (row.episode.trace_id for row in run.run_episodes.select_related("episode")[:2])
    for trace_id, latency in ((first, 100), (first, 200), (second, 300), (second, 400)):
        _call(trace_id, "actor", "priced", latency, attempts=2 if latency == 400 else 1)
    _call(second, "scorer", "unpriced-local", 50)
    _call(uuid.uuid4(), "actor", "priced", 9000)  # another episode's call
    with django_assert_max_num_queries(4):
        usage = run_usage(run=run)
    actor, scorer = usage["roles"]
    assert (actor["role"], actor["calls"], actor["retries"], actor["tokens_in"]) == ("actor", 4, 1, 4000)
    assert (actor["p50_ms"], actor["p95_ms"]) == (250.0, pytest.approx(385.0))
    assert actor["cost"] == pytest.approx(4 * (1000 * 2.0 + 100 * 10.0) / 1e6)
    assert scorer["cost"] is None and usage["total"]["cost"] is None  # unknown, not 0
    assert usage["episodes"]["count"] == 3

    page = operator.get(reverse("evaluation:run_detail", args=[run.pk])).content.decode()
    assert '<tr data-role="actor">' in page and "385 ms" in page and "$0.0120" in page
    assert '<tr data-role="scorer">' in page and 'id="run-usage-scripted"' not in page
    assert f'{reverse("evaluation:trace_list")}?run={run.pk}" id="run-traces-link"' in page  # each call, one by one
