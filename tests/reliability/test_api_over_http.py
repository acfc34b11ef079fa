"""schemathesis as an integrator runs it: the schema fetched over HTTP with an API key (no browser
login), and generated requests sent over HTTP to a running server. The agent-facing memory API
(every /api/orbs/ route) is driven this way; test_api_properties.py drives every route in-process
with more examples and objects behind every path parameter.
"""
import requests
import schemathesis
from hypothesis import given, settings

from memweb.models import ApiKey
from tests.orbs.conftest import bank, make_orb  # noqa: F401  (fixtures)
from tests.reliability.test_api_properties import GENERATION, problem_with

AGENT_API = "^/api/orbs/"
OVER_HTTP = settings(GENERATION, max_examples=8)  # each example is a real HTTP round trip


def test_an_api_key_fetches_the_schema_and_no_credentials_are_sent_to_log_in(live_server, role_admin_user):
    _, secret = ApiKey.issue(user=role_admin_user, name="codegen")
    url = f"{live_server.url}/api/openapi.json"
    with_key = requests.get(url, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    without = requests.get(url, allow_redirects=False, timeout=30)
    assert (with_key.status_code, with_key.json()["openapi"][:2]) == (200, "3.")
    assert (without.status_code, without.headers["Content-Type"], "Location" in without.headers) == (
        401, "application/json", False)


def test_generated_requests_over_http_get_no_server_error_and_say_what_is_wrong(live_server, role_admin_user,
                                                                             make_orb):
    _, secret = ApiKey.issue(user=role_admin_user, name="schemathesis")
    headers = {"Authorization": f"Bearer {secret}"}
    orb = make_orb("Where is my parcel?", approve=False)
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/openapi.json", headers=headers)
    operations = [result.ok() for result in schema.include(path_regex=AGENT_API).get_all_operations()]
    assert len(operations) >= 20, [operation.label for operation in operations]
    existing = {"slug": orb.bank.slug, "orb_id": orb.pk}
    for operation in operations:
        _drive(operation, base_url=live_server.url, headers=headers, existing=existing)


def _drive(operation, *, base_url: str, headers: dict, existing: dict) -> None:
    @given(case=operation.as_strategy())
    @OVER_HTTP
    def send(case):
        # Half the cases name the bank and Orb that exist, so bodies reach the services, not just the 404.
        if case.path_parameters and len(repr(case.body)) % 2:  # deterministic, unlike hash()
            case.path_parameters = {name: existing.get(name, value) for name, value in case.path_parameters.items()}
        response = case.call(base_url=base_url, headers=headers)
        problem = problem_with(response, case)
        assert problem is None, f"{operation.label}: {problem}\n{case.as_curl_command(headers=headers)}"

    send()
