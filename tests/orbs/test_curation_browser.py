"""Memory curation in a real browser: a customer's timeline found from the bank page and erased from
there; select-all in the review queue with a bulk approval; hand-ticked Orbs decided in bulk after a
confirmation naming their count and banks, with and without JavaScript; a merge undone from the kept Orb's page.
Each changed page is photographed at 1440 and 390 px (for a person to look at) and must not scroll
sideways."""
import os

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from orbs.models import BankEvent, Orb
from orbs.services import bank_get_or_create, orb_remember
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = os.environ.get("MEMWEB_SHOTS", "/tmp/shots-curate")
CUSTOMER = "cust-tl-42"
JEANS = ("Can I swap my jeans for a size 34?", "Can I swap my jeans for size 34?")


def _photograph(page, name: str) -> None:
    os.makedirs(SHOTS, exist_ok=True)
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=f"{SHOTS}/{name}-{width}.png", full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name} scrolls sideways by {overflow}px at {width}px"
    page.set_viewport_size({"width": 1280, "height": 860})


def test_a_customers_timeline_is_found_from_the_bank_page_and_erased_from_there(browser_page, live_server,
                                                                                 operator_user, bank):
    orb_remember(bank=bank, text=f"Ship {CUSTOMER}'s parcels to the back door.", customer_key=CUSTOMER)
    orb_remember(bank=bank_get_or_create(name="Returns desk"), text="Refund cust-tl-42 by bank transfer only.",
                 customer_key=CUSTOMER)
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("orbs:bank_detail", args=[bank.slug]))
    _photograph(page, "bank-page")
    page.get_by_label("Customer key to look up").fill(CUSTOMER)
    page.get_by_role("button", name="Customer timeline").click()

    expect(page.get_by_role("heading", name=f"Held on “{CUSTOMER}”: 2 rows")).to_be_visible()
    assert CUSTOMER not in page.url  # posted, never in the address
    expect(page.locator("#timeline-table tbody tr")).to_have_count(2)
    expect(page.locator('.stat[data-kind="orbs"] .stat-value')).to_have_text("2")
    _photograph(page, "customer-timeline")

    page.get_by_label("Type the customer key again to confirm").fill(CUSTOMER)
    page.get_by_role("button", name="Erase this customer").click()

    expect(page.get_by_text("Erased from 2 banks")).to_be_visible()  # the job's card, once it has finished
    assert not Orb.objects.filter(customer_key=CUSTOMER).exists()
    assert BankEvent.objects.filter(action=BankEvent.Action.CUSTOMER_ERASED).count() == 2
    page.goto(live_server.url + reverse("orbs:customer_timeline"))
    page.get_by_label("Customer key").fill(CUSTOMER)
    page.get_by_role("button", name="Show the timeline").click()
    expect(page.get_by_role("heading", name="memweb holds nothing on this customer")).to_be_visible()
    _photograph(page, "customer-timeline-empty")


def test_select_all_on_the_page_then_all_matching_approves_after_a_confirmation(browser_page, live_server,
                                                                                reviewer_user, bank):
    shop = [orb_remember(bank=bank, text=f"Shop lesson {i}: check the order number first.").orb for i in range(3)]
    desk = orb_remember(bank=bank_get_or_create(name="Returns desk"), text="Desk lesson: keep the receipt.").orb
    page = browser_page
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:queue") + f"?bank={bank.slug}&status=pending")
    _photograph(page, "queue")

    page.get_by_label("Select all on this page").check()
    for orb in shop:
        expect(page.get_by_label(f"Select Orb #{orb.pk}")).to_be_checked()
    page.get_by_label("Select all on this page").uncheck()
    expect(page.get_by_label(f"Select Orb #{shop[0].pk}")).not_to_be_checked()

    page.get_by_label("All 3 matching the filters, not only the ticked ones").check()
    page.get_by_role("button", name="Approve selected").click()
    expect(page.get_by_role("heading", name="Approve 3 Orbs of 1 bank?")).to_be_visible()
    expect(page.locator("#bulk-confirm")).to_contain_text(bank.name)
    assert set(Orb.objects.filter(pk__in=[o.pk for o in shop]).values_list("status", flat=True)) == {"pending"}
    _photograph(page, "queue-bulk-confirm")

    page.get_by_role("button", name="Approve 3 Orbs").click()

    expect(page.get_by_text("3 Orbs approved: back to the review queue")).to_be_visible()
    assert set(Orb.objects.filter(pk__in=[o.pk for o in shop]).values_list("status", flat=True)) == {"approved"}
    assert Orb.objects.get(pk=desk.pk).status == Orb.Status.PENDING  # another bank: not matching


