"""A reviewer works the queue with the keyboard, and edits an Orb, in a real browser."""
import json

import pytest
from django.urls import reverse

from orbs.models import Orb
from orbs.services import orb_from_episode
from tests.browser import login
from tests.orbs.conftest import trajectory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_approves_an_orb_from_the_queue_with_the_keyboard(browser_page, live_server, reviewer_user, make_orb):
    first = make_orb("My sweater shrank in the wash.", approve=False)
    second = make_orb("The blender is far too loud.", approve=False)
    page = browser_page
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:queue"))
    page.keyboard.press("j")
    page.keyboard.press("j")  # down to the second row
    page.keyboard.press("a")
    row = page.locator(f"#orb-row-{second.pk}")
    row.locator('[data-status="approved"]').wait_for()
    assert row.get_by_role("status").inner_text() == f"Orb #{second.pk} approved."
    assert "is-current" in row.get_attribute("class")
    assert page.url == live_server.url + reverse("orbs:queue")  # updated in place, no reload
    assert Orb.objects.get(pk=second.pk).status == Orb.Status.APPROVED
    assert Orb.objects.get(pk=first.pk).status == Orb.Status.PENDING
    # k goes back up; r puts the cursor in the reason box, Enter rejects.
    page.keyboard.press("k")
    page.keyboard.press("r")
    page.keyboard.type("Too vague to act on")
    page.keyboard.press("Enter")
    page.locator(f'#orb-row-{first.pk} [data-status="rejected"]').wait_for()
    assert Orb.objects.get(pk=first.pk).review_note == "Too vague to act on"


def test_it_edits_an_orb_without_phantom_revisions_and_shows_its_history_as_a_diff(
        browser_page, live_server, reviewer_user, bank):
    orb = orb_from_episode(bank=bank, trajectory=trajectory()).orb
    assert "\n" in orb.obs  # two customer turns: the browser sends the line break back as \r\n
    page = browser_page
    login(page, live_server, reviewer_user)
    # Issue 18, line endings: a context-only edit keeps the revision and its content id ...
    page.goto(live_server.url + reverse("orbs:edit", args=[orb.pk]))
    page.get_by_label("Context (JSON)").fill(json.dumps({**orb.context, "sku": "DW-450-B"}))
    page.get_by_role("button", name="Save revision").click()
    page.get_by_text("same content id").wait_for()
    # ... and saving it unchanged makes no revision at all.
    page.goto(live_server.url + reverse("orbs:edit", args=[orb.pk]))
    page.get_by_role("button", name="Save revision").click()
    page.get_by_role("alert").filter(has_text="the edit changes nothing").wait_for()
    assert list(Orb.objects.filter(lineage_id=orb.lineage_id).values_list("revision", "content_hash")) == [
        (1, orb.content_hash)]
    # Issue 18, review history: per field, old → new, the changed words of the context marked.
    page.goto(live_server.url + reverse("orbs:detail", args=[orb.pk]))
    edit = page.locator("#history-title + .table-wrap tr", has_text="edited")
    assert edit.locator(".orbs-changes dt").all_inner_texts() == ["context", "version"]
    assert edit.locator(".orbs-diff ins").all_inner_texts() == ["-B"]  # "sku": "DW-450" became "DW-450-B"
    assert '"sku": "DW-450-B"' in edit.locator(".orbs-diff").inner_text()
    # Issue 18, emotion tagger: the offline tag is labelled as a heuristic.
    assert page.locator("#orb-title ~ dl .badge-scripted").first.inner_text() == "heuristic"


def test_editing_a_pending_orb_leaves_it_pending_unless_the_reviewer_ticks_approve(
        browser_page, live_server, reviewer_user, make_orb):
    orb = make_orb("The blender is far too loud.", approve=False)
    page = browser_page
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:edit", args=[orb.pk]))
    assert not page.get_by_label("Approve this revision").is_checked()
    page.get_by_label("Outcome (policy reflection)").fill("Offer the quiet model before a refund.")
    page.get_by_role("button", name="Save revision").click()
    page.get_by_text("Saved as revision 2").wait_for()
    assert Orb.objects.get(lineage_id=orb.lineage_id, revision=2).status == Orb.Status.PENDING


def test_editing_an_approved_orb_offers_to_keep_it_approved(browser_page, live_server, reviewer_user, make_orb):
    orb = make_orb("The blender is far too loud.")
    page = browser_page
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:edit", args=[orb.pk]))
    assert page.get_by_label("Approve this revision").is_checked()
