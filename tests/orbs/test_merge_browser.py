"""Merging one Orb from its page in a real browser: the reviewer picks the Orb to keep among its
nearest Orbs shown side by side (no typed id), confirms, and the result names the kept Orb; a
refusal reads in plain words."""
import pytest
from django.urls import reverse

from orbs.models import Orb
from orbs.services import orb_reject
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

JEANS = ("Can I swap my jeans for a size 34?", "Can I swap my jeans for size 34?")


def _choose_target(page, live_server, duplicate, keep):
    page.goto(live_server.url + reverse("orbs:detail", args=[duplicate.pk]))
    page.get_by_role("link", name="Merge into another Orb…").click()
    candidate = page.locator(f'[data-orb-id="{keep.pk}"]')
    assert JEANS[0] in candidate.inner_text() and "similarity" in candidate.inner_text()
    assert page.locator(f'[data-orb-id="{duplicate.pk}"]').count() == 1  # the Orb itself, beside them
    candidate.get_by_label(f"Keep Orb #{keep.pk}").check()
    page.get_by_role("button", name="Review the merge").click()


def test_it_merges_into_a_near_duplicate_picked_side_by_side_after_a_confirmation(
        browser_page, live_server, reviewer_user, make_orb):
    keep, duplicate = (make_orb(text, approve=False) for text in JEANS)
    page = browser_page
    login(page, live_server, reviewer_user)
    _choose_target(page, live_server, duplicate, keep)
    assert Orb.objects.get(pk=duplicate.pk).status == Orb.Status.PENDING  # nothing happens before the confirmation
    page.get_by_role("button", name=f"Merge Orb #{duplicate.pk} into Orb #{keep.pk}").click()
    page.wait_for_url(live_server.url + reverse("orbs:detail", args=[keep.pk]))
    assert page.get_by_role("status").first.inner_text() == (
        f"Orb #{duplicate.pk} merged into Orb #{keep.pk}, which is kept; #{duplicate.pk} stays readable, superseded. "
        "You can undo the merge below for 7 days.")
    assert Orb.objects.get(pk=duplicate.pk).merged_into_id == keep.pk


def test_a_refused_merge_says_why_in_plain_words(browser_page, live_server, reviewer_user, make_orb):
    keep, duplicate = (make_orb(text, approve=False) for text in JEANS)
    page = browser_page
    login(page, live_server, reviewer_user)
    _choose_target(page, live_server, duplicate, keep)
    orb_reject(orb_id=keep.pk, expected_version=keep.version, actor=None, reason="too vague")  # meanwhile
    page.get_by_role("button", name=f"Merge Orb #{duplicate.pk} into Orb #{keep.pk}").click()
    alert = page.get_by_role("alert")
    assert alert.inner_text() == f"Nothing was merged: Orb #{keep.pk} is rejected, so it cannot take a merge."
    assert Orb.objects.get(pk=duplicate.pk).status == Orb.Status.PENDING
