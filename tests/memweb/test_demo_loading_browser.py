"""While `manage.py load_demo` runs (minutes on a first start), every page says how far it is; the
notice is gone once loading ends."""
import pytest
from django.urls import reverse

from memweb.demo_loading import demo_loading_end, demo_loading_start, demo_loading_step
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_every_page_shows_the_demo_loading_until_it_is_done(browser_page, live_server, operator_user):
    demo_loading_start(parts_total=4)
    demo_loading_step(parts_done=2, part="Evaluation")
    page = browser_page
    login(page, live_server, operator_user)
    for url in (reverse("home"), reverse("orbs:bank_list"), reverse("webhooks")):
        page.goto(live_server.url + url)
        assert page.locator("#demo-loading").inner_text().startswith("Demo loading: 2 of 4 parts done (now: Evaluation).")
    page.goto(live_server.url + reverse("annotation:campaign_list"))
    assert page.locator("#campaigns-demo-loading").is_visible()  # not a bare "No campaigns"
    demo_loading_end()
    page.reload()
    assert page.locator("#demo-loading").count() == 0 and page.locator("#campaigns-demo-loading").count() == 0
