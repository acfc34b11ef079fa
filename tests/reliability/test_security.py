"""Security properties checked over every route the URL configuration declares, so a route added
later is covered without touching this file: security headers, CSRF on every state-changing
page and session API call, API keys that leave no secret behind and stay within their user's
rights, and an annotator who cannot learn which side of a pair is human by any route.

Routes come from the authorisation matrix's enumeration (tests/memweb/test_roles.py); the
existing per-route checks (roles, the judging page and pair API) are not repeated here.
"""
import json
import re
import subprocess
import sys
import uuid

import pytest
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse

from memweb.models import ApiKey
from memweb.roles import Role
from tests.annotation.conftest import make_campaign, make_items  # noqa: F401  (fixtures)
from tests.annotation.test_blindness import (  # noqa: F401  (assignment is a fixture)
    HUMAN_TEXT,
    SIMULATED_TEXT,
    _normalised,
    _swapped,
    _with_side,
    assignment,
)
from tests.memweb.test_roles import APIS, PAGES, PUBLIC_PAGES, ApiRoute, _call_page
from tests.memweb.test_workspace_matrix import BODIES, Route
from tests.reliability.hostile import World, page_routes, page_url
from tests.reliability.test_backup_restore import database_snapshot
from tests.support.processes import ROOT, database_url_for_tests, subprocess_env

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}
UNSAFE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
PLACEHOLDER_INT, PLACEHOLDER_UUID = "999999", str(uuid.UUID(int=0))  # what the matrix puts in paths
CSRF_PAGE_REFUSAL = "CSRF verification failed"
# Beyond the judging page's tokens (test_blindness): what changes from one call to the next anyway.
VOLATILE = [
    (re.compile(r'data-csrf-token="[^"]+"'), 'data-csrf-token="…"'),  # the API docs page
    (re.compile(r"\d+ ms\b"), "… ms"),  # the health page's measured latencies
    (re.compile(r'"latency_ms": \d+'), '"latency_ms": …'),
    (re.compile(r"Updated \d\d:\d\d:\d\d UTC"), "Updated … UTC"),  # the home page's clock
    # Skipping hands the annotator a new assignment, whose token is drawn at random for each call.
    (re.compile(r"^302 /annotation/judge/[0-9a-f-]{36}/"), "302 /annotation/judge/…/"),
]


def _missing_headers(response) -> dict:
    return {name: response.get(name) for name, value in SECURITY_HEADERS.items() if response.get(name) != value}


def _api_call(client, route: ApiRoute, **headers):
    return client.generic(route.method, route.url, "{}", "application/json", headers=headers)


@pytest.fixture
def admin_secret(role_admin_user) -> str:
    return ApiKey.issue(user=role_admin_user, name="security")[1]


@pytest.fixture
def many_failures_allowed(settings):
    """Calls made with a refused key count as failures: keep the brute-force guard out of the way."""
    settings.MEMWEB_AUTH_MAX_FAILURES = 10**6


# --- security headers -----------------------------------------------------------------------------

@pytest.mark.django_db
def test_it_sends_the_security_headers_on_every_page_and_api_answer(client, role_admin_user, admin_secret):
    client.force_login(role_admin_user)
    answers = {f"page {route.url}": client.get(route.url) for route in PAGES}
    answers |= {f"{route.method} {route.url}": _api_call(client, route, Authorization=f"Bearer {admin_secret}")
                for route in APIS}
    client.logout()
    answers |= {"anonymous login page": client.get(reverse("login")), "anonymous home": client.get(reverse("home")),
                "anonymous API": client.get("/api/me"), "unknown URL": client.get("/no-such-page/")}
    missing = {name: gaps for name, response in answers.items() if (gaps := _missing_headers(response))}
    assert not missing, missing
    assert {response.status_code for response in answers.values()} >= {200, 302, 401, 404}


