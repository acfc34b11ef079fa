"""Issue 18, "silent failures": every form of the orbs, DMRM and memweb pages answers bad input with a
visible message (beside the field or as a page message), in a real browser. Each case is one page;
it submits bad input to each of that page's forms and sees the message. The browser's own checks
(required, min/max) are switched off first: they are not there for every client, the server's are."""
import pytest
from django.urls import reverse

from orbs.dmrm.services import experience_append
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _open(page, live_server, path: str) -> None:
    page.goto(live_server.url + path)
    page.evaluate("() => document.querySelectorAll('form').forEach((form) => { form.noValidate = true; })")


def _set(page, selector: str, value: str) -> None:
    """Set a field's value as a script would: no maxlength or number parsing stands in the way."""
    page.locator(selector).evaluate("(field, value) => { field.value = value; }", value)


def _sees(page, text: str) -> None:
    page.locator('[role="alert"], .errorlist').filter(has_text=text).first.wait_for()


def _refused(page, live_server, path: str, button: str, expected: str, values: dict | None = None) -> None:
    """Open the page, put bad values in, press the form's button, and see the message."""
    _open(page, live_server, path)
    for selector, value in (values or {}).items():
        _set(page, selector, value)
    page.get_by_role("button", name=button).click()
    _sees(page, expected)


def _queue(page, live_server, orb, bank):
    # The defect: an over-long semantic query silently listed every Orb. Now: the limit, and the query kept.
    _open(page, live_server, reverse("orbs:queue"))
    long_query = "my jacket " * 51
    _set(page, "#id_semantic", long_query)
    page.get_by_role("button", name="Search").click()
    _sees(page, "at most 500 characters")
    assert page.locator("#id_semantic").input_value() == long_query
    assert page.locator(f"#orb-row-{orb.pk}").count() == 0  # no list pretends to match
    _open(page, live_server, reverse("orbs:queue"))
    page.locator(f"#orb-row-{orb.pk}").get_by_role("button", name="Reject").click()
    _sees(page, "Give a reason to reject this Orb")
    page.get_by_role("button", name="Approve selected").click()
    _sees(page, "Select at least one Orb")


def _orb_page(page, live_server, orb, bank):
    _open(page, live_server, reverse("orbs:detail", args=[orb.pk]))
    page.locator("#detail-reason").locator("xpath=ancestor::form").get_by_role("button", name="Reject").click()
    _sees(page, "Give a reason to reject this Orb")
    _refused(page, live_server, reverse("orbs:merge", args=[orb.pk]), "Review the merge", "choose the Orb to keep")
    _open(page, live_server, reverse("orbs:detail", args=[orb.pk]))
    page.locator("#delete-orb").get_by_role("button", name="Delete").click()
    _sees(page, "Give a reason to delete this Orb")


def _orb_edit(page, live_server, orb, bank):
    _refused(page, live_server, reverse("orbs:edit", args=[orb.pk]), "Save", "Context must be a JSON object",
             {"#id_context": "[1, 2]"})


def _bank_list(page, live_server, orb, bank):
    _refused(page, live_server, reverse("orbs:bank_list"), "Create bank", "This field is required")
    _open(page, live_server, reverse("orbs:bank_list"))
    page.get_by_label("JSONL file").set_input_files(
        files=[{"name": "bank.jsonl", "mimeType": "application/x-ndjson", "buffer": b'{"type": "orb"}\n'}])
    page.get_by_role("button", name="Import").click()
    _sees(page, "Nothing was imported")


def _bank_page(page, live_server, orb, bank):
    url = reverse("orbs:bank_detail", args=[bank.slug])
    _refused(page, live_server, url, "Save policy", "greater than or equal to 1", {"#id_retrieval_k": "0"})
    _open(page, live_server, url)
    page.get_by_text("Copy this bank").click()
    page.get_by_role("button", name="Copy (runs in the background)").click()
    _sees(page, "This field is required")
    _refused(page, live_server, url, "Delete bank", f"type {bank.slug} exactly",
             {"#id_delete-confirm_slug": "not-this-bank"})
    _refused(page, live_server, url, "Erase this customer", "does not match the customer key",
             {"#id_erase-customer_key": "cust-1", "#id_erase-confirm_customer_key": "cust-2"})


def _experiences(page, live_server, orb, bank):
    # The defect: rejecting without a reason did nothing visible (the 422 row was never swapped in).
    entry = experience_append(bank=bank, trajectory_id="t1", step=0, goal="return the jacket",
                              observation="order delivered", action="return_item(W7)", reward=1.0)
    _open(page, live_server, reverse("orbs:experience_list"))
    page.locator(f"#experience-{entry.pk}").get_by_role("button", name="Reject").click()
    _sees(page, "a reason is required")
    _set(page, "#id_experience", "0")
    page.get_by_role("button", name="Filter").click()
    _sees(page, "greater than or equal to 1")


def _dmrm_settings(page, live_server, orb, bank):
    _refused(page, live_server, reverse("orbs:dmrm_settings", args=[bank.slug]), "Save settings",
             "less than or equal to 1", {"#id_alpha": "5"})


def _source_builder(page, live_server, orb, bank):
    url = reverse("orbs:dmrm_source", args=[bank.slug])
    _refused(page, live_server, url, "Preview", "less than or equal to 1", {"#id_gamma": "5"})
    _refused(page, live_server, url, "Build (read-only once built)", "needs a name")


def _api_keys(page, live_server, orb, bank):
    _refused(page, live_server, reverse("api_keys"), "Create key", "This field is required")


def _webhooks(page, live_server, orb, bank):
    # No event chosen.
    _refused(page, live_server, reverse("webhooks"), "Add webhook", "This field is required",
             {"#id_url": "https://hooks.example.com/memweb"})


PAGES = {
    "review queue: semantic search, row reject, bulk": _queue,
    "Orb page: reject, merge, delete": _orb_page,
    "Orb edit": _orb_edit,
    "bank list: create, import": _bank_list,
    "bank page: policy, copy, delete, erase": _bank_page,
    "experience browser: review, filters": _experiences,
    "DMRM settings": _dmrm_settings,
    "source-memory builder: preview, build": _source_builder,
    "API keys": _api_keys,
    "webhooks": _webhooks,
}


@pytest.mark.parametrize("case", PAGES.values(), ids=PAGES.keys())
def test_it_shows_what_went_wrong_on_bad_input_to_every_form(case, browser_page, live_server, role_admin_user,
                                                            make_orb, bank):
    orb = make_orb("My sweater shrank in the wash.", approve=False)
    make_orb("My wool sweater shrank after one wash.", approve=False)  # a candidate to merge into
    login(browser_page, live_server, role_admin_user)
    case(browser_page, live_server, orb, bank)


def test_it_says_why_a_sign_in_failed(browser_page, live_server, role_admin_user):
    page = browser_page
    page.goto(live_server.url + reverse("login"))
    page.get_by_label("Username").fill(role_admin_user.get_username())
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    _sees(page, "correct username and password")
