"""A real browser signs in and sees the home page, navigation and styles."""
import pytest
from django.urls import reverse

from tests.browser import login

# Fixtures browser/browser_page; harmless once tests/conftest.py lists the plugin too.

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_signs_in_and_sees_the_home_page(browser_page, live_server, operator_user):
    page = browser_page
    page.goto(live_server.url + reverse("home"))
    assert page.url.startswith(live_server.url + reverse("login"))
    login(page, live_server, operator_user)
    assert page.get_by_role("heading", name=f"Welcome, {operator_user.username}").is_visible()
    nav = page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="API keys").is_visible()
    assert nav.get_by_role("link", name="Home").get_attribute("aria-current") == "page"
    # The stylesheet and htmx really loaded (served as static files, no CDN).
    assert page.evaluate("getComputedStyle(document.querySelector('.topbar')).position") == "sticky"
    assert page.evaluate("typeof window.htmx") == "object"


def test_it_signs_out_from_the_user_menu(browser_page, live_server, reviewer_user):
    page = browser_page
    login(page, live_server, reviewer_user)
    page.locator(".user-menu summary").filter(has_text=reviewer_user.username).click()
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(live_server.url + reverse("login"))
    assert page.get_by_role("status").filter(has_text="You are signed out.").is_visible()
