"""Traces (issue 32): the episode list's latency, tokens and cost columns with their sorts and
filters, and the traces page of every LLM call across runs: its filters, sorts, summary line,
workspace scoping, and the label that scripted (offline) episodes carry instead of a made-up $0."""
import uuid

import pytest
from django.urls import reverse

from evaluation.models import Episode, Task, TaskSet
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from evaluation.views import TRACE_SORTING
from memweb.llm.config import ModelPrice
from memweb.models import LLMCall, Workspace

PRICED, UNPRICED = "gpt-priced", "local-unpriced"


@pytest.fixture(autouse=True)
def _prices(settings):
    settings.LLM_PRICES = {PRICED: ModelPrice(prompt=1.0, completion=2.0)}  # dollars per million tokens


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


def a_task(workspace: Workspace | None = None, name: str = "traces") -> Task:
    task_set = TaskSet.objects.create(name=name, **({"workspace": workspace} if workspace else {}))
    return Task.objects.create(task_set=task_set, external_id=f"{name}-refund", domain="clothing", split="test",
                               difficulty="easy", spec={})


def an_episode(task: Task, *, agent="llm", customer="llm", latency_ms=1000, status="completed",
               traced=True) -> Episode:
    return Episode.objects.create(
        task=task, task_snapshot={}, seed=0, agent_backend=agent, customer_backend=customer, memory_kind="none",
        max_turns=12, status=status, ended_by="stop", success=status == "completed", reward=1.0, turns=2,
        latency_ms=latency_ms, trace_id=uuid.uuid4() if traced else None)


def a_call(episode: Episode, *, role="actor", model=PRICED, tokens_in=1000, tokens_out=500, latency_ms=200,
           status="ok", error="", turn=0) -> LLMCall:
    return LLMCall.objects.create(role=role, model=model, base_url="http://llm.test/v1", tokens_in=tokens_in,
                                  tokens_out=tokens_out, latency_ms=latency_ms, status=status, error=error,
                                  trace_id=episode.trace_id, turn=turn)


def in_run(episode: Episode) -> EvaluationRun:
    run = EvaluationRun.objects.create(name=f"run of {episode.pk}")
    trial = Trial.objects.create(run=run, number=1)
    RunEpisode.objects.create(run=run, trial=trial, task=episode.task, task_key=episode.task.external_id,
                              status="done", episode=episode)
    return run


def episodes_listed(client, **params) -> list[int]:
    response = client.get(reverse("evaluation:episode_list"), params)
    assert response.status_code == 200
    return [row.pk for row in response.context["page"].object_list]


def calls_listed(client, **params) -> list[int]:
    response = client.get(reverse("evaluation:trace_list"), params)
    assert response.status_code == 200
    return [row.pk for row in response.context["page"].object_list]


# --- the episode list ---------------------------------------------------------------------


def test_the_episode_list_shows_each_episodes_latency_tokens_and_cost(operator):
    episode = an_episode(a_task(), latency_ms=4321)
    a_call(episode, tokens_in=1000, tokens_out=500)  # $0.001 + $0.001
    a_call(episode, role="user_simulator", tokens_in=3000, tokens_out=0)  # $0.003
    body = operator.get(reverse("evaluation:episode_list")).content.decode()
    assert "4321 ms" in body and "4000 → 500" in body and "$0.0050" in body
    row = operator.get(reverse("evaluation:episode_list")).context["page"].object_list[0]
    assert (row.llm_calls, row.llm_tokens_in, row.llm_tokens_out) == (2, 4000, 500)
    assert row.llm_cost == pytest.approx(0.005)


def test_a_model_without_a_price_makes_the_episodes_cost_unknown_not_cheaper(operator):
    episode = an_episode(a_task())
    a_call(episode, model=PRICED)
    a_call(episode, model=UNPRICED)
    row = operator.get(reverse("evaluation:episode_list")).context["page"].object_list[0]
    assert row.llm_calls == 2 and row.llm_cost is None


def test_a_scripted_episode_is_labelled_scripted_never_shown_as_costing_nothing(operator):
    task = a_task()
    an_episode(task, agent="scripted", customer="agenda")
    body = operator.get(reverse("evaluation:episode_list")).content.decode()
    usage = body.split("ms</td>", 1)[1].split("</tr>", 1)[0]  # the cells after the latency
    assert '<td class="num nowrap" colspan="2">— <span class="badge badge-scripted" title="Offline backends: no LLM ' \
           'call, so no tokens and no cost">scripted</span></td>' in usage
    assert "$0" not in usage and "0 → 0" not in usage


