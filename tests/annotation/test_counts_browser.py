"""Counts on the campaign page never read "more done than needed": an item whose votes split gets
extra annotators, and so needs them (max-disagreement); an attention check goes to everyone and
is counted apart from the N per item."""
import pytest
from django.urls import reverse

from annotation.models import Campaign
from annotation.services import assignment_next
from tests.annotation.test_quality import CHECK, _answer
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_split_item_and_an_attention_check_keep_done_within_needed(browser_page, live_server, make_campaign,
                                                                      make_items, annotators, operator_user):
    campaign = make_campaign(annotators_per_item=2, assignment_strategy=Campaign.Strategy.MAX_DISAGREEMENT,
                             max_annotators_per_item=3, attention_rate=0.5, attention_min_checks=1)
    [split] = make_items(campaign, 1)
    [check] = make_items(campaign, 1, is_attention=True, gold_expected=CHECK, simulated_feedback="")
    for index, person in enumerate(annotators(3)):
        while (assignment := assignment_next(campaign=campaign, annotator=person)) is not None:
            _answer(assignment, "human" if assignment.item == check or index == 1 else "simulated")
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("annotation:campaign_detail", args=[campaign.pk]))
    assert page.locator("#campaign-progress .progress-label").inner_text().startswith("3 of 3 judgments (100%)")
    assert page.locator(f'tr[data-item="{split.pk}"] td.num').nth(1).inner_text() == "3 / 3"
    assert page.locator(f'tr[data-item="{check.pk}"] td.num').nth(1).inner_text() == "3 (attention check: everyone)"
