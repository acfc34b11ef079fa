"""Traces in a browser (issue 32): the traces page filters by role as soon as the role is chosen and
sorts by latency from its header; its empty state; the episode list's latency, tokens and cost
columns with their filter, also on a task's page; each at desktop and phone widths without sideways
scrolling."""
import os
import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from memweb.llm.config import ModelPrice
from tests.browser import login
from tests.evaluation.test_traces import PRICED, a_call, a_task, an_episode

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = "/tmp/shots-traces"


@pytest.fixture(autouse=True)
def _prices(settings):
    settings.LLM_PRICES = {PRICED: ModelPrice(prompt=1.0, completion=2.0)}


def _latencies(page) -> list[str]:
    return page.locator("#trace-rows tbody tr:not(.trace-error) td:nth-child(10)").all_inner_texts()


def _header(page, name: str):
    return page.locator("#trace-rows thead th", has_text=name)


def _shots(page, name: str) -> None:
    """Desktop and phone screenshots for a person to look at; the page must not scroll sideways."""
    os.makedirs(SHOTS, exist_ok=True)
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=f"{SHOTS}/{name}-{width}.png", full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name} scrolls sideways at {width}px"
    page.set_viewport_size({"width": 1280, "height": 860})


def test_the_traces_page_filters_by_role_and_sorts_by_latency(browser_page, live_server, operator_user):
    episode = an_episode(a_task())
    for ms in (900, 40, 300):
        a_call(episode, role="actor", latency_ms=ms)
    a_call(episode, role="user_simulator", latency_ms=5000, status="error", error="HTTP 503 from the endpoint")
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("evaluation:trace_list"))
    expect(page.locator("#trace-summary")).to_contain_text("4 LLM calls")
    page.get_by_label("LLM role").select_option("actor")
    expect(page.locator("#trace-summary")).to_contain_text("3 LLM calls · latency p50 300 ms")
    assert "role=actor" in page.url and "HTTP 503" not in page.locator("#trace-rows").inner_text()
    _header(page, "Latency").get_by_role("link").click()
    expect(_header(page, "Latency")).to_have_attribute("aria-sort", "ascending")
    assert _latencies(page) == ["40 ms", "300 ms", "900 ms"]
    _header(page, "Latency").get_by_role("link").click()
    expect(_header(page, "Latency")).to_have_attribute("aria-sort", "descending")
    assert _latencies(page) == ["900 ms", "300 ms", "40 ms"]
    assert "role=actor" in page.url and "sort=-latency" in page.url  # the filter survives the sort
    page.get_by_label("LLM role").select_option("user_simulator")
    expect(page.locator("#trace-rows")).to_contain_text("HTTP 503 from the endpoint")
    _shots(page, "traces")


def test_the_episode_list_shows_usage_and_filters_by_latency(browser_page, live_server, operator_user):
    task = a_task()
    an_episode(task, agent="scripted", customer="agenda", latency_ms=80)
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("evaluation:trace_list"))
    expect(page.locator("#trace-empty")).to_contain_text("Scripted runs make no LLM calls")
    _shots(page, "traces-empty")
    slow = an_episode(task, latency_ms=7000)
    a_call(slow, tokens_in=2000, tokens_out=1000)
    page.goto(live_server.url + reverse("evaluation:task_detail", args=[task.pk]))
    expect(page.locator("#task-episodes + .table-wrap tbody tr")).to_have_count(2)
    _shots(page, "task")
    page.goto(live_server.url + reverse("evaluation:episode_list"))
    expect(page.locator("#episode-count")).to_have_text(re.compile(r"^2 episodes"))
    scripted_row = page.locator("#episode-rows tbody tr", has_text="80 ms")
    expect(scripted_row.locator(".badge-scripted", has_text="scripted")).to_have_count(2)  # the agent, and tokens with cost
    assert "$0" not in scripted_row.inner_text()
    expect(page.locator("#episode-rows tbody tr", has_text="7000 ms")).to_contain_text("2000 → 1000")
    _shots(page, "episodes")
    page.get_by_label("Min latency (ms)").fill("1000")
    page.get_by_label("Min latency (ms)").dispatch_event("change")
    expect(page.locator("#episode-count")).to_contain_text("1 episode matches min latency (ms) “1000”")
    expect(page.locator("#episode-rows tbody tr")).to_have_count(1)
    expect(page.locator("#episode-rows tbody tr")).to_contain_text("$0.0040")