def _statuses(orbs) -> set[str]:
    return set(Orb.objects.filter(pk__in=[orb.pk for orb in orbs]).values_list("status", flat=True))


def test_ticked_orbs_are_rejected_in_bulk_after_a_confirmation(browser_page, live_server, reviewer_user, bank):
    shop = orb_remember(bank=bank, text="Shop lesson: check the order number first.").orb
    desk = orb_remember(bank=bank_get_or_create(name="Returns desk"), text="Desk lesson: keep the receipt.").orb
    left = orb_remember(bank=bank, text="Shop lesson: offer the exchange before the refund.").orb
    page = browser_page
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:queue") + "?status=pending")
    page.get_by_label(f"Select Orb #{shop.pk}").check()
    page.get_by_label(f"Select Orb #{desk.pk}").check()
    page.get_by_label("Reason for rejecting the selected Orbs").fill("too vague to act on")
    page.get_by_role("button", name="Reject selected").click()

    expect(page.get_by_role("heading", name="Reject 2 ticked Orbs of 2 banks?")).to_be_visible()
    expect(page.locator("#bulk-confirm")).to_contain_text("Returns desk, Test shop")
    expect(page.locator("#bulk-confirm")).to_contain_text("“too vague to act on”")
    assert _statuses([shop, desk]) == {"pending"}
    _photograph(page, "queue-ticked-confirm")
    page.get_by_role("button", name="Reject 2 Orbs").click()

    expect(page.get_by_text("2 Orbs rejected.")).to_be_visible()
    assert _statuses([shop, desk]) == {"rejected"} and _statuses([left]) == {"pending"}


def test_without_javascript_ticked_orbs_are_approved_after_a_confirmation_page(browser, live_server, reviewer_user,
                                                                               bank):
    orbs = [orb_remember(bank=bank, text=f"Shop lesson {i}: check the order number first.").orb for i in range(3)]
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 860})
    page = context.new_page()
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:queue") + "?status=pending")
    page.get_by_label(f"Select Orb #{orbs[0].pk}").check()
    page.get_by_label(f"Select Orb #{orbs[1].pk}").check()
    page.get_by_role("button", name="Approve selected").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Confirm a bulk decision")
    expect(page.get_by_role("heading", name="Approve 2 ticked Orbs of 1 bank?")).to_be_visible()
    _photograph(page, "queue-ticked-confirm-nojs")
    page.get_by_role("button", name="Approve 2 Orbs").click()

    expect(page.get_by_text("2 Orbs approved.")).to_be_visible()
    assert _statuses(orbs[:2]) == {"approved"} and _statuses(orbs[2:]) == {"pending"}
    context.close()


def test_a_merge_is_undone_from_the_kept_orbs_page(browser_page, live_server, reviewer_user, make_orb):
    keep, duplicate = (make_orb(text, approve=False) for text in JEANS)
    page = browser_page
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:merge", args=[duplicate.pk]) + f"?into={keep.pk}")
    page.get_by_label(f"Keep Orb #{keep.pk}").check()
    page.get_by_role("button", name="Review the merge").click()
    page.get_by_role("button", name=f"Merge Orb #{duplicate.pk} into Orb #{keep.pk}").click()
    page.wait_for_url(live_server.url + reverse("orbs:detail", args=[keep.pk]))

    undo = page.locator("#merge-undo")
    expect(undo).to_contain_text("A merge can be undone for 7 days")
    expect(undo).to_contain_text(f"Orb #{duplicate.pk} merged into Orb #{keep.pk}")
    _photograph(page, "orb-merge-undo")
    undo.get_by_role("button", name="Undo this merge").click()

    page.wait_for_url(live_server.url + reverse("orbs:detail", args=[duplicate.pk]))
    expect(page.get_by_role("status").first).to_contain_text(f"Orb #{duplicate.pk}: merge undone")
    restored = Orb.objects.get(pk=duplicate.pk)
    assert (restored.status, restored.merged_into_id) == (Orb.Status.PENDING, None)
    _photograph(page, "orb-after-undo")
