"""The source-memory preview in a real browser: its address carries the settings, never the CSRF
token, and its steps come a page at a time."""
import pytest
from django.urls import reverse

from evaluation.models import Task
from evaluation.services import episode_run
from orbs.dmrm import views as dmrm_views
from orbs.services import bank_get_or_create
from tests.browser import login
from tests.evaluation.conftest import builtin  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_preview_pages_its_steps_and_keeps_the_token_out_of_the_address(
        browser_page, live_server, operator_user, builtin, monkeypatch):  # noqa: F811
    episode_run(task=Task.objects.get(external_id="shop-clo-008"))  # a finished clothing episode
    monkeypatch.setattr(dmrm_views, "PREVIEW_ROWS", 2)  # a page of two steps: the one episode fills several
    bank = bank_get_or_create(name="Team memory")
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("orbs:dmrm_source", args=[bank.slug]))
    page.get_by_label("Min reward").fill("-1")
    page.get_by_label("Min q").fill("-100")
    page.get_by_role("button", name="Preview").click()
    rows = page.locator("#preview-title + .table-wrap tbody tr")
    rows.first.wait_for()
    assert "csrfmiddlewaretoken" not in page.url and "min_q=-100" in page.url
    assert rows.count() == 2
    first_steps = rows.locator("td:nth-child(2)").all_inner_texts()
    page.get_by_role("link", name="Next ›").click()
    page.wait_for_url("**page=2**")
    assert "csrfmiddlewaretoken" not in page.url
    assert rows.count() == 2 and rows.locator("td:nth-child(2)").all_inner_texts() != first_steps
