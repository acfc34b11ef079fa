"""Injection probes over every sort, filter and search parameter, found rather than listed: each page
of the URL configuration that answers GET with HTML (real objects in its path) is asked with hostile
values in every parameter its own GET forms and links send (and `sort`, `page`, `q`); each API
GET operation of the served OpenAPI schema with hostile values in its query parameters. No answer
is a 5xx, none shows a password hash, key hash or webhook secret, and a sort by a column a list
does not offer is ignored: the rows keep their usual order."""
import re
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from memweb.models import ApiKey, Webhook
from tests.memweb.test_workspace_matrix import Route
from tests.reliability.hostile import World, page_routes, page_url

PAYLOADS = ["' OR 1=1--", "1;DROP TABLE auth_user", "\x00", "%00", "x" * 5000, "ü☃\u202e𝔘", "user__password", "-1",
            "99999999999999999999"]
# Sort keys no list offers: a model's secret column, a lookup across a relation, a raw expression.
BAD_SORTS = ["password", "-user__password", "key_hash", "1;DROP TABLE auth_user"]
ALWAYS_ASKED = {"sort", "page", "q"}


class _ParameterNames(HTMLParser):
    """The names a page's GET forms submit and the query keys its links carry."""

    def __init__(self):
        super().__init__()
        self.names, self._in_get_form = set(), False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "form":
            self._in_get_form = (attributes.get("method") or "get").lower() == "get"
        elif tag in ("input", "select", "textarea") and self._in_get_form and attributes.get("name"):
            self.names.add(attributes["name"])
        for link in (attributes.get("href"), attributes.get("hx-get")):
            if link and "?" in link:
                self.names |= {key for key, _ in parse_qsl(urlsplit(link).query, keep_blank_values=True)}

    def handle_endtag(self, tag):
        if tag == "form":
            self._in_get_form = False


def _parameter_names(html: str) -> set[str]:
    parser = _ParameterNames()
    parser.feed(html)
    return (parser.names | ALWAYS_ASKED) - {"csrfmiddlewaretoken"}


def _secrets() -> list[str]:
    """What no answer may show: every password hash, key hash and webhook secret."""
    return [value for value in [*User.objects.values_list("password", flat=True),
                                *ApiKey.objects.values_list("key_hash", flat=True),
                                *Webhook.objects.values_list("secret", flat=True)] if value]


def _object_links(html: str) -> list[str]:
    """The paths a page links in order (its rows), query-only links (sorting, paging) aside."""
    return re.findall(r'href="(/[^"?]*)', html)


@pytest.fixture
def probed(role_admin_user):
    """The probe world and a signed-in admin (every role check passes)."""
    world = World(role_admin_user)
    world.build()
    client = Client(raise_request_exception=False)  # a 500 is an answer to count, like any other
    client.force_login(role_admin_user)
    return world, client


def _list_pages(world: World, client: Client) -> dict[str, tuple[str, str]]:
    """url name -> (URL, HTML) of every page that answers GET with HTML."""
    pages = {}
    for route in page_routes():
        url = page_url(world, route)
        response = client.get(url)
        if response.status_code == 200 and response["Content-Type"].startswith("text/html"):
            pages[route.label] = (url, response.content.decode())
    return pages


@pytest.mark.django_db
def test_it_answers_hostile_parameters_on_every_page_without_an_error_or_a_leak(probed):
    world, client = probed
    secrets, failures, asked = _secrets(), {}, 0
    for name, (url, html) in _list_pages(world, client).items():
        names = _parameter_names(html)
        for payload in PAYLOADS:
            response = client.get(url, {key: payload for key in names})
            asked += 1
            body = response.content.decode(errors="replace")
            if response.status_code >= 500 or any(secret in body for secret in secrets):
                failures[f"{name} {sorted(names)} = {payload[:30]!r}"] = response.status_code
    assert not failures, failures
    assert asked >= 40 * len(PAYLOADS)


@pytest.mark.django_db
def test_it_ignores_a_sort_by_a_column_a_list_does_not_offer(probed):
    world, client = probed
    reordered, warned = {}, set()
    for name, (url, html) in _list_pages(world, client).items():
        usual = _object_links(html)
        for key in BAD_SORTS:
            response = client.get(url, {"sort": key})
            assert response.status_code < 500, (name, key)
            body = response.content.decode()
            if _object_links(body) != usual:
                reordered[f"{name} sort={key}"] = response.status_code
            if "cannot be sorted" in body:
                warned.add(name)
    assert not reordered, reordered
    assert {"orbs:queue", "evaluation:run_list", "annotation:campaign_detail", "job_list"} <= warned


def _string_typed(parameter: dict) -> bool:
    schema = parameter.get("schema", {})
    return "string" in {schema.get("type"), *(option.get("type") for option in schema.get("anyOf", []))}


def _api_list_operations(client: Client) -> list[tuple[Route, list[dict]]]:
    """(operation, its query parameters) of every GET of the served schema that takes any."""
    schema = client.get(reverse("api:openapi-json")).json()
    found = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            query = [parameter for parameter in operation.get("parameters", []) if parameter["in"] == "query"]
            if method == "get" and query:
                route = Route(f"GET {path}", "GET", path, tuple(re.findall(r"\{(\w+)\}", path)), ())
                found.append((route, query))
    return found


@pytest.mark.django_db
def test_it_answers_hostile_query_parameters_on_every_api_list_without_an_error_or_a_leak(probed):
    """Text parameters get each payload together (so none is refused for another's type); then
    every parameter gets it, which a typed one must refuse with a 422, not a 5xx."""
    world, client = probed
    secrets, failures, operations = _secrets(), {}, _api_list_operations(client)
    for route, query in operations:
        url = world.url(route)
        texts = [parameter["name"] for parameter in query if _string_typed(parameter)]
        for payload in PAYLOADS:
            for names in (texts, [parameter["name"] for parameter in query]):
                response = client.get(url, {name: payload for name in names})
                if response.status_code >= 500 or any(secret in response.content.decode() for secret in secrets):
                    failures[f"{route.label} {names} = {payload[:30]!r}"] = response.status_code
    assert not failures, failures
    assert {"GET /api/orbs/orbs", "GET /api/evaluation/runs/", "GET /api/evaluation/runs/compare"} <= {
        route.label for route, _ in operations}
