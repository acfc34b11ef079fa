"""A real browser judges an item with the keyboard, resumes a draft, and draws the results charts."""
import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotation.models import Judgment
from annotation.services import assignment_next
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_judges_an_item_with_the_keyboard(browser_page, live_server, make_campaign, make_items, annotator_user):
    campaign = make_campaign()
    make_items(campaign, 2)
    page = browser_page
    login(page, live_server, annotator_user)
    page.goto(live_server.url + reverse("annotation:queue"))
    page.get_by_role("button", name="Judge next").click()
    page.wait_for_url("**/annotation/judge/**")
    first_url = page.url
    page.wait_for_timeout(300)  # some active time for the timer
    for key in ("1", "2", "1"):
        page.keyboard.press(key)
    checked = page.eval_on_selector_all("input[type=radio]:checked", "inputs => inputs.map(i => i.value)")
    assert checked == ["A", "B", "A"]
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: url != first_url)
    judgment = Judgment.objects.get()
    assert judgment.choices == {"naturalness": "A", "relevance": "B", "overall_quality": "A"}
    assert judgment.time_spent_ms >= 300
    assert page.get_by_text("you have judged 1 item").is_visible()


def test_it_refuses_enter_until_every_criterion_is_answered(browser_page, live_server, make_campaign, make_items,
                                                            annotator_user):
    campaign = make_campaign()
    make_items(campaign, 1)
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    page = browser_page
    login(page, live_server, annotator_user)
    url = live_server.url + reverse("annotation:judge", args=[assignment.token])
    page.goto(url)
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    page.wait_for_timeout(300)
    assert page.url == url and not Judgment.objects.exists()
    page.reload()  # the draft survives a reload: resume where you left off
    assert page.eval_on_selector_all("input[type=radio]:checked", "inputs => inputs.map(i => i.name)") == [
        "criterion_naturalness"]
    page.keyboard.press("j")  # skip ahead; after answering, the skipped criterion is highlighted again
    page.keyboard.press("1")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    page.wait_for_url(lambda current: current != url)
    assert Judgment.objects.get().choices == {"naturalness": "B", "relevance": "A", "overall_quality": "A"}


def test_it_draws_the_results_charts(browser_page, live_server, make_campaign, make_items, operator_user):
    campaign = make_campaign()
    make_items(campaign, 1)
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("annotation:campaign_results", args=[campaign.pk]))
    drawn = page.evaluate("['wins-chart', 'kappa-chart', 'chart-language'].map("
                          "id => Boolean(Chart.getChart(document.getElementById(id))))")
    assert drawn == [True, True, True]


def _demo_results(page, live_server, operator_user):
    import io

    from annotation.demo import CAMPAIGN_NAME, load_demo
    from annotation.models import Campaign
    load_demo(stdout=io.StringIO())
    campaign = Campaign.objects.get(name=CAMPAIGN_NAME)
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("annotation:campaign_results", args=[campaign.pk]))
    return campaign


def test_it_shows_agreement_quality_and_the_simulated_user_against_people(browser_page, live_server, operator_user):
    page = browser_page
    _demo_results(page, live_server, operator_user)
    agreement = page.get_by_role("table", name="Agreement per criterion")
    cells = agreement.locator("tbody tr").first.locator("td").all_inner_texts()
    assert agreement.locator("tbody tr").count() == 3 and all(cell not in ("–", "") for cell in cells)
    assert "(" in cells[0] and "no interval" not in cells[0]
    quality = page.get_by_role("table", name="Annotator quality")
    assert "side A 14/14" in quality.locator("tr[data-annotator='demo-always-a']").inner_text()
    figures = page.get_by_role("table", name="Simulated user against people")
    assert figures.locator("tbody tr").count() == 3
    drawn = page.evaluate("Boolean(Chart.getChart(document.getElementById('reliability-chart')))")
    assert drawn
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        _charts_fitted(page)
        page.screenshot(path=f"/tmp/annotation-shots/results-{width}.png", full_page=True)
        for section in ("agreement-title", "annotators-title", "fidelity-title"):
            page.locator(f"section[aria-labelledby='{section}']").screenshot(
                path=f"/tmp/annotation-shots/{section.removesuffix('-title')}-{width}.png")
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"the page scrolls sideways at {width}px"


