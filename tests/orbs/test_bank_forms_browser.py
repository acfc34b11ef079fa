"""The banks page holds two forms (create, import) that both have a name field: each input keeps
its own id, so each label names its own input."""
import pytest
from django.urls import reverse

from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_every_input_on_the_banks_page_has_its_own_id_and_label(browser_page, live_server, role_admin_user):
    page = browser_page
    login(page, live_server, role_admin_user)
    page.goto(live_server.url + reverse("orbs:bank_list"))
    ids = page.eval_on_selector_all("[id]", "nodes => nodes.map(node => node.id)")
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    page.get_by_label("Import as (bank name)").fill("Imported shop")
    assert page.get_by_label("Name", exact=True).input_value() == ""
