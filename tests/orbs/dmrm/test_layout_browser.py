"""The experience browser's headers at 1440 px: each header's words stay inside its own column
("visits (bootstrapped)" once ran into "trajectory")."""
import pytest
from django.urls import reverse

from orbs.dmrm.services import experience_append
from orbs.services import bank_get_or_create
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OVERFLOWING_HEADERS = """() => [...document.querySelectorAll('.experience-table thead th')].filter(th => {
  const cell = th.getBoundingClientRect();
  const range = document.createRange();
  range.selectNodeContents(th);
  return [...range.getClientRects()].some(box => box.right > cell.right + 0.5);
}).map(th => th.innerText)"""


def test_no_header_of_the_experience_table_runs_into_the_next(browser_page, live_server, reviewer_user):
    bank = bank_get_or_create(name="browser")
    experience_append(bank=bank, trajectory_id="t1", step=0, goal="return the jacket",
                      observation="order delivered", action="return_item(W7)", reward=1.0)
    page = browser_page
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:experience_list"))
    assert page.evaluate(OVERFLOWING_HEADERS) == []
