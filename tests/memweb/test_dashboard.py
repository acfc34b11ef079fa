"""The home page as a dashboard: what needs attention (counts the apps declare) and trends over
time drawn with Chart.js, with empty states when there is no data."""
import pytest
from django.urls import reverse

from annotation.models import Campaign
from evaluation.models import Episode, Task, TaskSet
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from memweb.llm.config import ModelPrice
from memweb.models import LLMCall
from tests.browser import login

HOME = reverse("home")


def _run(name: str, *, memory_mode: str, status: str = "completed", successes: int = 0, finished: int = 0,
         errors: int = 0, agent_backend: str = "scripted") -> EvaluationRun:
    run = EvaluationRun.objects.create(name=name, memory_mode=memory_mode, status=status, successes=successes,
                                       episodes_finished=finished, episodes_error=errors, episodes_total=finished)
    task_set, _ = TaskSet.objects.get_or_create(name="dashboard")
    task, _ = Task.objects.get_or_create(task_set=task_set, external_id="t1", defaults={
        "domain": "clothing", "split": "test", "difficulty": "easy", "spec": {}})
    episode = Episode.objects.create(task=task, task_snapshot={}, seed=0, agent_backend=agent_backend,
                                     customer_backend="agenda", max_turns=12, status="completed", ended_by="stop",
                                     success=True, reward=1.0, turns=1)
    RunEpisode.objects.create(run=run, trial=Trial.objects.create(run=run, number=1), task=task, task_key=name,
                              episode=episode, status="done")
    return run


def _dashboard_data(annotator_user, user_for_role):
    """Two runs a memory mode apart, a failed one, priced and unpriced LLM calls, and an open
    campaign that needs three annotators when only two exist."""
    _run("baseline", memory_mode="none", successes=3, finished=10)
    _run("memory", memory_mode="memorb", successes=6, finished=11, errors=1, agent_backend="llm:qwen")
    failed = _run("broken", memory_mode="none", status="failed")
    LLMCall.objects.create(role="actor", model="priced", base_url="x", status="ok", tokens_in=1_000_000)
    LLMCall.objects.create(role="scorer", model="local", base_url="x", status="ok", tokens_in=5)
    user_for_role("annotator")
    Campaign.objects.create(name="short study", status=Campaign.Status.OPEN, annotators_per_item=3)
    return failed


def test_it_shows_empty_states_without_data(client, operator_user):
    client.force_login(operator_user)
    page = client.get(HOME).content.decode()
    assert "What needs attention" in page and page.count("data-empty=") == 3 and "<canvas" not in page
    assert "chart.umd.min.js" in page and "memweb/home.js" in page


def test_it_counts_what_needs_attention_and_charts_the_trends(client, operator_user, annotator_user, user_for_role,
                                                              settings):
    settings.LLM_PRICES = {"priced": ModelPrice(prompt=0.5, completion=0.0)}
    failed = _dashboard_data(annotator_user, user_for_role)
    client.force_login(operator_user)
    response = client.get(HOME)
    counts = {count["label"]: (count["value"], count["url"]) for count in response.context["counts"]}
    assert counts["Runs failed in the last 7 days"] == (1, reverse("evaluation:run_list") + "?status=failed")
    assert counts["Campaigns short of annotators"] == (1, reverse("annotation:campaign_list"))
    charts = {chart["title"]: chart["data"] for chart in response.context["charts"]}
    by_mode = charts["Success rate by memory mode"]
    assert {s["label"]: s["values"] for s in by_mode["series"]} == {"no memory": [30.0], "MemOrb": [60.0]}
    assert {s["label"] for s in charts["Success rate by model"]["series"]} == {"scripted", "llm:qwen"}
    cost = charts["LLM cost by role per day (the whole server)"]
    assert [(s["label"], s["values"]) for s in cost["series"]] == [("actor", [0.5])]
    assert cost["note"].startswith("1 call of models without a price")
    assert response.content.decode().count("<canvas") == 3
    listed = client.get(counts["Runs failed in the last 7 days"][1]).context["page"].object_list
    assert [run.pk for run in listed] == [failed.pk]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_dashboard_draws_its_charts_and_links_what_needs_attention(browser_page, live_server, operator_user,
                                                                       annotator_user, user_for_role):
    failed = _dashboard_data(annotator_user, user_for_role)
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + HOME)
    # Chart.js drew every trend on its canvas (no CDN: served as a static file).
    page.wait_for_function("() => document.querySelectorAll('canvas[data-drawn=true]').length === 2")
    assert page.evaluate("Object.keys(Chart.instances).length") == 2  # success by mode and by model
    assert page.locator("[data-empty]").count() == 1  # no priced calls here: the cost chart says so
    # An attention count links to the runs it counts.
    page.get_by_role("link", name="Runs failed in the last 7 days").click()
    page.wait_for_url("**/runs/?status=failed")
    assert page.get_by_role("link", name=failed.name).is_visible()


def test_a_trend_of_a_single_day_is_drawn_as_bars_not_as_lone_dots(browser_page, live_server, operator_user,
                                                                    annotator_user, user_for_role):
    _dashboard_data(annotator_user, user_for_role)  # every run finished today: one day per chart
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + HOME)
    page.wait_for_function("() => document.querySelectorAll('canvas[data-drawn=true]').length === 2")
    drawn = page.evaluate("""() => Object.values(Chart.instances).map(chart => ({
        days: chart.data.labels.length, type: chart.config.type, offset: chart.options.scales.x.offset}))""")
    assert drawn == [{"days": 1, "type": "bar", "offset": True}] * 2
