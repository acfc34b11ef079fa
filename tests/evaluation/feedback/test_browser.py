"""The calibration page in a real browser: curves drawn, histogram redrawn after an htmx swap, the
fit to people previewed and applied (screenshots in /tmp/calib-shots)."""
import io
import os

import pytest
from django.urls import reverse

from annotation.demo import CAMPAIGN_NAME, load_demo
from annotation.models import Campaign
from evaluation.feedback.services import feedback_for_episode
from tests.browser import login
from tests.evaluation.feedback.conftest import play_many

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = "/tmp/calib-shots"
DRAWN = "id => { const c = document.getElementById(id); return !!(c && window.Chart && Chart.getChart(c)); }"


def test_it_draws_the_curves_and_redraws_the_histogram_for_another_selection(
        browser_page, live_server, operator_user, builtin):
    for episode in play_many(builtin, 6):
        feedback_for_episode(episode=episode, seed=1)
    page, errors = browser_page, []
    page.on("pageerror", lambda error: errors.append(str(error)))
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("evaluation:feedback_calibration") + "?domain=clothing")
    assert page.evaluate(DRAWN, "curves-chart")
    assert "0 episodes with feedback" in page.locator("#rates").inner_text()
    page.get_by_label("Domain").select_option("appliances")
    page.locator("#histogram-chart").wait_for()
    page.wait_for_function(f"() => ({DRAWN})('histogram-chart')")
    assert "6 episodes with feedback" in page.locator("#rates").inner_text()
    assert "domain=appliances" in page.url and errors == []


def test_it_previews_and_applies_the_fit_to_the_demo_campaigns_people(browser_page, live_server, operator_user):
    load_demo(stdout=io.StringIO())
    page, errors = browser_page, []
    page.on("pageerror", lambda error: errors.append(str(error)))
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("evaluation:feedback_calibration"))
    demo = Campaign.objects.get(name=CAMPAIGN_NAME)
    page.get_by_label("Campaign", exact=True).select_option(str(demo.pk))
    table = page.locator("#people-fit-table")
    table.wait_for()
    assert table.locator("tbody tr").count() == 10 and "Apply this fit" in page.locator("#people-fit").inner_text()
    page.set_viewport_size({"width": 1440, "height": 900})
    os.makedirs(SHOTS, exist_ok=True)
    page.locator("#people").screenshot(path=f"{SHOTS}/preview-1440.png")
    page.get_by_role("button", name="Apply this fit").click()
    page.get_by_text("The active calibration is this fit.").wait_for()
    assert f"Recalibrated: refitted to people's actions in campaign “{CAMPAIGN_NAME}”" in page.content().replace(
        "&#x27;", "'")
    page.locator("#people").screenshot(path=f"{SHOTS}/applied-1440.png")
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=f"{SHOTS}/applied-page-1440.png", full_page=True)
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert page.get_by_label("Latest").input_value() == "200"
    assert overflow <= 0 and errors == []