def test_it_excludes_an_annotator_and_takes_it_back(browser_page, live_server, operator_user):
    page = browser_page
    campaign = _demo_results(page, live_server, operator_user)
    row = page.locator("tr[data-annotator='demo-always-a']")
    before = page.get_by_role("table", name="Agreement per criterion").locator("tbody tr").first.inner_text()
    row.get_by_role("button", name="Exclude").click()
    # The table is swapped in whole, so the row is briefly absent: wait on the locator, which re-finds it.
    excluded = re.compile(r"\brow-excluded\b")
    expect(row).to_have_class(excluded)
    assert "by an operator" in row.inner_text()
    from annotation.models import Participant
    assert Participant.objects.get(campaign=campaign, annotator__username="demo-always-a").standing == "excluded"
    row.get_by_role("button", name="Include again").click()
    expect(row).not_to_have_class(excluded)
    after = page.get_by_role("table", name="Agreement per criterion").locator("tbody tr").first.inner_text()
    assert after == before  # the same judgments count again


def _charts_fitted(page) -> None:
    """Waits until Chart.js has redrawn every chart at the box's new width (a resize event away, which a
    busy machine can delay by seconds), so screenshots show the charts as a person would see them."""
    page.wait_for_function("""() => [...document.querySelectorAll('.chart-box canvas')]
        .every((canvas) => canvas.getBoundingClientRect().width <= canvas.parentElement.clientWidth + 1)""")


def _shots(page, name: str) -> None:
    """Desktop and phone screenshots for a person to look at; the page must not scroll sideways."""
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        _charts_fitted(page)
        page.screenshot(path=f"/tmp/annotation-shots/{name}-{width}.png", full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0, \
            f"{name} scrolls sideways at {width}px"
    page.set_viewport_size({"width": 1280, "height": 860})


def test_it_warns_of_a_short_pool_browses_withdraws_and_confirms_closing(browser_page, live_server, make_campaign,
                                                                      make_items, annotators, operator_user):

    ann, bob, cy = annotators(3)
    campaign = make_campaign(annotators_per_item=3)
    leaking, broken = make_items(campaign, 2, human_feedback_author=ann)
    from annotation.models import Item
    Item.objects.filter(pk=broken.pk).update(conversation=[{"role": "user", "content": "The dryer is broken."}])
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("annotation:campaign_detail", args=[campaign.pk]))
    # Defect: writer exclusion with N = the pool left items short with no explanation.
    warning = page.locator("#campaign-progress #shortfall")
    expect(warning).to_contain_text("cannot finish with the annotators it has")
    expect(warning.locator(f"li[data-item='{leaking.pk}']")).to_contain_text(f"{bob.username}, {cy.username}")
    _shots(page, "campaign-shortfall")
    page.get_by_label("Search").fill("dryer")  # browse/search over the conversation text
    expect(page.locator("#item-rows tbody tr")).to_have_count(1)
    page.get_by_role("button", name=f"Withdraw item {broken.pk}").click()
    expect(page.locator(".messages")).to_contain_text(f"Item #{broken.pk} withdrawn")
    assert list(campaign.items.values_list("pk", flat=True)) == [leaking.pk]
    # Defect: closing acted at once; now a confirmation page comes first.
    page.get_by_role("button", name="Close campaign").click()
    expect(page.locator("h1")).to_contain_text(f"Close “{campaign.name}”?")
    _shots(page, "close-confirm")
    campaign.refresh_from_db()
    assert campaign.status == "open"
    page.get_by_role("button", name="Close the campaign").click()
    expect(page.locator(".messages")).to_contain_text("The campaign is now closed")


def test_it_shows_disagreements_with_votes_and_throughput_per_annotator(browser_page, live_server, make_campaign,
                                                                       make_items, annotators, operator_user):

    from tests.annotation.test_curation import judged

    campaign = make_campaign()
    unanimous, split = make_items(campaign, 2)
    ann, bob = annotators(2)
    for person in (ann, bob):
        judged(unanimous, person)
    judged(split, ann)
    judged(split, bob, overall_quality="simulated")
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("annotation:campaign_disagreements", args=[campaign.pk]))
    cards = page.locator("section[data-item]")
    expect(cards).to_have_count(1)
    expect(cards.first.locator("tr.split")).to_contain_text(f"{ann.username}: human, {bob.username}: simulated")
    _shots(page, "disagreements")
    page.goto(live_server.url + reverse("annotation:campaign_throughput", args=[campaign.pk]))
    expect(page.locator(f"tr[data-annotator='{bob.username}']")).to_contain_text("2")
    lines = page.evaluate("Chart.getChart(document.getElementById('throughput-chart')).data.datasets.map(d => d.label)")
    assert lines == sorted([ann.username, bob.username])
    _shots(page, "throughput")
