"""One status per annotator on the results page: an annotator flagged as a likely spammer is shown
as such, never as "good" beside the flag; an operator's decision to keep them is what the badge
then says."""
import pytest
from django.urls import reverse

from tests.annotation.test_quality import always_a_campaign
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_flagged_annotator_has_one_status_and_it_is_not_good(browser_page, live_server, make_campaign,
                                                                make_items, annotators, operator_user):
    campaign, people = always_a_campaign(make_campaign, make_items, annotators)
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("annotation:campaign_results", args=[campaign.pk]))
    spammer = page.locator(f'tr[data-annotator="{people[2].username}"]')
    assert spammer.locator(".badge").all_inner_texts() == ["likely spammer"]
    assert "good" not in spammer.inner_text().split()
    assert page.locator(f'tr[data-annotator="{people[0].username}"] .badge').all_inner_texts() == ["good"]
    spammer.get_by_role("button", name="Exclude").click()
    spammer.locator(".badge", has_text="excluded").wait_for()
    spammer.get_by_role("button", name="Include again").click()  # the operator keeps them: their call shows
    spammer.locator(".badge", has_text="good").wait_for()
    assert "by an operator" in spammer.inner_text()
