"""In chromium, end to end: the lead builds a campaign's roster, an annotator skips and flags items
(seeing "item n of N for you"), the lead clears the flag and settles a disagreement with a final
label. Each changed page is captured at 1440 and 390 px (/tmp/shots-annot/) and must not scroll
sideways."""
import os

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotation.models import Adjudication, FeedbackTask, Flag, RosterMember, Skip
from annotation.services import assignment_next, judgment_submit
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = "/tmp/shots-annot"
WIDTHS = (1440, 390)


def _shoot(page, url: str | None, name: str) -> None:
    """The page at each width (loaded from `url`, or as it stands when None): captured, and never
    wider than the window."""
    os.makedirs(SHOTS, exist_ok=True)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        if url:
            page.goto(url)
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name} scrolls sideways by {overflow}px at {width}px"
        page.screenshot(path=f"{SHOTS}/{name}-{width}.png", full_page=True)
    page.set_viewport_size({"width": 1440, "height": 900})


def test_the_lead_limits_a_campaign_to_its_roster(browser_page, live_server, make_campaign, make_items,
                                                  operator_user, annotators):
    campaign = make_campaign()
    make_items(campaign, 2)
    member, outsider = annotators(2)
    page = browser_page
    login(page, live_server, operator_user)
    detail = live_server.url + reverse("annotation:campaign_detail", args=[campaign.pk])
    page.goto(detail)
    roster = page.locator("#roster")
    expect(roster).to_contain_text("every annotator of this workspace may work on this campaign")
    roster.get_by_label("Annotator").select_option(label=member.username)
    roster.get_by_role("button", name="Add to the roster").click()
    expect(page.locator(f'#roster li[data-annotator="{member.username}"]')).to_be_visible()
    expect(page.locator("#roster")).to_contain_text("Only this annotator may")
    assert list(RosterMember.objects.values_list("annotator", flat=True)) == [member.pk]
    _shoot(page, detail, "campaign-roster")

    page.context.clear_cookies()
    login(page, live_server, outsider)
    page.goto(live_server.url + reverse("annotation:queue"))
    expect(page.get_by_role("heading", name="No open campaigns")).to_be_visible()
    page.context.clear_cookies()
    login(page, live_server, member)
    page.goto(live_server.url + reverse("annotation:queue"))
    expect(page.get_by_role("heading", name=campaign.name)).to_be_visible()


def test_an_annotator_skips_and_flags_and_the_lead_clears_the_flag(browser_page, live_server, make_campaign,
                                                                    make_items, annotator_user, operator_user):
    campaign = make_campaign(annotators_per_item=1)
    make_items(campaign, 3)
    page = browser_page
    login(page, live_server, annotator_user)
    page.goto(live_server.url + reverse("annotation:queue"))
    page.get_by_role("button", name="Judge next").click()
    expect(page.locator(".position")).to_have_text("Item 1 of 3 for you in this campaign")
    page.get_by_text("Cannot work on this item?").click()
    page.get_by_label("Reason (optional)").fill("I wrote this customer's ticket myself")
    page.get_by_role("button", name="Skip this item").click()
    expect(page.locator(".position")).to_have_text("Item 1 of 2 for you in this campaign")
    assert Skip.objects.get().reason == "I wrote this customer's ticket myself"

    page.get_by_text("Cannot work on this item?").click()
    page.get_by_label("Reason", exact=True).select_option("other")
    page.get_by_role("button", name="Flag this item").click()
    expect(page.locator("#triage .errorlist")).to_contain_text("Say what is wrong with the item")
    _shoot(page, None, "judge-flag-error")  # the refused flag's answer, its choice kept
    expect(page.get_by_label("Reason", exact=True)).to_have_value("other")
    page.get_by_label("What is wrong").fill("The agent's answers are cut off mid-sentence")
    page.get_by_role("button", name="Flag this item").click()
    expect(page.locator(".position")).to_have_text("Item 1 of 1 for you in this campaign")
    flag = Flag.objects.get()

    page.context.clear_cookies()
    login(page, live_server, operator_user)
    detail = live_server.url + reverse("annotation:campaign_detail", args=[campaign.pk])
    page.goto(detail)
    row = page.locator(f'#flags li[data-flag-item="{flag.item_id}"]')
    expect(row).to_contain_text("The agent's answers are cut off mid-sentence")
    expect(page.locator(f'tr[data-item="{flag.item_id}"]')).to_contain_text("flagged")
    _shoot(page, detail, "campaign-flags")
    row.get_by_role("button", name=f"Clear the flag on item {flag.item_id}").click()
    expect(page.locator("#flags")).to_contain_text("No flagged items")
    flag.refresh_from_db()
    assert flag.cleared_by == operator_user


def test_the_lead_settles_a_disagreement(browser_page, live_server, make_campaign, make_items, annotators,
                                         operator_user):
    campaign = make_campaign(annotators_per_item=2)
    make_items(campaign, 1)
    for annotator, prefer_a in zip(annotators(2), (True, False)):
        assignment = assignment_next(campaign=campaign, annotator=annotator)
        side = "A" if (assignment.side_a_is_human == prefer_a) else "B"
        judgment_submit(token=assignment.token, annotator=annotator, choices={key: side for key in campaign.criterion_keys})
    page = browser_page
    login(page, live_server, operator_user)
    url = live_server.url + reverse("annotation:campaign_disagreements", args=[campaign.pk])
    page.goto(url)
    page.get_by_text("Set the final labels").click()
    page.get_by_label("Naturalness").select_option("human")
    page.get_by_role("button", name="Save final labels").click()
    expect(page.locator(".errorlist.nonfield")).to_contain_text("The note: say why")  # required, at the field too
    page.get_by_label("Note").fill("The human feedback names the warranty; the other is generic.")
    page.get_by_role("button", name="Save final labels").click()
    expect(page.locator('tr[data-criterion="naturalness"] .final-label')).to_contain_text("human")
    expect(page.locator('tr[data-criterion="naturalness"] .final-label')).to_contain_text("names the warranty")
    assert Adjudication.objects.get().decided_by == operator_user
    _shoot(page, url, "disagreements-adjudicated")
    results = live_server.url + reverse("annotation:campaign_results", args=[campaign.pk])
    page.goto(results)
    expect(page.locator("#adjudication")).to_contain_text("The lead settled 1 disputed item")
    _shoot(page, results, "results-adjudication")


def test_a_writer_sees_their_place_and_skips_a_conversation(browser_page, live_server, make_campaign, make_items,
                                                            annotator_user):
    campaign = make_campaign()
    for item in make_items(campaign, 2, human_feedback=""):
        FeedbackTask.objects.create(campaign=campaign, item=item)
    page = browser_page
    login(page, live_server, annotator_user)
    page.goto(live_server.url + reverse("annotation:queue"))
    page.get_by_role("button", name="Write feedback").click()
    expect(page.locator(".position")).to_have_text("Item 1 of 2 for you in this campaign")
    first_url = page.url
    _shoot(page, first_url, "write-position")
    page.get_by_text("Cannot work on this conversation?").click()
    page.get_by_role("button", name="Skip this conversation").click()
    page.wait_for_url(lambda url: url != first_url)
    expect(page.locator(".position")).to_have_text("Item 1 of 1 for you in this campaign")
    assert Skip.objects.get().stage == "writing"
