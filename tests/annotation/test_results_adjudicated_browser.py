"""In chromium: the results page says how many items the lead decided by adjudication and that
agreement reads the annotators' own votes, at 1440 and 390 px (/tmp/shots-api/), never scrolling
sideways."""
import os

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotation.services import adjudicate, assignment_next, judgment_submit
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = "/tmp/shots-api"


def _vote(campaign, annotator, source: str) -> None:
    assignment = assignment_next(campaign=campaign, annotator=annotator)
    side = "A" if (assignment.side_a_is_human == (source == "human")) else "B"
    judgment_submit(token=assignment.token, annotator=annotator, choices={key: side for key in campaign.criterion_keys})


def test_the_results_page_names_the_items_decided_by_adjudication(browser_page, live_server, make_campaign,
                                                                  make_items, annotators, operator_user):
    campaign = make_campaign(annotators_per_item=3)
    first, _ = make_items(campaign, 2)
    for annotator, source in zip(annotators(3), ("human", "human", "simulated")):
        for _ in range(2):
            _vote(campaign, annotator, source)
    adjudicate(item=first, labels={"naturalness": "simulated"}, note="The lead's reading", decided_by=operator_user)
    page = browser_page
    login(page, live_server, operator_user)
    url = live_server.url + reverse("annotation:campaign_results", args=[campaign.pk])
    os.makedirs(SHOTS, exist_ok=True)
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(url)
        expect(page.locator("#results-adjudicated")).to_contain_text("1 item decided by adjudication")
        expect(page.locator("#results-agreement-raw")).to_contain_text("Agreement (κ, α) is between annotators")
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"the results page scrolls sideways by {overflow}px at {width}px"
        page.screenshot(path=f"{SHOTS}/results-adjudicated-{width}.png", full_page=True)
        page.screenshot(path=f"{SHOTS}/results-adjudicated-{width}-top.png")  # the lines, readable
