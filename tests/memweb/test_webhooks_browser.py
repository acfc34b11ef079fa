"""A real browser adds a webhook from the navigation, copies its secret, and sends a test event that a
receiver on loopback verifies with that secret (Celery runs eagerly: the page shows the delivery done)."""
import pytest

from memweb.models import Webhook
from memweb.webhooks import webhook_create
from tests.browser import login
from tests.support.webhook_receiver import receiver, verified  # noqa: F401  (receiver is a fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_adds_a_webhook_and_sends_it_a_test_event(browser_page, live_server, operator_user, receiver):
    page = browser_page
    login(page, live_server, operator_user)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Webhooks").click()
    page.get_by_label("Payload URL").fill(receiver.url)
    page.get_by_label("run finished (completed, failed or cancelled)").check()
    page.get_by_role("button", name="Add webhook").click()
    secret = page.locator("#new-secret").inner_text().strip()
    assert secret.startswith("whsec_")

    page.get_by_role("button", name=f"Send a test event to {receiver.url}").click()
    page.wait_for_url(live_server.url + "/webhooks/")
    row = page.locator("#deliveries tbody tr").first
    assert "webhook.test" in row.inner_text() and row.locator(".badge").inner_text() == "delivered"
    assert page.locator("#new-secret").count() == 0  # shown once
    [request] = receiver.received
    assert verified(request, secret) and request.json["event"] == "webhook.test"


def test_an_unknown_bank_is_refused_in_plain_words(browser_page, live_server, operator_user):
    from orbs.services import bank_get_or_create

    bank_get_or_create(name="Returns desk")
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + "/webhooks/")
    page.get_by_label("Payload URL").fill("https://example.org/hook")
    page.get_by_label("run finished (completed, failed or cancelled)").check()
    page.get_by_label("Memory bank (slug)").fill("returns")
    page.get_by_role("button", name="Add webhook").click()
    error = page.locator(".field-error .errorlist")
    assert error.inner_text() == ("No memory bank “returns” in this workspace: give the slug its page shows "
                                  "(Memory banks), or leave this empty for every bank.")
    assert not Webhook.objects.exists()


def test_deleting_a_webhook_asks_first(browser_page, live_server, operator_user):
    webhook, _ = webhook_create(url="https://example.org/hook", events=["run.finished"])
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + "/webhooks/")
    page.get_by_role("button", name=f"Delete the webhook to {webhook.url}").click()
    page.get_by_role("heading", name="Delete the webhook to https://example.org/hook?").wait_for()
    assert Webhook.objects.filter(pk=webhook.pk).exists()  # asked, not done
    page.get_by_role("link", name="Keep it").click()
    page.wait_for_url(live_server.url + "/webhooks/")
    page.get_by_role("button", name=f"Delete the webhook to {webhook.url}").click()
    page.get_by_role("button", name="Delete this webhook").click()
    page.get_by_text("Webhook to https://example.org/hook deleted").wait_for()
    assert not Webhook.objects.filter(pk=webhook.pk).exists()