def test_sorting_by_latency_tokens_and_cost_orders_the_episodes(operator):
    task = a_task()
    slow_cheap, fast_dear, middle = (an_episode(task, latency_ms=ms) for ms in (9000, 100, 3000))
    a_call(slow_cheap, tokens_in=10, tokens_out=10)
    a_call(fast_dear, tokens_in=90_000, tokens_out=9_000)
    a_call(middle, tokens_in=5_000, tokens_out=10)
    scripted = an_episode(task, agent="scripted", customer="agenda", latency_ms=50)
    assert episodes_listed(operator, sort="latency") == [scripted.pk, fast_dear.pk, middle.pk, slow_cheap.pk]
    assert episodes_listed(operator, sort="-latency") == [slow_cheap.pk, middle.pk, fast_dear.pk, scripted.pk]
    assert episodes_listed(operator, sort="-tokens") == [fast_dear.pk, middle.pk, slow_cheap.pk, scripted.pk]
    # No cost (scripted) sorts last both ways: unknown is not cheapest.
    assert episodes_listed(operator, sort="cost") == [slow_cheap.pk, middle.pk, fast_dear.pk, scripted.pk]
    assert episodes_listed(operator, sort="-cost") == [fast_dear.pk, middle.pk, slow_cheap.pk, scripted.pk]


def test_the_episode_list_filters_by_latency_errors_and_model(operator):
    task = a_task()
    quick = an_episode(task, latency_ms=200)
    slow = an_episode(task, latency_ms=8000)
    broken = an_episode(task, latency_ms=500, status="error")
    a_call(quick, model=PRICED)
    a_call(slow, model=UNPRICED, status="error", error="timed out after 3 attempts")
    assert set(episodes_listed(operator, min_latency=500)) == {slow.pk, broken.pk}
    assert episodes_listed(operator, error="infrastructure") == [broken.pk]
    assert episodes_listed(operator, error="llm") == [slow.pk]
    assert episodes_listed(operator, model=UNPRICED) == [slow.pk]
    assert episodes_listed(operator, model=PRICED, min_latency=100) == [quick.pk]
    body = operator.get(reverse("evaluation:episode_list"), {"error": "llm"}).content.decode()
    assert "1 LLM error" in body


def test_the_model_filter_offers_only_models_of_this_workspaces_calls(operator):
    a_call(an_episode(a_task()), model=PRICED)
    elsewhere = Workspace.objects.create(slug="elsewhere", name="Elsewhere")
    a_call(an_episode(a_task(elsewhere, name="theirs")), model="their-secret-model")
    form = operator.get(reverse("evaluation:episode_list")).context["form"]
    assert [value for value, _ in form.fields["model"].choices] == ["", PRICED]
    body = operator.get(reverse("evaluation:episode_list"), {"model": "their-secret-model"}).content.decode()
    assert "Select a valid choice. their-secret-model is not one of the available choices." in body


def test_a_tasks_page_shows_the_same_usage_cells(operator):
    task = a_task()
    a_call(an_episode(task), tokens_in=2000, tokens_out=1000)
    body = operator.get(reverse("evaluation:task_detail", args=[task.pk])).content.decode()
    assert "2000 → 1000" in body and "$0.0040" in body


# --- the traces page ----------------------------------------------------------------------


def test_the_traces_page_lists_each_call_with_its_run_episode_and_cost(operator):
    episode = an_episode(a_task())
    run = in_run(episode)
    call = a_call(episode, role="actor", turn=3, tokens_in=2000, tokens_out=1000, latency_ms=750)
    failed = a_call(episode, role="user_simulator", model=UNPRICED, status="error", error="HTTP 503 from the endpoint")
    response = operator.get(reverse("evaluation:trace_list"))
    rows = {row.pk: row for row in response.context["page"].object_list}
    assert (rows[call.pk].run_id, rows[call.pk].episode_id) == (run.pk, episode.pk)
    assert rows[call.pk].cost == pytest.approx(0.004) and rows[failed.pk].cost is None
    body = response.content.decode()
    assert f'href="{reverse("evaluation:episode_detail", args=[episode.pk])}">#{episode.pk}</a>' in body
    assert f'href="{reverse("evaluation:run_detail", args=[run.pk])}">#{run.pk}</a>' in body
    assert "HTTP 503 from the endpoint" in body and "750 ms" in body


def test_each_trace_filter_narrows_the_calls(operator):
    task = a_task()
    first, second = an_episode(task), an_episode(task)
    run = in_run(second)
    actor = a_call(first, role="actor", model=PRICED, latency_ms=100)
    simulator = a_call(first, role="user_simulator", model=UNPRICED, latency_ms=2500)
    failed = a_call(second, role="actor", model=PRICED, status="error", error="timeout", latency_ms=9000)
    assert set(calls_listed(operator)) == {actor.pk, simulator.pk, failed.pk}
    assert set(calls_listed(operator, role="actor")) == {actor.pk, failed.pk}
    assert calls_listed(operator, model=UNPRICED) == [simulator.pk]
    assert calls_listed(operator, status="error") == [failed.pk]
    assert set(calls_listed(operator, min_latency=2000)) == {simulator.pk, failed.pk}
    assert calls_listed(operator, run=run.pk) == [failed.pk]
    assert calls_listed(operator, role="actor", min_latency=50, status="ok") == [actor.pk]


