"""In chromium: launch a small run from the form, watch the run page poll while a real worker
plays it, and see the charts, the heatmap and the feedback histogram fill in; a heatmap cell opens
the transcript."""
import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from tests.browser import login
from tests.support.processes import celery_worker, worker_env

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _points(page, chart: str) -> int:
    return int(page.locator(f"#{chart}").get_attribute("data-points") or 0)


def test_it_launches_a_run_and_its_charts_fill_in(browser_page, live_server, operator_user, builtin, real_broker):
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("evaluation:run_new"))
    page.get_by_label("Name", exact=True).fill("browser run")
    page.get_by_label("Task ids").fill("shop-app-001 shop-clo-008")
    page.get_by_label("Trials", exact=True).fill("2")
    page.get_by_label("Simulated user feedback").check()
    page.get_by_role("button", name="Launch run").click()
    page.wait_for_url(re.compile(r".*/evaluation/runs/\d+/$"))
    expect(page.locator("#run-status")).to_contain_text("queued")  # no worker yet: nothing has run
    assert _points(page, "chart-per-trial") == 0 and page.locator("#heatmap .cell-pending").count() == 0

    with celery_worker(worker_env(), concurrency=2, hostname="runs-browser@%h"):
        expect(page.locator("#run-status")).to_contain_text("completed", timeout=180_000)
    page.wait_for_function("() => document.getElementById('chart-pass-k').dataset.points === '2'")
    assert _points(page, "chart-per-trial") == 2 and _points(page, "chart-cumulative") == 2
    expect(page.locator("#run-counts")).to_contain_text("4 of 4 episodes finished")
    expect(page.locator("#feedback-title")).to_be_visible()
    assert page.evaluate("Chart.getChart('histogram-chart').data.datasets[0].data.reduce((a, b) => a + b, 0)") == \
        pytest.approx(1.0)  # the shares of each score among the run's 4 judged episodes
    expect(page.locator("#run-live .critique-cell")).to_have_count(4)
    cells = page.locator("#heatmap a.cell")
    expect(cells).to_have_count(4)
    cells.first.click()
    expect(page.locator(".run-context")).to_contain_text("trial 1 of 2")
