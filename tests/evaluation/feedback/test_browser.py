"""The calibration page's charts in a real browser: curves drawn, histogram redrawn after an htmx swap."""
import pytest
from django.urls import reverse

from evaluation.feedback.services import feedback_for_episode
from tests.browser import login
from tests.evaluation.feedback.conftest import play_many

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

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
    page.wait_for_function(f"({DRAWN})('histogram-chart')")
    assert "6 episodes with feedback" in page.locator("#rates").inner_text()
    assert "domain=appliances" in page.url and errors == []
