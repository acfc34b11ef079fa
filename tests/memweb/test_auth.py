"""API keys (issue, hash, revoke, last use), session auth with CSRF, brute-force
limits, sign in/out, the API keys page and the create_user / create_api_key commands."""
import io
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from ipaddress import ip_network

import pytest
from django.contrib.auth import get_user_model
from django.core.cache.backends import db as db_cache
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client
from django.urls import path, reverse
from django.utils import timezone
from ninja import NinjaAPI

from memweb.auth import BAD_KEY, NO_CREDENTIALS, api_auth, auth_failures_prune
from memweb.env import env_networks
from memweb.models import ApiKey, AuthFailure
from memweb.roles import Role, user_roles
from tests.fixtures.users import PASSWORD

# This module doubles as a URLconf (pytest.mark.urls) with one operation per kind of rule.
probe_api = NinjaAPI(urls_namespace="auth-probe", docs_url=None, openapi_url=None)


@probe_api.get("/reviewers", auth=api_auth(Role.REVIEWER))
def reviewers_only(request):
    return {"user": request.auth.get_username(), "request_user": request.user.get_username()}


@probe_api.post("/anyone", auth=api_auth())
def anyone(request):
    return {"user": request.auth.get_username()}


urlpatterns = [path("t/", probe_api.urls)]
with_probe_api = pytest.mark.urls(__name__)


def _bearer(secret: str) -> dict:
    return {"Authorization": f"Bearer {secret}"}


# --- keys ---
@pytest.mark.django_db
def test_it_stores_only_a_hash_of_the_secret(operator_user):
    key, secret = ApiKey.issue(user=operator_user, name="agent")
    stored = ApiKey.objects.values().get(pk=key.pk)
    assert secret.startswith("mw_") and len(secret) > 40
    assert secret not in {str(value) for value in stored.values()}
    assert stored["key_hash"] == ApiKey.hash_secret(secret) and stored["prefix"] == secret[:8]


@with_probe_api
@pytest.mark.django_db
@pytest.mark.parametrize("header", ["Authorization", "X-API-Key"])
def test_it_accepts_a_key_in_either_header(client, reviewer_user, header):
    secret = ApiKey.issue(user=reviewer_user, name="agent")[1]
    value = f"Bearer {secret}" if header == "Authorization" else secret
    response = client.get("/t/reviewers", headers={header: value})
    assert response.status_code == 200
    name = reviewer_user.get_username()
    assert response.json() == {"user": name, "request_user": name}


@with_probe_api
@pytest.mark.django_db
def test_it_refuses_a_key_whose_user_lacks_the_role(client, operator_user, role_admin_user):
    response = client.get("/t/reviewers", headers=_bearer(ApiKey.issue(user=operator_user, name="a")[1]))
    assert response.status_code == 403
    assert response.json() == {"detail": "needs one of the roles: reviewer"}
    assert client.get("/t/reviewers", headers=_bearer(ApiKey.issue(user=role_admin_user, name="a")[1])).status_code == 200


@with_probe_api
@pytest.mark.django_db
def test_it_answers_401_without_valid_credentials(client, reviewer_user):
    assert client.get("/t/reviewers").json() == {"detail": NO_CREDENTIALS}
    assert client.get("/t/reviewers").status_code == 401
    key, secret = ApiKey.issue(user=reviewer_user, name="agent")
    key.revoke()
    for bad in (secret, "mw_not-a-key"):
        response = client.get("/t/reviewers", headers=_bearer(bad))
        assert (response.status_code, response.json()) == (401, {"detail": BAD_KEY})


@with_probe_api
@pytest.mark.django_db
def test_it_refuses_keys_of_deactivated_users(client, reviewer_user):
    secret = ApiKey.issue(user=reviewer_user, name="agent")[1]
    reviewer_user.is_active = False
    reviewer_user.save(update_fields=["is_active"])
    assert client.get("/t/reviewers", headers=_bearer(secret)).status_code == 401


