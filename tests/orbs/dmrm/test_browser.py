"""A reviewer approves an experience in place and sees the Q-value chart, in a real browser."""
import pytest
from django.urls import reverse

from orbs.dmrm.models import Experience
from orbs.dmrm.services import experience_append
from orbs.services import bank_get_or_create
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_charts_q_values_and_approves_a_row_without_reloading(browser_page, live_server, reviewer_user):
    bank = bank_get_or_create(name="browser")
    entry = experience_append(bank=bank, trajectory_id="t1", step=0, goal="return the jacket",
                              observation="order delivered", action="return_item(W7)", reward=1.0)
    page = browser_page
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:experience_list"))
    page.wait_for_function("() => Chart.getChart('q-chart') !== undefined")
    assert page.evaluate("() => Chart.getChart('q-chart').data.datasets[0].data.reduce((a, b) => a + b, 0)") == 1
    row = page.locator(f"#experience-{entry.pk}")
    row.get_by_role("button", name="Approve").click()
    row.locator(".badge-approved").wait_for()
    assert page.url == live_server.url + reverse("orbs:experience_list")
    assert Experience.objects.get(pk=entry.pk).status == Experience.Status.APPROVED
