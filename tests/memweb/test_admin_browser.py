"""Administration in a real browser (issue 32): an admin creates a user, changes their role on the
workspace's members page (a demotion asks first), deactivates them and they can no longer sign in;
pages through, searches and filters the users and the members; renames and archives a workspace,
which leaves the workspace menu and puts a banner on every page; a new user sets their password with
the one-time link (also e-mailed); a forgotten password is reset by e-mail; keys get an expiry date.
Screenshots at 1440 and 390 px of each page, none of which scrolls sideways."""
import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from memweb.models import ApiKey, Membership, Workspace, default_workspace_id
from memweb.roles import Role

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(os.environ.get("MEMWEB_SHOTS", "/tmp/shots-admin"))
NEW_PASSWORD = "a-fresh-and-long-passphrase"
WIDTHS = (1440, 390)


def _shoot(page, name: str) -> None:
    """A full-page screenshot at each width, each checked for sideways scrolling."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name} scrolls sideways by {overflow} px at {width} px"
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1440, "height": 900})


def _sign_in(page, live_server, username: str, password: str) -> None:
    page.goto(live_server.url + reverse("login"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


def _member_row(page, live_server, workspace: Workspace, username: str):
    """The member's row on the workspace's members page, searched for by address: typing in the search
    box swaps the rows in on change and again on submit, and a swap landing after a select was changed
    would undo that choice (the search box has its own test)."""
    page.goto(live_server.url + reverse("workspace_members", args=[workspace.pk]) + f"?q={username}")
    expect(page.locator("#member-rows tbody tr")).to_have_count(1)
    return page.locator("#member-rows tr").filter(has_text=username)


def test_an_admin_creates_promotes_demotes_and_deactivates_a_user(browser, browser_page, live_server, role_admin_user):
    page = browser_page
    _sign_in(page, live_server, role_admin_user.username, "correct-horse-battery-staple")
    page.wait_for_url(live_server.url + reverse("home"))
    page.get_by_role("link", name="Users").first.click()
    page.wait_for_url(live_server.url + reverse("users"))

    page.get_by_label("Username", exact=True).fill("dana")
    page.locator("#new-user").get_by_label("Role", exact=True).select_option(Role.REVIEWER)
    page.get_by_label("Set an initial password now").check()
    page.get_by_label("Initial password", exact=True).fill("password")
    page.get_by_label("Initial password again").fill("password")
    page.get_by_role("button", name="Create user").click()
    expect(page.locator(".field-error").filter(has_text="This password is too common")).to_be_visible()
    _shoot(page, "users-create-error")
    page.get_by_label("Initial password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("Initial password again").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Create user").click()
    expect(page.get_by_text("User dana created as reviewer")).to_be_visible()
    expect(page.locator("#user-rows tr").filter(has_text="dana")).to_contain_text("reviewer in Default")
    _shoot(page, "users")

    default = Workspace.objects.get(pk=default_workspace_id())
    row = _member_row(page, live_server, default, "dana")
    row.get_by_label("Role of dana in Default").select_option(Role.ADMIN)
    row.get_by_role("button", name="Change the role of dana").click()
    expect(page.get_by_text("dana is now admin in “Default”")).to_be_visible()
    expect(page.get_by_label("Search")).to_have_value("dana")  # back on the list as it was
    _shoot(page, "workspace-members")
    row = page.locator("#member-rows tr").filter(has_text="dana")
    row.get_by_label("Role of dana in Default").select_option(Role.OPERATOR)
    row.get_by_role("button", name="Change the role of dana").click()
    expect(page.get_by_role("heading", name="Take the admin role from dana?")).to_be_visible()
    _shoot(page, "role-confirm")
    page.get_by_role("button", name="Make them operator").click()
    expect(page.get_by_text("dana is now operator in “Default”")).to_be_visible()

    page.goto(live_server.url + reverse("users") + "?q=dana")
    page.get_by_role("button", name="Deactivate dana").click()
    expect(page.get_by_text("dana is deactivated")).to_be_visible()
    expect(page.locator("#user-rows tr").filter(has_text="dana")).to_contain_text("inactive")

    visitor = browser.new_context(viewport={"width": 1440, "height": 900})
    refused = visitor.new_page()
    _sign_in(refused, live_server, "dana", NEW_PASSWORD)
    expect(refused.locator(".errorlist")).to_contain_text("Please enter a correct username and password")
    assert refused.url.startswith(live_server.url + reverse("login"))
    visitor.close()


def test_an_admin_renames_and_archives_a_workspace(browser_page, live_server, role_admin_user):
    team = Workspace.objects.create(slug="research", name="Research")
    Membership.objects.create(workspace=team, user=role_admin_user, role=Role.ADMIN)
    page = browser_page
    _sign_in(page, live_server, role_admin_user.username, "correct-horse-battery-staple")
    page.wait_for_url(live_server.url + reverse("home"))
    page.goto(live_server.url + reverse("workspaces"))
    card = page.locator("section.card").filter(has=page.get_by_role("heading", name="Research"))
    card.get_by_label("New name").fill("Research lab")
    card.get_by_role("button", name="Rename").click()
    expect(page.get_by_text("Workspace “Research” is now “Research lab”.")).to_be_visible()
    expect(page.locator("#workspace-switch option", has_text="Research lab")).to_have_count(1)

    card = page.locator("section.card").filter(has=page.get_by_role("heading", name="Research lab"))
    card.get_by_role("button", name="Archive").click()
    expect(page.get_by_text("Workspace “Research lab” archived")).to_be_visible()
    expect(page.locator("#workspace-switch option", has_text="Research lab")).to_have_count(0)
    card = page.locator("section.card").filter(has=page.get_by_role("heading", name="Research lab"))
    expect(card.get_by_text("archived", exact=False).first).to_be_visible()
    _shoot(page, "workspaces-archived")

    expect(page.locator("#archived-banner")).to_have_count(0)  # the current workspace is still open

    card.get_by_role("button", name="Open it read-only").click()
    expect(page.get_by_text("It is archived: read-only")).to_be_visible()
    expect(page.get_by_text("archived: read-only", exact=True)).to_be_attached()
    banner = page.locator("#archived-banner")
    expect(banner).to_contain_text("Workspace “Research lab” is archived: read-only.")
    page.goto(live_server.url + reverse("orbs:bank_list"))
    expect(banner).to_contain_text("nothing can be created, changed, started or deleted in it")
    page.get_by_label("Name", exact=True).first.fill("Refused bank")
    page.get_by_role("button", name="Create bank").click()
    expect(page.get_by_text("Workspace “Research lab” is archived: it is read-only")).to_be_visible()
    _shoot(page, "archived-refusal")

    banner.get_by_role("link", name="Unarchive it on the Workspaces page").click()
    page.wait_for_url(f"**{reverse('workspaces')}#workspace-{team.pk}")
    page.locator(f"#workspace-{team.pk}").get_by_role("button", name="Unarchive").click()
    expect(page.get_by_text("Workspace “Research lab” unarchived")).to_be_visible()
    expect(page.locator("#archived-banner")).to_have_count(0)


def test_a_new_user_chooses_their_password_with_the_one_time_link(browser, browser_page, live_server,
                                                                     role_admin_user):
    page = browser_page
    _sign_in(page, live_server, role_admin_user.username, "correct-horse-battery-staple")
    page.wait_for_url(live_server.url + reverse("home"))
    page.goto(live_server.url + reverse("users"))
    page.get_by_label("Username", exact=True).fill("erin")
    page.locator("#new-user").get_by_label("Role", exact=True).select_option(Role.ANNOTATOR)
    page.get_by_role("button", name="Create user").click()
    link = page.locator("#set-password-link")
    expect(link).to_contain_text("/set-password/")
    _shoot(page, "user-created")

    newcomer = browser.new_context(viewport={"width": 1440, "height": 900})
    visitor = newcomer.new_page()
    visitor.goto(link.inner_text())
    expect(visitor.get_by_role("heading", name="Choose your password")).to_be_visible()
    _shoot(visitor, "password-set")
    visitor.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    visitor.get_by_label("New password confirmation").fill(NEW_PASSWORD)
    visitor.get_by_role("button", name="Set my password").click()
    expect(visitor.get_by_text("Your password is set: sign in with it.")).to_be_visible()
    _sign_in(visitor, live_server, "erin", NEW_PASSWORD)
    visitor.wait_for_url(live_server.url + reverse("home"))
    visitor.goto(link.inner_text())
    expect(visitor.get_by_text("This link has been used already or has lapsed.")).to_be_visible()
    newcomer.close()


def test_the_keys_page_takes_an_expiry_and_marks_expired_keys(browser_page, live_server, operator_user):
    old = ApiKey.issue(user=operator_user, name="last year's agent")[0]
    old.expires_on = timezone.localdate() - timedelta(days=365)
    old.save()
    page = browser_page
    _sign_in(page, live_server, operator_user.username, "correct-horse-battery-staple")
    page.wait_for_url(live_server.url + reverse("home"))
    page.goto(live_server.url + reverse("api_keys"))
    expect(page.locator("tr").filter(has_text="last year's agent")).to_contain_text("expired")
    page.get_by_label("Key name").fill("this month's agent")
    page.get_by_label("Expires after").fill((timezone.localdate() + timedelta(days=30)).isoformat())
    page.get_by_role("button", name="Create key").click()
    expect(page.locator("#new-secret")).to_be_visible()
    expect(page.locator("tr").filter(has_text="this month's agent")).to_contain_text("active")
    _shoot(page, "api-keys")


def test_the_users_and_a_workspaces_members_are_paged_searched_and_filtered(browser_page, live_server,
                                                                             role_admin_user, user_for_role):
    for number in range(30):
        user_for_role(Role.ANNOTATOR, username=f"crowd{number:02d}")
    rita = user_for_role(Role.REVIEWER, username="rita")
    rita.email = "rita@reviews.example.org"
    rita.save()
    page = browser_page
    _sign_in(page, live_server, role_admin_user.username, "correct-horse-battery-staple")
    page.wait_for_url(live_server.url + reverse("home"))

    page.goto(live_server.url + reverse("users"))
    rows = page.locator("#user-rows tbody tr")
    expect(rows).to_have_count(25)
    expect(page.locator("#user-rows")).to_contain_text("32 users")
    page.locator("#user-rows").get_by_role("link", name="Next").click()
    expect(rows).to_have_count(7)
    expect(page.locator("#user-rows .pagination")).to_contain_text("2 / 2")
    page.goto(live_server.url + reverse("users"))
    page.get_by_label("Search").fill("reviews.example")
    page.get_by_label("Search").press("Enter")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("rita@reviews.example.org")
    page.goto(live_server.url + reverse("users"))
    page.get_by_role("search").get_by_label("Role").select_option(Role.ANNOTATOR)
    expect(page.locator("#user-rows")).to_contain_text("30 users match the filters")
    _shoot(page, "users-filtered")
    page.get_by_label("Search").fill("nobody-by-that-name")
    page.get_by_label("Search").press("Enter")
    expect(page.get_by_role("heading", name="No users match")).to_be_visible()

    page.goto(live_server.url + reverse("workspaces"))
    page.get_by_role("link", name="Members of Default").click()
    member_rows = page.locator("#member-rows tbody tr")
    expect(member_rows).to_have_count(25)
    page.locator("#member-rows").get_by_role("link", name="Next").click()
    expect(member_rows).to_have_count(7)
    page.goto(live_server.url + reverse("workspace_members", args=[default_workspace_id()]))
    page.get_by_role("search").get_by_label("Role").select_option(Role.REVIEWER)
    expect(member_rows).to_have_count(1)
    expect(member_rows.first).to_contain_text("rita")
    _shoot(page, "workspace-members-filtered")
    page.get_by_label("Status").select_option("inactive")
    expect(page.get_by_role("heading", name="No members match")).to_be_visible()
    _shoot(page, "workspace-members-empty")


def _mailed_link(to: str) -> str:
    [message] = [message for message in mail.outbox if message.to == [to]]
    return next(line for line in message.body.splitlines() if line.startswith("http"))


def test_a_forgotten_password_is_reset_by_e_mail(browser_page, live_server, django_user_model):
    django_user_model.objects.create_user("forgetful", email="forgetful@example.org", password="an-old-passphrase-1")
    page = browser_page
    page.goto(live_server.url + reverse("login"))
    page.get_by_role("link", name="Forgot your password?").click()
    expect(page.get_by_role("heading", name="Reset your password")).to_be_visible()
    _shoot(page, "password-reset")
    page.get_by_label("Email").fill("nobody@example.org")
    page.get_by_role("button", name="Send me a reset link").click()
    expect(page.get_by_role("heading", name="Check your e-mail")).to_be_visible()
    unknown_answer = page.locator("main").inner_text()
    assert mail.outbox == []

    page.goto(live_server.url + reverse("password_reset"))
    page.get_by_label("Email").fill("forgetful@example.org")
    page.get_by_role("button", name="Send me a reset link").click()
    expect(page.get_by_role("heading", name="Check your e-mail")).to_be_visible()
    assert page.locator("main").inner_text() == unknown_answer  # nothing tells a known address apart
    _shoot(page, "password-reset-sent")

    page.goto(_mailed_link("forgetful@example.org"))
    expect(page.get_by_role("heading", name="Choose a new password")).to_be_visible()
    _shoot(page, "password-reset-confirm")
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("New password confirmation").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change my password").click()
    expect(page.get_by_text("Your password is changed: sign in with it.")).to_be_visible()
    _sign_in(page, live_server, "forgetful", NEW_PASSWORD)
    page.wait_for_url(live_server.url + reverse("home"))
