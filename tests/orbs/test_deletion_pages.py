"""The dashboard's delete, restore and erase actions: each confirmed, each audited."""
import pytest
from django.urls import reverse
from playwright.sync_api import expect

from memweb.models import Job
from orbs.models import BankEvent, MemoryBank, Orb
from orbs.services import orb_remember
from tests.browser import login

CUSTOMER = "cust-erase-1"


@pytest.fixture
def remembered(bank):
    return orb_remember(bank=bank, text="Ship cust-erase-1's parcels to the back door.", customer_key=CUSTOMER).orb


def test_a_reviewer_deletes_and_restores_an_orb_from_its_page(client, reviewer_user, make_orb):
    orb = make_orb("The vacuum lost suction.")
    client.force_login(reviewer_user)

    deleted = client.post(reverse("orbs:delete", args=[orb.pk]), {"expected_version": orb.version,
                                                                    "reason": "wrong customer"}, follow=True)

    assert Orb.objects.get(pk=orb.pk).status == Orb.Status.DELETED
    assert b"This Orb is deleted" in deleted.content
    assert orb.pk not in [o.pk for o in client.get(reverse("orbs:queue")).context["page"].object_list]
    client.post(reverse("orbs:restore", args=[orb.pk]), {"expected_version": orb.version + 1})
    assert Orb.objects.get(pk=orb.pk).status == Orb.Status.APPROVED


def test_a_bank_is_deleted_only_when_its_slug_is_typed(client, operator_user, bank):
    client.force_login(operator_user)
    url = reverse("orbs:bank_delete", args=[bank.slug])

    refused = client.post(url, {"delete-confirm_slug": "something else"})
    assert refused.status_code == 422 and MemoryBank.objects.get(pk=bank.pk).archived_at is None

    client.post(url, {"delete-confirm_slug": bank.slug, "delete-reason": "pilot over"})
    assert MemoryBank.objects.get(pk=bank.pk).archived_at is not None
    assert client.get(reverse("orbs:bank_list")).context["rows"] == []
    assert [row["bank"] for row in client.get(reverse("orbs:bank_list") + "?archived=1").context["rows"]] == [bank]
    page = client.get(reverse("orbs:bank_detail", args=[bank.slug]))
    assert page.status_code == 200 and b"bank-archived" in page.content


def test_only_operators_erase_and_only_with_the_key_typed_twice(client, operator_user, reviewer_user, bank, remembered,
                                                                django_capture_on_commit_callbacks):
    url = reverse("orbs:customer_erase", args=[bank.slug])
    client.force_login(reviewer_user)
    assert client.post(url, {"erase-customer_key": CUSTOMER, "erase-confirm_customer_key": CUSTOMER}).status_code == 403
    client.force_login(operator_user)

    mismatch = client.post(url, {"erase-customer_key": CUSTOMER, "erase-confirm_customer_key": "cust-erase-2"})

    assert mismatch.status_code == 422 and Orb.objects.filter(pk=remembered.pk).exists()
    assert not Job.objects.exists()  # a refused form queues nothing
    with django_capture_on_commit_callbacks(execute=True):
        erased = client.post(url, {"erase-customer_key": CUSTOMER, "erase-confirm_customer_key": CUSTOMER,
                                   "erase-reason": "ticket 7"})
    job = Job.objects.get()
    assert erased["Location"] == reverse("job_detail", args=[job.pk])
    card = client.get(erased["Location"]).content.decode()
    assert not Orb.objects.filter(pk=remembered.pk).exists()
    assert "Erased from 1 bank (1 orbs" in card and CUSTOMER not in card
    event = BankEvent.objects.get(action=BankEvent.Action.CUSTOMER_ERASED)
    assert (event.actor, event.note, event.counts["orbs"]) == (operator_user, "ticket 7", 1)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_erase_action_asks_for_the_key_again_in_the_browser(browser_page, live_server, operator_user, bank,
                                                                remembered):
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("orbs:bank_detail", args=[bank.slug]))
    form = page.locator("#erase-customer")
    form.get_by_label("Customer key", exact=True).fill(CUSTOMER)
    form.get_by_label("Type the customer key again to confirm").fill("cust-erase-9")
    form.get_by_role("button", name="Erase this customer").click()

    page.get_by_text("does not match the customer key; nothing was erased").wait_for()
    assert Orb.objects.filter(pk=remembered.pk).exists()

    form = page.locator("#erase-customer")
    form.get_by_label("Customer key", exact=True).fill(CUSTOMER)
    form.get_by_label("Type the customer key again to confirm").fill(CUSTOMER)
    form.get_by_role("button", name="Erase this customer").click()

    page.get_by_text("Erased from 1 bank").click()  # the job's card, once it has finished, links to the bank
    # The click only starts the navigation: wait for the bank page's audit table rather than read the old page.
    expect(page.locator("#bank-events").get_by_text("customer's data erased")).to_have_count(1)
    assert not Orb.objects.filter(customer_key=CUSTOMER).exists()