# The static-file manifest exists only after collectstatic, which a fresh checkout has not run; the
# headers do not depend on it, so the probe renders with plain static storage.
PRODUCTION_PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.test import Client, override_settings
plain_static = {**settings.STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
with override_settings(STORAGES=plain_static):
    client = Client(HTTP_HOST="memweb.example.com")
    answers = {"plain": client.get("/login/"), "tls": client.get("/login/", secure=True),
               "proxied": client.get("/login/", HTTP_X_FORWARDED_PROTO="https")}
print(json.dumps({name: {"status": a.status_code, "location": a.get("Location"),
                         "hsts": a.get("Strict-Transport-Security"),
                         "csrf_cookie_secure": "csrftoken" in a.cookies and bool(a.cookies["csrftoken"]["secure"])}
                  for name, a in answers.items()}))
"""


@pytest.mark.django_db
def test_it_sends_hsts_and_secure_cookies_with_the_production_variables():
    """The README's production variables, read by a fresh process, produce the headers they promise."""
    env = subprocess_env(
        DJANGO_SETTINGS_MODULE="memweb.settings", DATABASE_URL=database_url_for_tests(), DEBUG="false",
        SECRET_KEY="s" * 60, ALLOWED_HOSTS="memweb.example.com", SECURE_SSL_REDIRECT="true", SECURE_COOKIES="true",
        SECURE_HSTS_SECONDS="31536000", BEHIND_TLS_PROXY="true",
    )
    result = subprocess.run([sys.executable, "-c", PRODUCTION_PROBE], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert answers["plain"]["status"] == 301
    assert answers["plain"]["location"] == "https://memweb.example.com/login/"
    assert answers["plain"]["hsts"] is None  # HSTS over plain HTTP would be ignored and is not sent
    for over_tls in ("tls", "proxied"):
        assert answers[over_tls]["status"] == 200, answers
        assert answers[over_tls]["hsts"] == "max-age=31536000; includeSubDomains; preload"
        assert answers[over_tls]["csrf_cookie_secure"] is True


# --- CSRF -------------------------------------------------------------------------------------------

def _page_urls(world: World) -> dict[str, str]:
    """Every page of the URL configuration with real objects in its path (the API's docs included),
    plus the public ones (sign in and out)."""
    return {route.label: page_url(world, route) for route in page_routes()} | {
        name: reverse(name, kwargs=PUBLIC_PATH_ARGUMENTS.get(name)) for name in PUBLIC_PAGES}


# The public pages with parameters in their path: a reset link's (any values reach the view's check).
PUBLIC_PATH_ARGUMENTS = {"password_reset_confirm": {"uidb64": "MQ", "token": "a-reset-token"}}


def _served_unsafe_operations(client: Client) -> list[Route]:
    """(method, path) of every unsafe operation the served OpenAPI schema lists."""
    schema = client.get(reverse("api:openapi-json")).json()
    return [Route(f"{method.upper()} {path}", method.upper(), path, tuple(re.findall(r"\{(\w+)\}", path)), ())
            for path, operations in schema["paths"].items() for method in operations
            if method.upper() in UNSAFE_METHODS]


PROTECTED_APIS = [route for route in APIS if route.roles is not None]
UNSAFE_APIS = [route for route in PROTECTED_APIS if route.method in UNSAFE_METHODS]
# The matrix's valid bodies, by the schema's spelling of a path.
VALID_BODIES = {re.sub(r"\{\w+:", "{", label): body for label, body in BODIES.items()}


def _changed_tables(before: dict) -> list[str]:
    after = database_snapshot()
    return sorted(label for label in after.keys() | before.keys() if after.get(label) != before.get(label))


@pytest.fixture
def csrf_probe(role_admin_user):
    """Objects behind every path, and a browser signed in as an admin (every role check passes, so a
    403 can only be the CSRF check) that sends no token."""
    world = World(role_admin_user)
    world.build()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(role_admin_user)
    return world, browser


@pytest.mark.django_db
def test_it_refuses_a_post_without_a_csrf_token_on_every_page_and_changes_nothing(csrf_probe):
    """The check runs before the view, on GET-only pages too; real objects in each path, so the view
    would act on one if the check let the request through."""
    world, browser = csrf_probe
    urls = _page_urls(world)
    before = database_snapshot()
    answers = {name: browser.post(url, {"name": "x", "reason": "x", "expected_version": 1}) for name, url in urls.items()}
    accepted = {name: response.status_code for name, response in answers.items()
                if response.status_code != 403 or CSRF_PAGE_REFUSAL not in response.content.decode()}
    assert not accepted, accepted
    assert _changed_tables(before) == []
    assert {"login", "logout", "api_key_create", "api_key_revoke", "orbs:approve", "evaluation:run_cancel"} <= answers.keys()


@pytest.mark.django_db
def test_it_refuses_every_unsafe_api_operation_by_session_without_a_csrf_token_and_changes_nothing(csrf_probe):
    """Every unsafe operation of the served schema, with real objects and a valid body (so it would
    reach its effect)."""
    world, browser = csrf_probe
    operations = [(route, world.url(route)) for route in _served_unsafe_operations(browser)]
    before, accepted = database_snapshot(), {}
    for route, url in operations:
        body = json.dumps(VALID_BODIES.get(route.label, {}))
        response = browser.generic(route.method, url, body, "application/json")
        if response.status_code != 403 or "CSRF" not in response.json()["detail"]:
            accepted[route.label] = response.status_code
    assert not accepted, accepted
    assert _changed_tables(before) == []
    assert len(operations) == len(UNSAFE_APIS) >= 10  # the schema serves what the URL configuration routes


@pytest.mark.django_db
def test_it_needs_no_csrf_token_for_an_api_key_on_any_unsafe_call(admin_secret):
    """Keys are not sent by browsers on their own, so agents need no token: no route a key may call
    asks for one (the review routes take no key at all: tests/memweb/test_key_scopes.py)."""
    agent = Client(enforce_csrf_checks=True)
    refused = {f"{route.method} {route.url}": response.status_code for route in UNSAFE_APIS if not route.review
               if (response := _api_call(agent, route, Authorization=f"Bearer {admin_secret}")).status_code
               in (401, 403)}
    assert not refused, refused


# --- API keys -----------------------------------------------------------------------------------------

def _rows_containing(text: str) -> dict[str, int]:
    """Rows of every table whose text form contains `text` (each column of every row is searched)."""
    found = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            quoted = connection.ops.quote_name(table)
            cursor.execute(f"SELECT count(*) FROM {quoted} AS t WHERE t::text LIKE %s", [f"%{text}%"])
            if count := cursor.fetchone()[0]:
                found[table] = count
    return found


@pytest.mark.django_db
def test_it_keeps_no_copy_of_a_key_secret_anywhere_in_the_database(client, operator_user):
    """Issued on the page (shown once) and then used: the secret's random part is in no row of any table."""
    client.force_login(operator_user)
    secret = client.post(reverse("api_key_create"), {"name": "shop agent", "scopes": ["memory:write"]}).context["new_secret"]
    agent = Client()
    assert agent.get("/api/me", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    assert agent.post("/api/orbs/banks", {"name": "keys bank"}, content_type="application/json",
                      headers={"X-API-Key": secret}).status_code == 201
    key = ApiKey.objects.get(user=operator_user)
    assert _rows_containing(key.key_hash) == {"memweb_apikey": 1}  # the search finds what is there
    assert _rows_containing(secret[ApiKey.PREFIX_LENGTH:]) == {}


@pytest.mark.django_db
def test_it_refuses_a_revoked_key_on_every_api_route(client, role_admin_user, many_failures_allowed):
    key, secret = ApiKey.issue(user=role_admin_user, name="to revoke")
    assert client.get("/api/me", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    key.revoke()
    answered = {f"{route.method} {route.url}": response.status_code for route in PROTECTED_APIS
                if (response := _api_call(client, route, Authorization=f"Bearer {secret}")).status_code != 401}
    assert not answered, answered


@pytest.mark.django_db
def test_it_gives_a_key_its_users_current_roles_only(client, user_for_role):
    """A key carries no rights of its own: taking a role from the user takes it from the key at once."""
    person = user_for_role(Role.OPERATOR)
    secret = ApiKey.issue(user=person, name="agent")[1]
    create_bank = ApiRoute("POST", "/api/orbs/banks", (Role.OPERATOR,))
    assert _api_call(client, create_bank, Authorization=f"Bearer {secret}").status_code == 422  # admitted
    person.memberships.all().delete()
    refused = _api_call(client, create_bank, Authorization=f"Bearer {secret}")
    assert refused.status_code == 403 and refused.json()["detail"] == "needs one of the roles: operator"


# Pages a key may read, with the reason.
KEY_READABLE = {"api:openapi-json": "the OpenAPI schema: code generators and test tools load it with a key",
                "api:openapi-view": "the schema's docs page: an integrator holding a key reads the API there"}


@pytest.mark.django_db
def test_it_opens_no_page_with_an_api_key(admin_secret):
    """Keys are for the JSON API: every page but the schema and its docs still sends a key holder to the sign-in
    page."""
    agent = Client(headers={"Authorization": f"Bearer {admin_secret}", "X-API-Key": admin_secret})
    login = reverse("login")
    opened = {route.name: response.status_code for route in PAGES if route.name not in KEY_READABLE
              if not (response := _call_page(agent, route.url)).get("Location", "").startswith(login)}
    assert not opened, opened
    assert agent.get(reverse("api:openapi-json")).status_code == 200
    assert agent.get(reverse("api:openapi-view")).status_code == 200


# --- blind judging, over every route an annotator can reach ---------------------------------------------

def _reachable_by_annotators(roles) -> bool:
    return not roles or Role.ANNOTATOR in roles


def _with_real_ids(url: str, assignment) -> list[str]:
    """The matrix's placeholders replaced by the annotator's campaign and assignment. An API path does
    not say a parameter's type, so each integer placeholder is tried as either id."""
    head, *rest = url.replace(PLACEHOLDER_UUID, str(assignment.token)).split(PLACEHOLDER_INT)
    urls = [head]
    for tail in rest:
        urls = [f"{start}{value}{tail}" for start in urls for value in (assignment.campaign_id, assignment.token)]
    return urls


def _annotator_calls(assignment) -> list[tuple[str, str]]:
    """(method, url): each reachable page by GET and by POST, each reachable API operation."""
    calls = [(method, url) for route in PAGES if _reachable_by_annotators(route.roles)
             for url in _with_real_ids(route.url, assignment) for method in ("GET", "POST")]
    return calls + [(route.method, url) for route in APIS if _reachable_by_annotators(route.roles)
                    for url in _with_real_ids(route.url, assignment)]


def _as_annotator(assignment, method: str, url: str) -> str:
    """A fresh session per call, so a flash message of one call cannot show up in the next."""
    person = Client()
    person.force_login(assignment.annotator)
    if url.startswith("/api/"):
        response = person.generic(method, url, "{}", "application/json")
    else:
        response = person.generic(method, url)
    answer = f"{response.status_code} {response.get('Location', '')}\n{_normalised(response.content.decode())}"
    for pattern, replacement in VOLATILE:
        answer = pattern.sub(replacement, answer)
    return answer


def _first_difference(one: str, other: str) -> str:
    lines = next(((a, b) for a, b in zip(one.splitlines(), other.splitlines()) if a != b), ("(length)", ""))
    return f"{lines[0].strip()[:200]!r} != {lines[1].strip()[:200]!r}"


def test_it_lets_no_annotator_route_tell_the_sides_apart(assignment):
    """Every route an annotator may call answers the same for both randomisations, except that the
    two texts trade places: nothing else (ids, order, labels, status) depends on which side is human."""
    differs, showing_texts = [], set()
    for method, url in _annotator_calls(assignment):
        answers = {}
        for side_a_is_human in (True, False):
            # Each side is asked from the same state: a call that changes it (a skip) is rolled back.
            with transaction.atomic():
                _with_side(assignment, side_a_is_human)
                answers[side_a_is_human] = _as_annotator(assignment, method, url)
                transaction.set_rollback(True)
        if _swapped(answers[True]) != answers[False]:
            differs.append(f"{method} {url}: {_first_difference(_swapped(answers[True]), answers[False])}")
        if HUMAN_TEXT in answers[True] and SIMULATED_TEXT in answers[True]:
            showing_texts.add(f"{method} {url}")
    assert not differs, differs
    # Not vacuous: the judging page (also re-rendered with an error) and the pair API carry both texts.
    judge = reverse("annotation:judge", args=[assignment.token])
    assert {f"GET {judge}", f"POST {judge}", f"GET /api/annotation/assignments/{assignment.token}"} <= showing_texts
