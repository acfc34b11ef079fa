"""In chromium: the compare page of two scripted runs shows the verdict, the intervals and the flip
table; a sort link re-orders it on the server and a trial square opens its transcript. The page is
photographed at 1440 px into /tmp/stats-shots for a person to look at."""
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from evaluation.runs.services import run_drive
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path("/tmp/stats-shots")


def test_it_compares_two_runs_sorts_the_flips_and_opens_a_transcript(browser_page, live_server, operator_user,
                                                                      launch):
    baseline, memory = run_drive(run=launch(memory_mode="none", name="baseline")), run_drive(run=launch())
    page = browser_page
    page.set_viewport_size({"width": 1440, "height": 1000})
    login(page, live_server, operator_user)
    page.goto(f"{live_server.url}{reverse('evaluation:run_compare')}?runs={baseline.pk}&runs={memory.pk}")
    pair = page.locator(f"#pair-{memory.pk}")
    expect(pair.locator(".verdict")).to_contain_text("95 % CI")
    expect(page.locator(f"#pair-{memory.pk}-pass-k tbody tr")).to_have_count(3)
    page.wait_for_function("() => Chart.getChart('chart-per-trial').data.datasets.length >= 2")
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "compare.png"), full_page=True)

    pair.get_by_role("link", name="Task", exact=True).click()
    expect(pair.locator("a.sorted")).to_have_text("Task")
    tasks = pair.locator(f"#pair-{memory.pk}-flips tbody th").all_inner_texts()
    assert tasks == sorted(tasks)
    pair.locator("a.cell").first.click()
    expect(page.locator(".run-context")).to_contain_text("trial 1 of 3")