def test_sorting_the_traces_orders_the_calls(operator):
    episode = an_episode(a_task())
    slow = a_call(episode, latency_ms=5000, tokens_in=10)
    fast = a_call(episode, latency_ms=20, tokens_in=90_000)
    unpriced = a_call(episode, model=UNPRICED, latency_ms=700, tokens_in=500)
    assert calls_listed(operator, sort="latency") == [fast.pk, unpriced.pk, slow.pk]
    assert calls_listed(operator, sort="-latency") == [slow.pk, unpriced.pk, fast.pk]
    assert calls_listed(operator, sort="-tokens") == [fast.pk, unpriced.pk, slow.pk]
    assert calls_listed(operator, sort="-cost") == [fast.pk, slow.pk, unpriced.pk]  # unknown cost last


def test_the_summary_line_sums_the_filtered_calls(operator):
    episode = an_episode(a_task())
    for ms in (100, 200, 300, 400, 1000):
        a_call(episode, latency_ms=ms, tokens_in=1000, tokens_out=1000)  # $0.003 each
    a_call(episode, role="user_simulator", latency_ms=50, tokens_in=7, tokens_out=7)
    summary = operator.get(reverse("evaluation:trace_list"), {"role": "actor"}).context["summary"]
    assert (summary["calls"], summary["tokens_in"], summary["tokens_out"]) == (5, 5000, 5000)
    assert summary["p50_ms"] == pytest.approx(300) and summary["p95_ms"] == pytest.approx(880)
    assert summary["cost"] == pytest.approx(0.015)
    body = operator.get(reverse("evaluation:trace_list"), {"role": "actor"}).content.decode()
    assert "5 LLM calls · latency p50 <strong>300 ms</strong>, p95 <strong>880 ms</strong>" in body
    assert "5000 tokens in, 5000 out · cost <strong>$0.0150</strong>" in body


def test_another_workspaces_calls_and_calls_of_no_episode_never_appear(operator):
    mine = a_call(an_episode(a_task()), role="actor")
    elsewhere = Workspace.objects.create(slug="elsewhere", name="Elsewhere")
    a_call(an_episode(a_task(elsewhere, name="theirs")), role="their_role", model="their-model")
    LLMCall.objects.create(role="reflector", model=PRICED, base_url="http://llm.test/v1", status="ok")  # no trace
    response = operator.get(reverse("evaluation:trace_list"))
    assert [row.pk for row in response.context["page"].object_list] == [mine.pk]
    assert response.context["summary"]["calls"] == 1
    form = response.context["form"]
    assert [v for v, _ in form.fields["role"].choices] == ["", "actor"]
    assert [v for v, _ in form.fields["model"].choices] == ["", PRICED]
    assert "their-model" not in response.content.decode()


def test_with_no_calls_the_page_explains_that_scripted_runs_make_none(operator):
    an_episode(a_task(), agent="scripted", customer="agenda")
    body = operator.get(reverse("evaluation:trace_list")).content.decode()
    assert "No LLM calls yet" in body and "Scripted runs make no LLM calls" in body


def test_filters_matching_nothing_offer_to_clear_them(operator):
    a_call(an_episode(a_task()), latency_ms=100)
    body = operator.get(reverse("evaluation:trace_list"), {"min_latency": 60_000}).content.decode()
    assert "No LLM call passes these filters" in body and "Scripted runs" not in body


def test_a_bad_trace_filter_is_named_at_its_field(operator):
    a_call(an_episode(a_task()))
    response = operator.get(reverse("evaluation:trace_list"), {"min_latency": "-5", "role": "nobody"})
    assert response.context["form"].errors.keys() == {"min_latency", "role"}
    body = response.content.decode()
    assert "Ensure this value is greater than or equal to 0." in body
    assert "Select a valid choice. nobody is not one of the available choices." in body


def test_with_no_prices_configured_every_cost_is_unknown(operator, settings):
    settings.LLM_PRICES = {}
    episode = an_episode(a_task())
    a_call(episode)
    trace_page = operator.get(reverse("evaluation:trace_list"), {"sort": "cost"})
    assert trace_page.context["page"].object_list[0].cost is None and trace_page.context["summary"]["cost"] is None
    assert operator.get(reverse("evaluation:episode_list"), {"sort": "-cost"}).context["page"].object_list[0].llm_cost is None


def test_the_traces_sort_by_each_of_their_columns_both_ways(operator):
    a_call(an_episode(a_task()))
    for key in TRACE_SORTING.columns:
        for asked in (key, f"-{key}"):
            response = operator.get(reverse("evaluation:trace_list"), {"sort": asked})
            assert response.status_code == 200 and "cannot be sorted" not in response.content.decode(), asked
            assert f'data-sort="{key}"' in response.content.decode()


def test_a_calls_error_text_is_shown_as_text_never_as_markup(operator):
    # LLMCall.error holds what an endpoint answered; the probe world of tests/reliability has no calls.
    a_call(an_episode(a_task()), status="error", error='<img src=x onerror="alert(1)">bad gateway')
    body = operator.get(reverse("evaluation:trace_list")).content.decode()
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;bad gateway" in body and "<img src=x" not in body
