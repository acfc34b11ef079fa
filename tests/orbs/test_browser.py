"""A reviewer works the queue with the keyboard in a real browser."""
import pytest
from django.urls import reverse

from orbs.models import Orb
from tests.browser import login

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
