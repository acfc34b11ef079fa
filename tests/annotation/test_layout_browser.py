"""In chromium at a laptop's 1440 px: the results page's per-criterion tables show their last
column, the simulated win rate, without scrolling sideways (issue 18: it was clipped)."""
import io

import pytest
from django.urls import reverse

from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FITS = """(wrap) => { const last = wrap.querySelector('thead th:last-child').getBoundingClientRect();
  return wrap.scrollWidth <= wrap.clientWidth && last.right <= wrap.getBoundingClientRect().right; }"""


def test_the_simulated_win_rate_column_fits_a_laptop_screen(browser_page, live_server, operator_user):
    from annotation.demo import CAMPAIGN_NAME, load_demo
    from annotation.models import Campaign

    load_demo(stdout=io.StringIO())
    page = browser_page
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("annotation:campaign_results",
                                        args=[Campaign.objects.get(name=CAMPAIGN_NAME).pk]))
    tables = page.locator(".table-wrap", has=page.locator("th", has_text="Simulated win rate")).all()
    assert len(tables) == 4  # overall, then by language, task format and domain
    for wrap in tables:
        assert wrap.evaluate(FITS), wrap.locator("thead").inner_text()