@with_probe_api
@pytest.mark.django_db
def test_it_records_last_use_at_most_once_a_minute(client, reviewer_user):
    key, secret = ApiKey.issue(user=reviewer_user, name="agent")
    assert key.last_used_at is None
    client.get("/t/reviewers", headers=_bearer(secret))
    key.refresh_from_db()
    assert timezone.now() - key.last_used_at < timedelta(seconds=5)

    recent = timezone.now() - timedelta(seconds=30)
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=recent)
    client.get("/t/reviewers", headers=_bearer(secret))
    key.refresh_from_db()
    assert key.last_used_at == recent

    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now() - timedelta(minutes=2))
    client.get("/t/reviewers", headers=_bearer(secret))
    key.refresh_from_db()
    assert timezone.now() - key.last_used_at < timedelta(seconds=5)


@with_probe_api
@pytest.mark.django_db
def test_it_serves_a_valid_key_while_its_address_is_hammered_with_bad_ones(client, reviewer_user, settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 3
    secret = ApiKey.issue(user=reviewer_user, name="agent")[1]
    answers = [client.get("/t/reviewers", headers=_bearer(f"mw_{n:05}-guess")).status_code for n in range(11)]
    assert answers == [401] * 3 + [429] * 8
    blocked = client.get("/t/reviewers", headers=_bearer("mw_other-guess"))
    assert blocked.status_code == 429 and "Too many failed attempts" in blocked.json()["detail"]
    for _ in range(3):  # between and after the bad ones, the valid key is served every time
        served = client.get("/t/reviewers", headers=_bearer(secret))
        assert served.status_code == 200 and served.json()["user"] == reviewer_user.username
        assert client.get("/t/reviewers", headers=_bearer("mw_guess999")).status_code == 429
    assert client.get("/t/reviewers", headers=_bearer("mw_guess999"), REMOTE_ADDR="10.0.0.9").status_code == 401


@with_probe_api
@pytest.mark.django_db
def test_it_counts_a_bad_keys_prefix_across_addresses_and_still_serves_the_valid_key(client, reviewer_user,
                                                                                      settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 3
    secret = ApiKey.issue(user=reviewer_user, name="agent")[1]
    forged = secret[: ApiKey.PREFIX_LENGTH] + "x" * 35  # the prefix is shown on the keys page
    answers = [client.get("/t/reviewers", headers=_bearer(forged), REMOTE_ADDR=f"10.0.0.{n}").status_code
               for n in range(1, 6)]
    assert answers == [401, 401, 401, 429, 429]
    assert AuthFailure.objects.filter(kind=AuthFailure.Kind.KEY_PREFIX, count=3).count() == 1
    assert client.get("/t/reviewers", headers=_bearer("mw_fresh-guess"), REMOTE_ADDR="10.0.0.1").status_code == 401
    assert client.get("/t/reviewers", headers=_bearer(secret), REMOTE_ADDR="10.0.0.2").status_code == 200


@with_probe_api
@pytest.mark.django_db
def test_it_tells_apart_agents_behind_a_trusted_proxy(client, reviewer_user, settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 2
    settings.MEMWEB_TRUSTED_PROXIES = (ip_network("127.0.0.0/8"),)
    for n in range(4):
        client.get("/t/reviewers", headers=_bearer(f"mw_{n}noisy"), HTTP_X_FORWARDED_FOR="198.51.100.7")
    noisy = client.get("/t/reviewers", headers=_bearer("mw_9noisy"), HTTP_X_FORWARDED_FOR="198.51.100.7")
    quiet = client.get("/t/reviewers", headers=_bearer("mw_9quiet"), HTTP_X_FORWARDED_FOR="198.51.100.8")
    assert (noisy.status_code, quiet.status_code) == (429, 401)
    settings.MEMWEB_TRUSTED_PROXIES = ()  # not believed: everyone behind the proxy is the proxy
    unproxied = client.get("/t/reviewers", headers=_bearer("mw_8quiet"), HTTP_X_FORWARDED_FOR="198.51.100.8")
    assert unproxied.status_code == 401
    for n in range(2):
        client.get("/t/reviewers", headers=_bearer(f"mw_{n}loud"), HTTP_X_FORWARDED_FOR="198.51.100.9")
    shared = client.get("/t/reviewers", headers=_bearer("mw_7quiet"), HTTP_X_FORWARDED_FOR="198.51.100.8")
    assert shared.status_code == 429


# --- session auth on the API ---
@with_probe_api
@pytest.mark.django_db
def test_it_requires_csrf_for_unsafe_session_requests(reviewer_user):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(reviewer_user)
    assert browser.get("/t/reviewers").status_code == 200
    refused = browser.post("/t/anyone")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    token = _get_new_csrf_string()
    browser.cookies["csrftoken"] = token
    assert browser.post("/t/anyone", headers={"X-CSRFToken": token}).status_code == 200


@with_probe_api
@pytest.mark.django_db
def test_it_needs_no_csrf_token_with_an_api_key(reviewer_user):
    agent = Client(enforce_csrf_checks=True)
    secret = ApiKey.issue(user=reviewer_user, name="agent")[1]
    assert agent.post("/t/anyone", headers=_bearer(secret)).json() == {"user": reviewer_user.get_username()}


@pytest.mark.django_db
def test_it_tells_an_agent_who_it_acts_as(client, reviewer_user):
    secret = ApiKey.issue(user=reviewer_user, name="agent")[1]
    response = client.get("/api/me", headers={"X-API-Key": secret})
    me = response.json()
    assert (me["username"], me["roles"], me["credential"], me["key_name"]) == (
        reviewer_user.get_username(), ["reviewer"], "api_key", "agent")


# --- signing in and out ---
def _sign_in(client, username, password, **extra):
    return client.post(reverse("login"), {"username": username, "password": password}, **extra)


@pytest.mark.django_db
def test_it_shows_a_labelled_sign_in_form(client):
    page = client.get(reverse("login")).content.decode()
    assert '<label for="id_username">Username</label>' in page
    assert '<label for="id_password">Password</label>' in page


@pytest.mark.django_db
def test_it_signs_in_and_out(client, reviewer_user):
    wrong = _sign_in(client, reviewer_user.username, "wrong")
    assert wrong.status_code == 200 and "Please enter a correct username and password" in wrong.content.decode()
    response = _sign_in(client, reviewer_user.username, PASSWORD)
    assert response.status_code == 302 and response["Location"] == reverse("home")
    assert client.get(reverse("home")).status_code == 200
    assert client.get(reverse("logout")).status_code == 405
    assert client.post(reverse("logout"))["Location"] == reverse("login")
    assert client.get(reverse("home")).status_code == 302


@pytest.mark.django_db
def test_it_follows_next_after_sign_in(client, reviewer_user):
    response = client.post(
        reverse("login"), {"username": reviewer_user.username, "password": PASSWORD, "next": "/health/"}
    )
    assert response["Location"] == "/health/"


@pytest.mark.django_db
def test_it_blocks_sign_in_after_repeated_failures(client, reviewer_user, settings):
    """From that address; the account's own limit is test_it_limits_guesses_at_one_account_from_many_addresses."""
    settings.MEMWEB_AUTH_MAX_FAILURES = 3
    for _ in range(3):
        _sign_in(client, reviewer_user.username, "wrong")
    blocked = _sign_in(client, reviewer_user.username, PASSWORD)
    assert blocked.status_code == 429 and "Too many failed sign-in attempts" in blocked.content.decode()
    assert client.get(reverse("home")).status_code == 302
    assert _sign_in(Client(), "someone-else", "wrong", REMOTE_ADDR="10.0.0.7").status_code == 200


@pytest.mark.django_db
def test_it_forgets_an_accounts_failures_when_its_owner_signs_in(reviewer_user, settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 3
    for address in ("10.1.0.1", "10.1.0.2"):
        _sign_in(Client(), reviewer_user.username, "wrong", REMOTE_ADDR=address)
    assert _sign_in(Client(), reviewer_user.username, PASSWORD, REMOTE_ADDR="10.1.0.9").status_code == 302
    for address in ("10.2.0.1", "10.2.0.2"):
        _sign_in(Client(), reviewer_user.username, "wrong", REMOTE_ADDR=address)
    assert _sign_in(Client(), reviewer_user.username, PASSWORD, REMOTE_ADDR="10.2.0.9").status_code == 302


@pytest.mark.django_db
def test_it_keeps_an_addresss_failures_when_someone_signs_in_from_it(annotator_user, settings):
    """Signing in to one's own account between guesses at others' buys no more guesses."""
    settings.MEMWEB_AUTH_MAX_FAILURES = 3
    for victim in ("ann", "bob"):
        assert _sign_in(Client(), victim, "wrong").status_code == 200
        assert _sign_in(Client(), annotator_user.username, PASSWORD).status_code == 302
    assert _sign_in(Client(), "cy", "wrong").status_code == 200
    assert _sign_in(Client(), "dan", "wrong").status_code == 429


@pytest.mark.django_db
def test_it_limits_guesses_at_one_account_from_many_addresses(reviewer_user, operator_user, settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 3
    for address in ("10.3.0.1", "10.3.0.2", "10.3.0.3"):
        assert _sign_in(Client(), reviewer_user.username, "wrong", REMOTE_ADDR=address).status_code == 200
    blocked = _sign_in(Client(), reviewer_user.username.upper(), PASSWORD, REMOTE_ADDR="10.3.0.9")
    assert blocked.status_code == 429 and 0 < int(blocked["Retry-After"]) <= 300
    assert _sign_in(Client(), reviewer_user.username, PASSWORD, REMOTE_ADDR="10.3.0.9").status_code == 429
    assert _sign_in(Client(), operator_user.username, PASSWORD, REMOTE_ADDR="10.3.0.9").status_code == 302


@pytest.mark.django_db
def test_it_honours_a_failure_window_longer_than_five_minutes(reviewer_user, settings, monkeypatch):
    # The server's cache, not the tests' in-memory one: its incr() once cut every window to 300 s.
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "memweb_cache"}}
    call_command("createcachetable", verbosity=0)
    settings.MEMWEB_AUTH_MAX_FAILURES, settings.MEMWEB_AUTH_FAILURE_WINDOW_SECONDS = 3, 3600
    for _ in range(3):
        _sign_in(Client(), "nobody", "wrong")
    real_now, later = timezone.now, {"by": timedelta(minutes=10)}
    for module, name in ((timezone, "now"), (db_cache, "tz_now")):  # memweb's clock and the cache's
        monkeypatch.setattr(module, name, lambda: real_now() + later["by"])
    blocked = _sign_in(Client(), reviewer_user.username, PASSWORD)
    assert blocked.status_code == 429 and 2900 < int(blocked["Retry-After"]) <= 3000
    later["by"] = timedelta(minutes=61)
    assert _sign_in(Client(), reviewer_user.username, PASSWORD).status_code == 302
    assert auth_failures_prune() == 1  # the lapsed counter of the account "nobody"
    assert list(AuthFailure.objects.values_list("kind", "count")) == [("address", 0)]


@pytest.mark.django_db(transaction=True)
def test_it_checks_no_more_parallel_guesses_than_the_limit(reviewer_user, settings):
    """Real concurrent requests, each with its own database connection, released together."""
    settings.MEMWEB_AUTH_MAX_FAILURES = 5
    attempts = 30
    start = threading.Barrier(attempts)

    def guess(number: int) -> int:
        try:
            start.wait(timeout=120)
            return _sign_in(Client(), reviewer_user.username, f"wrong-{number}").status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(attempts) as pool:
        answers = Counter(pool.map(guess, range(attempts)))
    assert answers == {200: 5, 429: 25}
    assert AuthFailure.objects.filter(count=5).count() == 2  # the address's counter and the account's


@pytest.mark.django_db
def test_it_counts_the_forwarded_client_only_behind_a_trusted_proxy(reviewer_user, settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 2
    settings.MEMWEB_TRUSTED_PROXIES = (ip_network("127.0.0.0/8"), ip_network("10.8.0.0/16"))
    for spoofed in ("1.1.1.1", "2.2.2.2"):  # what the client wrote, then what each proxy appended
        _sign_in(Client(), "nobody", "wrong", HTTP_X_FORWARDED_FOR=f"{spoofed}, 198.51.100.7, 10.8.0.5")
    refused = _sign_in(Client(), reviewer_user.username, PASSWORD, HTTP_X_FORWARDED_FOR="9.9.9.9, 198.51.100.7")
    assert refused.status_code == 429
    assert _sign_in(Client(), reviewer_user.username, PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.8").status_code == 302
    settings.MEMWEB_TRUSTED_PROXIES = ()
    for forwarded in ("198.51.100.20", "198.51.100.21"):
        _sign_in(Client(), "nobody-else", "wrong", REMOTE_ADDR="203.0.113.5", HTTP_X_FORWARDED_FOR=forwarded)
    refused = _sign_in(Client(), reviewer_user.username, PASSWORD, REMOTE_ADDR="203.0.113.5",
                       HTTP_X_FORWARDED_FOR="198.51.100.22")
    assert refused.status_code == 429


def test_it_names_a_bad_trusted_proxy(monkeypatch):
    monkeypatch.setenv("MEMWEB_TRUSTED_PROXIES", "10.0.0.0/8, ::1, 172.16.0.0/12")
    assert [str(network) for network in env_networks("MEMWEB_TRUSTED_PROXIES")] == ["10.0.0.0/8", "::1/128", "172.16.0.0/12"]
    monkeypatch.setenv("MEMWEB_TRUSTED_PROXIES", "10.0.0.0/8, proxy.internal")
    with pytest.raises(ImproperlyConfigured, match="MEMWEB_TRUSTED_PROXIES entry 'proxy.internal' is not an IP"):
        env_networks("MEMWEB_TRUSTED_PROXIES")


@pytest.mark.django_db
def test_it_limits_guesses_at_the_admin_sign_in(client, django_user_model, settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 3
    django_user_model.objects.create_superuser("root", password=PASSWORD)
    for _ in range(3):
        assert client.post("/admin/login/", {"username": "root", "password": "wrong"}).status_code == 200
    blocked = client.post("/admin/login/", {"username": "root", "password": PASSWORD})
    assert blocked.status_code == 429 and int(blocked["Retry-After"]) > 0
    assert "Too many failed sign-in attempts" in blocked.content.decode()
    assert client.get("/admin/").status_code == 302
    assert _sign_in(client, "root", PASSWORD).status_code == 429  # one limit for both sign-in forms


# --- the API keys page ---
@pytest.mark.django_db
def test_it_shows_a_new_key_once(client, operator_user):
    client.force_login(operator_user)
    created = client.post(reverse("api_key_create"), {"name": "shop agent", "scopes": ["memory:read", "runs:read"]})
    secret = created.context["new_secret"]
    assert secret in created.content.decode() and "no-store" in created["Cache-Control"]
    key = ApiKey.objects.get(user=operator_user)
    assert key.name == "shop agent" and key.key_hash == ApiKey.hash_secret(secret)
    assert key.scopes == ["memory:read", "runs:read"] and key.workspace.slug == "default"
    listing = client.get(reverse("api_keys")).content.decode()
    assert secret not in listing and f"{key.prefix}…" in listing and "never" in listing


@pytest.mark.django_db
def test_it_names_the_field_of_a_bad_key_request(client, operator_user):
    client.force_login(operator_user)
    response = client.post(reverse("api_key_create"), {"name": ""})
    assert response.status_code == 400 and "This field is required." in response.content.decode()
    assert "Choose at least one scope." in response.content.decode()
    assert not ApiKey.objects.exists()


@pytest.mark.django_db
def test_it_revokes_only_the_owners_keys(client, operator_user, user_for_role):
    key, secret = ApiKey.issue(user=operator_user, name="nightly-bot")
    other = user_for_role(Role.OPERATOR)
    client.force_login(other)
    assert client.post(reverse("api_key_revoke", args=[key.pk])).status_code == 404
    assert "nightly-bot" not in client.get(reverse("api_keys")).content.decode()
    client.force_login(operator_user)
    assert client.post(reverse("api_key_revoke", args=[key.pk]))["Location"] == reverse("api_keys")
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert client.get("/api/me", headers=_bearer(secret)).status_code == 401


@pytest.mark.django_db
def test_it_lets_admins_see_and_revoke_every_key(client, operator_user, role_admin_user):
    key = ApiKey.issue(user=operator_user, name="agent")[0]
    client.force_login(role_admin_user)
    assert operator_user.username in client.get(reverse("api_keys")).content.decode()
    client.post(reverse("api_key_revoke", args=[key.pk]))
    key.refresh_from_db()
    assert not key.is_active


# --- management commands ---
@pytest.mark.django_db
def test_it_creates_a_user_with_roles(client):
    out = io.StringIO()
    call_command("create_user", "rita", roles=["reviewer", "annotator"], password="a-long-enough-pass", stdout=out)
    user = get_user_model().objects.get(username="rita")
    assert user_roles(user) == {"reviewer", "annotator"} and not user.is_staff
    assert "rita" in out.getvalue() and "a-long-enough-pass" not in out.getvalue()
    assert _sign_in(client, "rita", "a-long-enough-pass").status_code == 302


@pytest.mark.django_db
def test_it_generates_and_prints_a_password_once(client, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO())  # not a terminal: nobody to prompt
    out = io.StringIO()
    call_command("create_user", "ada", roles=["admin"], stdout=out)
    password = out.getvalue().split("password: ")[1].split()[0]
    user = get_user_model().objects.get(username="ada")
    assert user_roles(user) == {"admin"} and not user.is_staff and not user.is_superuser
    assert _sign_in(client, "ada", password).status_code == 302


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"roles": ["boss"]}, "unknown role 'boss'; use one of: operator, reviewer, annotator, admin"),
        ({"roles": ["reviewer"], "password": "123"}, "password rejected: This password is too short"),
    ],
)
def test_it_explains_what_is_wrong_with_a_create_user_request(options, message):
    with pytest.raises(CommandError, match=message):
        call_command("create_user", "bob", generate_password="password" not in options, **options)
    assert not get_user_model().objects.filter(username="bob").exists()


@pytest.mark.django_db
def test_it_refuses_to_create_an_existing_user(reviewer_user):
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_user", reviewer_user.username, roles=["reviewer"], generate_password=True)


@pytest.mark.django_db
def test_it_issues_a_key_from_the_shell(client, operator_user):
    out = io.StringIO()
    call_command("create_api_key", operator_user.username, name="cron", stdout=out)
    secret = out.getvalue().split("key: ")[1].split()[0]
    assert client.get("/api/me", headers=_bearer(secret)).json()["username"] == operator_user.username
    with pytest.raises(CommandError, match="no active user 'ghost'"):
        call_command("create_api_key", "ghost", name="cron")


# --- admin site ---
@pytest.mark.django_db
def test_it_shows_infrastructure_records_in_the_admin_without_secrets(client, operator_user, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password=PASSWORD))
    key = ApiKey.issue(user=operator_user, name="agent")[0]
    for model in ("llmcall", "apikey", "workerheartbeat", "taskprobe"):
        assert client.get(f"/admin/memweb/{model}/").status_code == 200, model
    change_page = client.get(f"/admin/memweb/apikey/{key.pk}/change/").content.decode()
    assert key.prefix in change_page and key.key_hash not in change_page
    assert client.get("/admin/memweb/apikey/add/").status_code == 403
