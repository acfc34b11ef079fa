"""The authorisation matrix, generated from the URL configuration.

Every page (a view decorated with role_required, which records `required_roles`)
and every django-ninja operation (whose auth callbacks carry `.roles`) is called
as anonymous, as a signed-in user without a role, as each role and as an admin.
Routes that apps add later are covered without touching this file. Path
arguments get placeholder values: role checks run before the view looks an
object up, so a refused caller gets 403 whatever the id, and an admitted one
may get 404 (which is "admitted").
"""
import io
import re
import uuid
from dataclasses import dataclass
from importlib import import_module

import pytest
from django.apps import apps as django_apps
from django.conf import settings
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.shortcuts import resolve_url
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.urls.converters import IntConverter, UUIDConverter

from memweb.api import api
from memweb.management.commands.serve import Command as Serve
from memweb.models import ApiKey
from memweb.navigation import nav_items_declared
from memweb.roles import Role
from tests.fixtures.users import PASSWORD

IDENTITIES = ("anonymous", "norole", *Role.values)

# Views reachable without signing in, with the reason. Keep this list short:
# test_it_keeps_the_public_lists_short fails when it grows.
PUBLIC_PAGES = {
    "login": "the sign-in page itself",
    "logout": "POST-only; signing out needs no role",
    "api:api-root": "django-ninja's root only answers 404 naming the docs URL (which need login)",
    "password_set": "a new user's one-time set-password link: they cannot sign in before using it; its token is the check",
    "password_reset": "forgot-password form: for people who cannot sign in; answers the same for every address",
    "password_reset_done": "the forgot-password form's neutral 'check your e-mail' page",
    "password_reset_confirm": "the e-mailed reset link: its token is the check",
}
PUBLIC_API = {
    ("GET", "/api/health"): "liveness for load balancers: status only, no details",
}
# Namespaces with their own access control, checked by a dedicated test below.
OWN_ACCESS_CONTROL = {"admin": "Django admin is for superusers only; see test_it_keeps_the_admin_site_to_superusers"}


@dataclass(frozen=True)
class PageRoute:
    name: str
    url: str
    roles: tuple[str, ...]


@dataclass(frozen=True)
class ApiRoute:
    method: str
    url: str
    roles: tuple[str, ...] | None  # None: public
    scope: str | None = None  # the API key scope it needs; None: any key
    review: bool = False  # reviews memories: sessions only, never a key


def _placeholder(converter) -> object:
    if isinstance(converter, IntConverter):
        return 999999
    if isinstance(converter, UUIDConverter):
        return uuid.UUID(int=0)
    return "placeholder"


def _is_ninja_operation(callback) -> bool:
    return callback.__module__.startswith("ninja.") and "PathView" in callback.__qualname__


def _walk(patterns, namespace: str = "", converters: dict | None = None):
    for pattern in patterns:
        found = {**(converters or {}), **getattr(pattern.pattern, "converters", {})}
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}:{pattern.namespace}".strip(":") if pattern.namespace else namespace
            if inner not in OWN_ACCESS_CONTROL:
                yield from _walk(pattern.url_patterns, inner, found)
        elif isinstance(pattern, URLPattern) and not _is_ninja_operation(pattern.callback):
            yield pattern, namespace, found


def page_routes() -> list[PageRoute]:
    routes = []
    for pattern, namespace, converters in _walk(get_resolver().url_patterns):
        assert pattern.name, f"{pattern.pattern} needs a name= so pages can link to it"
        name = f"{namespace}:{pattern.name}".strip(":")
        if name in PUBLIC_PAGES:
            continue
        roles = getattr(pattern.callback, "required_roles", None)
        assert roles is not None, f"view {name} is neither @role_required nor listed in PUBLIC_PAGES"
        kwargs = {key: _placeholder(conv) for key, conv in converters.items()}
        routes.append(PageRoute(name, reverse(name, kwargs=kwargs), tuple(roles)))
    return routes


def _operation_access(operation):
    """The operation's memweb.auth.RouteAccess; None for a public one."""
    if not operation.auth_callbacks:
        return None
    declared = {getattr(callback, "access", None) for callback in operation.auth_callbacks}
    assert None not in declared and len(declared) == 1, (
        f"{operation.view_func.__name__}: use auth=api_auth(...) (memweb.auth), not {operation.auth_callbacks!r}"
    )
    return declared.pop()


def _api_route(method: str, url: str, access) -> ApiRoute:
    if access is None:
        return ApiRoute(method, url, None)
    return ApiRoute(method, url, access.roles, access.scope, access.review)


def api_routes() -> list[ApiRoute]:
    root = reverse("api:api-root")
    routes = []
    for bound in api._get_bound_routers():
        for path, path_view in bound.path_operations.items():
            template = re.sub(r"/+", "/", f"{root}{bound.prefix}/{path}")
            url = re.sub(r"\{(?:(\w+):)?\w+\}", lambda m: str(uuid.UUID(int=0)) if m.group(1) == "uuid" else "999999", template)
            for operation in path_view.operations:
                access = _operation_access(operation)
                routes.extend(_api_route(method, url, access) for method in operation.methods)
    return routes


