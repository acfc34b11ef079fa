"""Workspaces in a real browser: an admin who made a second workspace still lands where they last
worked (Default until they switch), and switching on an object's page opens the same list in the
new workspace instead of a 404 (the object belongs to the old one)."""
import pytest
from django.urls import reverse

from memweb.models import Membership, Workspace
from memweb.roles import Role
from tests.browser import login
from tests.orbs.conftest import bank, make_orb  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _open_user_menu(page):
    page.locator(".user-menu summary").click()


def _switch_to(page, name: str):
    _open_user_menu(page)
    page.locator("#workspace-switch").select_option(label=name)
    page.locator(".workspace-switcher").get_by_role("button", name="Switch").click()


def _sign_out_and_in(page, live_server, user):
    _open_user_menu(page)
    page.get_by_role("button", name="Sign out").click()
    login(page, live_server, user)


def _current_workspace(page) -> str:
    return page.locator(".user-menu summary").inner_text().split(" · ")[-1]


def test_an_admin_lands_in_default_until_switching_and_then_where_they_switched(
        browser_page, live_server, role_admin_user):
    page = browser_page
    login(page, live_server, role_admin_user)
    page.goto(live_server.url + reverse("workspaces"))
    page.get_by_label("Name:", exact=True).fill("Research")
    page.get_by_label("Slug:", exact=True).fill("research")
    page.get_by_role("button", name="Create workspace").click()
    _sign_out_and_in(page, live_server, role_admin_user)
    assert _current_workspace(page) == "Default"

    _switch_to(page, "Research")
    page.get_by_text("Now working in “Research”").wait_for()
    _sign_out_and_in(page, live_server, role_admin_user)
    assert _current_workspace(page) == "Research"


def test_switching_on_an_orbs_page_opens_the_review_queue_of_the_new_workspace(
        browser_page, live_server, reviewer_user, make_orb):
    orb = make_orb("Offer the exchange before the refund.")
    other = Workspace.objects.create(slug="support", name="Support team")
    Membership.objects.create(workspace=other, user=reviewer_user, role=Role.REVIEWER)
    page = browser_page
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:detail", args=[orb.pk]))
    _switch_to(page, "Support team")
    page.wait_for_url(live_server.url + reverse("orbs:queue"))
    assert _current_workspace(page) == "Support team"
    assert "Now working in “Support team”" in page.locator("body").inner_text()
