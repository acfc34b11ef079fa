"""A reviewer finds a near-duplicate group in the queue and merges it side by side, in a real browser."""
import pytest
from django.urls import reverse

from orbs.models import Orb
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_merges_a_group_from_the_queue(browser_page, live_server, reviewer_user, make_orb):
    orbs = [make_orb(text, approve=False) for text in
            ("Can I swap my jeans for a size 34?", "Can I swap my jeans for size 34?")]
    page = browser_page
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:queue"))
    page.get_by_role("link", name="2 near-duplicates").click()
    page.locator(f"#keep-{orbs[1].pk}").check()
    page.get_by_label("Lesson of the kept Orb").fill("Offer the size exchange straight away.")
    page.get_by_role("button", name="Keep one, merge the ticked others").click()
    page.get_by_text("1 near-duplicates merged into it").wait_for()
    kept = Orb.objects.filter(lineage_id=orbs[1].pk).order_by("-revision").first()
    assert (kept.revision, kept.outcome) == (2, "Offer the size exchange straight away.")
    assert Orb.objects.get(pk=orbs[0].pk).merged_into_id == kept.pk
