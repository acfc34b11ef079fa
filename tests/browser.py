"""Playwright fixtures for browser tests, driving Debian's chromium (never a downloaded browser).

Register with `pytest_plugins = ["tests.browser"]` (tests/conftest.py). In a test:

    @pytest.mark.browser
    @pytest.mark.django_db(transaction=True)
    def test_it_…(browser_page, live_server, reviewer_user):
        login(browser_page, live_server, reviewer_user)
        browser_page.goto(live_server.url + reverse("…"))
"""
import os
import shutil

import pytest
from django.urls import reverse

from tests.fixtures.users import PASSWORD

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str:
    found = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(found):
        pytest.fail("Debian's chromium is missing: apt-get install -y chromium (the test command installs it)")
    return found


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an asyncio loop in this thread, which trips Django's
    # async-unsafe guard on every ORM call that follows (tests and live_server setup alike).
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def browser_page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def login(page, live_server, user, password: str = PASSWORD) -> None:
    """Sign in through the real form and wait for the home page."""
    page.goto(live_server.url + reverse("login"))
    page.get_by_label("Username").fill(user.get_username())
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(live_server.url + reverse("home"))
