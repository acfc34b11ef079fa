"""The review queue's filters in a real browser: they apply as soon as one changes, as on the runs
list, and the heading names the bank the queue shows, so nobody approves another bank's Orbs
believing the filter applied; without JavaScript the Search button applies them."""
import pytest
from django.urls import reverse
from playwright.sync_api import expect

from orbs.services import bank_get_or_create
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_choosing_a_bank_filters_the_queue_at_once_and_names_the_bank(browser_page, live_server, reviewer_user,
                                                                      make_orb):

    make_orb("My sweater shrank in the wash.", approve=False)
    returns = bank_get_or_create(name="Returns desk")
    kept = make_orb("The blender is far too loud.", approve=False, target=returns)
    page = browser_page
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:queue"))
    assert page.locator("#queue-table tbody tr").count() == 2
    page.get_by_label("Bank").select_option(label="Returns desk")
    expect(page.locator("#queue-table tbody tr")).to_have_count(1)
    assert "bank=returns-desk" in page.url  # the address keeps the filter, as a link to share
    assert page.locator(f"#orb-row-{kept.pk}").count() == 1
    # The click starts a page load: wait for the new heading rather than read the old page's.
    expect(page.get_by_role("heading", level=1)).to_have_text("Review queue: Returns desk")
    page.get_by_label("Bank").select_option(label="all banks")
    page.get_by_role("heading", level=1, name="Review queue: all banks").wait_for()


def test_without_javascript_the_search_button_applies_the_filters(browser, live_server, reviewer_user, make_orb):
    returns = bank_get_or_create(name="Returns desk")
    make_orb("The blender is far too loud.", approve=False, target=returns)
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:queue"))
    page.get_by_label("Bank").select_option(label="Returns desk")
    page.get_by_role("button", name="Search").click()
    # The click starts a page load: wait for the new heading rather than read the old page's.
    expect(page.get_by_role("heading", level=1)).to_have_text("Review queue: Returns desk")
    context.close()