PAGES = page_routes()
APIS = api_routes()


def _allowed(identity: str, roles: tuple[str, ...]) -> bool:
    if identity == "anonymous":
        return False
    return identity == Role.ADMIN or not roles or identity in roles


@pytest.fixture
def identities(user_for_role):
    """identity -> (user, API key secret); anonymous has neither."""
    made = {"anonymous": (None, "")}
    for identity in IDENTITIES[1:]:
        user = user_for_role(None if identity == "norole" else identity)
        made[identity] = (user, ApiKey.issue(user=user, name="matrix")[1])
    return made


def _sign_in_as(client, user) -> None:
    # One test client for every identity: each new client costs a WhiteNoise file scan.
    client.logout()
    if user is not None:
        client.force_login(user)


def _call_page(client, url):
    response = client.get(url)
    return client.post(url) if response.status_code == 405 else response


@pytest.mark.django_db
@pytest.mark.parametrize("route", PAGES, ids=[route.name for route in PAGES])
def test_it_enforces_roles_on_every_page(route, identities, client):
    login_url = resolve_url(settings.LOGIN_URL)
    for identity, (user, _secret) in identities.items():
        _sign_in_as(client, user)
        response = _call_page(client, route.url)
        if identity == "anonymous" and route.url == "/api/openapi.json":  # a machine asks for it: JSON, no sign-in page
            assert response.status_code == 401 and response["Content-Type"] == "application/json", (identity, route)
        elif identity == "anonymous":
            assert response.status_code == 302 and response["Location"].startswith(login_url), (identity, route)
        elif _allowed(identity, route.roles):
            assert response.status_code not in (401, 403), (identity, route, response.status_code)
        else:
            assert response.status_code == 403, (identity, route, response.status_code)


def _call_api(client, route, user, secret: str):
    """By key, as agents call; a route that reviews memories takes no key, so by the user's session."""
    client.logout()
    if route.review and user is not None:
        client.force_login(user)
        return client.generic(route.method, route.url, "{}", "application/json")
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    return client.generic(route.method, route.url, "{}", "application/json", headers=headers)


@pytest.mark.django_db
@pytest.mark.parametrize("route", APIS, ids=[f"{route.method} {route.url}" for route in APIS])
def test_it_enforces_roles_on_every_api_operation(route, identities, client):
    for identity, (user, secret) in identities.items():
        response = _call_api(client, route, user, secret)
        if route.roles is None:
            assert (route.method, route.url) in PUBLIC_API, f"{route.method} {route.url} has auth=None but is not in PUBLIC_API"
            assert response.status_code not in (401, 403), (identity, route)
        elif identity == "anonymous":
            assert response.status_code == 401 and "detail" in response.json(), (identity, route)
        elif _allowed(identity, route.roles):
            assert response.status_code not in (401, 403), (identity, route, response.status_code)
        else:
            assert response.status_code == 403, (identity, route, response.status_code)
            assert response.json()["detail"] == f"needs one of the roles: {', '.join(route.roles)}"


def test_it_finds_the_routes_it_must_check():
    names = {route.name for route in PAGES}
    assert {"home", "health", "api_keys", "api_key_revoke", "probe_status", "api:openapi-view"} <= names
    assert ("GET", "/api/health/details") in {(route.method, route.url) for route in APIS}
    roles_of = {route.name: route.roles for route in PAGES}
    assert roles_of["api_keys"] == (Role.OPERATOR,) and roles_of["home"] == ()


def test_it_keeps_the_public_lists_short():
    assert len(PUBLIC_PAGES) <= 7 and len(PUBLIC_API) <= 1 and len(OWN_ACCESS_CONTROL) <= 1


@pytest.mark.django_db
def test_it_keeps_the_admin_site_to_superusers(client, user_for_role, django_user_model):
    assert client.get("/admin/").status_code == 302
    call_command("create_user", "wsadmin", roles=[Role.ADMIN], password=PASSWORD, stdout=io.StringIO())
    client.force_login(django_user_model.objects.get(username="wsadmin"))
    assert client.get("/admin/").status_code == 302  # sent to the admin's sign-in: a workspace admin only
    staff = user_for_role(Role.ADMIN)
    staff.is_staff = True
    staff.save(update_fields=["is_staff"])
    client.force_login(staff)
    assert client.get("/admin/").status_code == 302
    assert client.post("/admin/auth/user/add/", {"username": "mole", "password1": PASSWORD,
                                                   "password2": PASSWORD}).status_code == 302
    assert not django_user_model.objects.filter(username="mole").exists()
    root = django_user_model.objects.create_superuser("root", password=PASSWORD)
    client.force_login(root)
    assert client.get("/admin/").status_code == 200
    root.is_active = False
    root.save(update_fields=["is_active"])
    assert client.get("/admin/").status_code == 302


