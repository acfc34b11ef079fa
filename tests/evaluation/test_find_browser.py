"""Finding episodes in a browser (issue 18): sorting a list by its headers, the episode filters with
the transcript search, and saved views."""
import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from tests.browser import login
from tests.evaluation.test_episode_search import episode, two_tasks

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _ids(page) -> list[str]:
    return page.locator("#episode-rows tbody tr:not(.episode-snippet) td:first-child").all_inner_texts()


def _header(page, name: str):
    return page.locator("#episode-rows thead th", has_text=name)


def test_clicking_a_header_sorts_the_list_and_says_which_way(browser_page, live_server, operator_user):
    refund, _ = two_tasks()
    short, long, middle = (episode(refund, said=["hi"] * turns) for turns in (1, 4, 2))
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("evaluation:episode_list"))
    assert _ids(page) == [f"#{e.pk}" for e in (middle, long, short)]  # newest first until sorted
    assert _header(page, "Turns").get_attribute("aria-sort") == "none"
    _header(page, "Turns").get_by_role("link").click()
    expect(_header(page, "Turns")).to_have_attribute("aria-sort", "ascending")
    assert _ids(page) == [f"#{e.pk}" for e in (short, middle, long)]
    _header(page, "Turns").get_by_role("link").click()
    expect(_header(page, "Turns")).to_have_attribute("aria-sort", "descending")
    assert _ids(page) == [f"#{e.pk}" for e in (long, middle, short)]
    assert _header(page, "Reward").get_attribute("aria-sort") == "none" and page.url.endswith("?sort=-turns")


def test_the_episode_filters_and_transcript_search_narrow_the_list(browser_page, live_server, operator_user):
    refund, exchange = two_tasks()
    lost = episode(refund, said=["Where is my parcel?", "It was lost, sorry"], success=False, failed=("outputs",))
    episode(refund, said=["Where is my parcel?", "Here it is"])
    episode(exchange, said=["Swap the shirt", "Done"], success=False, failed=("state",))
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("evaluation:episode_list"))
    expect(page.locator("#episode-count")).to_have_text(re.compile(r"^3 episodes"))
    page.get_by_label("Outcome").select_option("failure")
    expect(page.locator("#episode-count")).to_contain_text("2 episodes match outcome “failure”")
    page.get_by_label("Failed reward component").select_option("outputs")
    expect(page.locator("#episode-count")).to_contain_text("1 episode matches")
    page.get_by_label("Said in the transcript").fill("parcel")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(".episode-snippet mark")).to_have_text("parcel")
    assert _ids(page) == [f"#{lost.pk}"]
    assert "outcome=failure" in page.url and "q=parcel" in page.url  # a link or a reload keeps the filters
    page.get_by_label("Memory mode").select_option("dmrm")
    expect(page.locator("#episode-empty")).to_contain_text("Drop memory mode “dmrm”: 1 episode would match")
    page.locator("#episode-empty").get_by_role("link", name="Drop memory mode “dmrm”").click()
    expect(page.locator("#episode-count")).to_contain_text("1 episode matches")
    expect(page.get_by_label("Said in the transcript")).to_have_value("parcel")


def test_a_user_saves_opens_and_deletes_a_view(browser_page, live_server, operator_user):
    refund, exchange = two_tasks()
    episode(refund, said=["hello"], success=False, failed=("state",))
    episode(exchange, said=["hello"])
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("evaluation:episode_list"))
    page.get_by_label("Outcome").select_option("failure")
    expect(page.locator("#episode-count")).to_contain_text("1 episode matches")
    page.get_by_label("Save this view as").fill("my failures")
    page.get_by_role("button", name="Save this view").click()
    expect(page.get_by_role("status").filter(has_text="Saved the view “my failures”.")).to_be_visible()
    page.goto(live_server.url + reverse("evaluation:episode_list"))
    expect(page.locator("#episode-count")).to_have_text(re.compile(r"^2 episodes"))
    page.get_by_role("link", name="my failures").click()
    expect(page.locator("#episode-count")).to_contain_text("1 episode matches outcome “failure”")
    expect(page.get_by_label("Outcome")).to_have_value("failure")
    page.get_by_role("button", name="Delete the view my failures").click()
    expect(page.get_by_role("status").filter(has_text="Deleted the view “my failures”.")).to_be_visible()
    expect(page.get_by_role("link", name="my failures")).to_have_count(0)
    expect(page.get_by_label("Outcome")).to_have_value("failure")  # back on the list as it was
