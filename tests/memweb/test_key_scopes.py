"""API key scopes, over every API route of the URL configuration: a key with a route's scope is
admitted, a key with every other scope gets 403 naming the missing one, and no key at all may
review memories (approve, edit, reject, merge, delete, restore), whatever its scopes. Plus the
API-keys page: scopes chosen at creation, and a revoke that asks first (a browser test)."""
import pytest
from django.test import Client
from django.urls import reverse

from memweb.auth import REVIEW_NEEDS_A_PERSON
from memweb.models import ApiKey
from memweb.registry import api_scopes
from tests.browser import login
from tests.memweb.test_roles import APIS
from tests.orbs.conftest import bank, make_orb  # noqa: F401  (fixtures)

SCOPES = [scope.value for scope in api_scopes()]

PROTECTED = [route for route in APIS if route.roles is not None]
# Routes any valid key may call, with the reason.
NO_SCOPE = {
    ("GET", "/api/me"): "who the key acts as, and with which roles",
    ("GET", "/api/health/details"): "the server's health, nobody's data",
    ("GET", "/api/jobs/999999"): "a job's progress: jobs are started by routes that checked their own scope",
    ("GET", "/api/memory-layer/contract.openapi.json"): "the memory-layer contract's document, nobody's data",
}
REVIEW_ROUTES = {
    ("POST", "/api/orbs/orbs/bulk"), ("POST", "/api/orbs/orbs/999999/approve"), ("POST", "/api/orbs/orbs/999999/reject"),
    ("POST", "/api/orbs/orbs/999999/edit"), ("POST", "/api/orbs/orbs/999999/merge"), ("DELETE", "/api/orbs/orbs/999999"),
    ("POST", "/api/orbs/orbs/999999/restore"), ("DELETE", "/api/orbs/experiences/banks/999999/experiences/999999"),
    ("POST", "/api/orbs/experiences/banks/999999/experiences/999999/restore"),
}


def _call(route, secret: str):
    return Client().generic(route.method, route.url, "{}", "application/json",
                            headers={"Authorization": f"Bearer {secret}"})


def test_it_declares_a_scope_or_the_review_gate_on_every_route():
    undeclared = {(route.method, route.url) for route in PROTECTED if route.scope is None and not route.review}
    assert undeclared == set(NO_SCOPE)
    assert {(route.method, route.url) for route in PROTECTED if route.review} == REVIEW_ROUTES
    assert {route.scope for route in PROTECTED if route.scope} == set(SCOPES)


@pytest.mark.django_db
def test_it_admits_a_key_on_exactly_the_routes_of_its_scopes(role_admin_user, settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 10**6
    only = {scope: ApiKey.issue(user=role_admin_user, name=scope, scopes=[scope])[1] for scope in SCOPES}
    but = {scope: ApiKey.issue(user=role_admin_user, name=f"all but {scope}",
                               scopes=[s for s in SCOPES if s != scope])[1] for scope in SCOPES}
    wrong = {}
    for route in (route for route in PROTECTED if route.scope):
        if _call(route, only[route.scope]).status_code in (401, 403):
            wrong[f"{route.method} {route.url}"] = "refused with its own scope"
        refused = _call(route, but[route.scope])
        if refused.status_code != 403 or route.scope not in refused.json()["detail"]:
            wrong[f"{route.method} {route.url}"] = f"admitted without {route.scope}: {refused.status_code}"
    assert not wrong, wrong


@pytest.mark.django_db
def test_no_key_can_review_memories_but_a_reviewers_session_can(reviewer_user, make_orb, client):
    every_scope = ApiKey.issue(user=reviewer_user, name="all scopes")[1]
    for route in (route for route in PROTECTED if route.review):
        refused = _call(route, every_scope)
        assert refused.status_code == 403 and refused.json()["detail"] == REVIEW_NEEDS_A_PERSON, route
    orb = make_orb("Where is my order?", approve=False)
    url = f"/api/orbs/orbs/{orb.pk}/approve"
    by_key = Client().post(url, {"expected_version": orb.version}, content_type="application/json",
                           headers={"X-API-Key": every_scope})
    assert by_key.status_code == 403
    client.force_login(reviewer_user)
    approved = client.post(url, {"expected_version": orb.version, "note": "checked"}, content_type="application/json")
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    event = orb.events.get(action="approved")  # who, when and what changed
    assert event.actor == reviewer_user and event.at is not None
    assert event.before["status"] == "pending" and event.after["status"] == "approved"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_keys_page_sets_scopes_and_asks_before_revoking(browser_page, live_server, operator_user):
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("api_keys"))
    page.fill("input[name=name]", "nightly agent")
    page.check("input[value='runs:read']")
    page.click("button:has-text('Create key')")
    key = ApiKey.objects.get(user=operator_user)
    assert key.scopes == ["memory:read", "runs:read"]  # memory:read is ticked for a new key
    # Issue 18: revoking cut agents off at the first click. Dismissing the question keeps the key.
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("button:has-text('Revoke')")
    page.wait_for_load_state()
    key.refresh_from_db()
    assert key.is_active
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button:has-text('Revoke')")
    page.wait_for_selector("text=revoked")
    key.refresh_from_db()
    assert not key.is_active