@pytest.mark.django_db
def test_it_lets_the_admin_account_of_make_run_into_the_admin_site(client, django_user_model):
    Serve(stdout=io.StringIO())._create_admin_once()
    admin = django_user_model.objects.get(username="admin")
    client.force_login(admin)
    assert admin.is_superuser and client.get("/admin/").status_code == 200
    assert 'href="/admin/"' in client.get(reverse("home")).content.decode()


@pytest.mark.django_db
def test_it_clears_the_staff_flag_of_everyone_but_superusers(user_for_role, django_user_model):
    staff = user_for_role(Role.ADMIN)
    django_user_model.objects.filter(pk=staff.pk).update(is_staff=True)
    root = django_user_model.objects.create_superuser("root", password=PASSWORD)
    import_module("memweb.migrations.0011_staff_only_superusers").clear_staff_of_non_superusers(django_apps, None)
    staff.refresh_from_db(), root.refresh_from_db()
    assert not staff.is_staff and root.is_staff


@pytest.mark.django_db
def test_it_gives_no_group_every_permission():
    everything = Permission.objects.count()
    for group in Group.objects.filter(name__in=Role.values):
        held = set(group.permissions.values_list("content_type__app_label", flat=True))
        assert group.permissions.count() < everything and "auth" not in held, group.name
    admin_group = Group.objects.get(name=Role.ADMIN)
    others = Permission.objects.filter(group__name__in=[role for role in Role.values if role != Role.ADMIN])
    assert set(admin_group.permissions.all()) == set(others)


@pytest.mark.django_db
@pytest.mark.parametrize("identity", IDENTITIES[1:])
def test_it_only_links_pages_the_user_may_open(identity, user_for_role, client):
    """Navigation and permissions agree: every link shown opens (admin site aside)."""
    user = user_for_role(None if identity == "norole" else identity)
    client.force_login(user)
    page = client.get(reverse("home")).content.decode()
    for item in nav_items_declared():
        url = reverse(item.url_name)
        shown = f'href="{url}"' in page
        assert shown == (_allowed(identity, item.roles) and not item.superusers_only), (identity, item)
        if shown and not item.url_name.startswith("admin:"):
            assert client.get(url).status_code == 200, (identity, item)


@pytest.mark.django_db
def test_it_creates_one_group_per_role():
    assert set(Group.objects.filter(name__in=Role.values).values_list("name", flat=True)) == set(Role.values)


# --- what apps declare: navigation entries and home counts ---
def count_things(*, workspace) -> int:
    return 7


@pytest.fixture
def orbs_config(monkeypatch):
    from django.apps import apps

    config = apps.get_app_config("orbs")
    monkeypatch.setattr(config, "nav_items", (("Things", "health", (Role.REVIEWER,)),), raising=False)
    monkeypatch.setattr(
        config, "home_counts", (("Things to review", f"{__name__}.count_things", (Role.REVIEWER,), "health"),), raising=False
    )
    return config


@pytest.mark.django_db
def test_it_shows_a_welcome_when_no_app_declares_counts(client, annotator_user, monkeypatch):
    from django.apps import apps

    for config in apps.get_app_configs():
        monkeypatch.setattr(config, "home_counts", (), raising=False)
    client.force_login(annotator_user)
    page = client.get(reverse("home")).content.decode()
    assert "Nothing to count yet" in page and "hx-trigger" not in page


@pytest.mark.django_db
def test_it_shows_declared_counts_to_their_roles(client, orbs_config, reviewer_user, annotator_user):
    client.force_login(reviewer_user)
    page = client.get(reverse("home")).content.decode()
    assert "Things to review" in page and '<span class="stat-value">7</span>' in page
    assert 'hx-get="/"' in page and "every 15s" in page
    assert '<a href="/health/">Things</a>' in page
    client.force_login(annotator_user)
    page = client.get(reverse("home")).content.decode()
    assert "Things to review" not in page and ">Things</a>" not in page


@pytest.mark.django_db
def test_it_refreshes_counts_with_a_partial(client, orbs_config, reviewer_user):
    client.force_login(reviewer_user)
    partial = client.get(reverse("home"), headers={"HX-Request": "true"}).content.decode()
    assert "Things to review" in partial and "<html" not in partial


@pytest.mark.django_db
def test_it_marks_the_current_page_in_the_navigation(client, reviewer_user):
    client.force_login(reviewer_user)
    page = client.get(reverse("health")).content.decode()
    assert '<a href="/health/" class="active" aria-current="page">Health</a>' in page
    assert '<a href="/">Home</a>' in page


def test_it_names_the_app_of_a_malformed_declaration(orbs_config, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    monkeypatch.setattr(orbs_config, "nav_items", (("Things", "health"),))
    with pytest.raises(ImproperlyConfigured, match="orbs: each entry of nav_items"):
        nav_items_declared()
