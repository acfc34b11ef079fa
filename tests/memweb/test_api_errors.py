"""What an agent's HTTP client meets outside the routes themselves: the schema answers an API key,
unknown paths and wrong methods answer JSON, and a blocked address is told when to retry."""
import io
import json

import pytest
from django.conf import settings
from django.shortcuts import resolve_url

from memweb.auth import BAD_KEY, NO_CREDENTIALS
from memweb.models import ApiKey
from orbs.services import bank_get_or_create, bank_policy_update
from tests.orbs.conftest import bank, make_orb, trajectory  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


def _bearer(secret: str) -> dict:
    return {"Authorization": f"Bearer {secret}"}


def test_the_schema_answers_any_valid_key_whatever_its_roles(client, user_for_role):
    secret = ApiKey.issue(user=user_for_role(None), name="codegen")[1]
    for headers in (_bearer(secret), {"X-API-Key": secret}):
        response = client.get("/api/openapi.json", headers=headers)
        assert response.status_code == 200 and "/api/orbs/banks/{slug}/retrieve" in response.json()["paths"]
    docs = client.get("/api/docs", headers=_bearer(secret))  # the docs page too, no sign-in on the way
    assert docs.status_code == 200 and "openapi.json" in docs.content.decode()


def test_the_schema_refuses_no_key_or_a_bad_one_in_json_and_only_the_docs_page_sends_a_browser_to_sign_in(client):
    refused = client.get("/api/openapi.json", headers=_bearer("mw_not-a-key"))
    assert refused.status_code == 401 and refused.json() == {"detail": BAD_KEY}
    anonymous = client.get("/api/openapi.json")
    assert anonymous.status_code == 401 and anonymous["Content-Type"] == "application/json"
    assert anonymous.json() == {"detail": NO_CREDENTIALS} and anonymous["WWW-Authenticate"] == "Bearer"
    assert client.get("/api/docs", headers=_bearer("mw_not-a-key")).status_code == 401
    page = client.get("/api/docs")
    assert page.status_code == 302 and page["Location"].startswith(resolve_url(settings.LOGIN_URL))


def test_an_unknown_api_path_answers_json_404(client, operator_user):
    secret = ApiKey.issue(user=operator_user, name="agent")[1]
    for path in ("/api/no-such-route", "/api/orbs/no-such-route/"):
        response = client.get(path, headers=_bearer(secret))
        assert response.status_code == 404 and response["Content-Type"] == "application/json"
        assert path in response.json()["detail"]


def test_a_method_a_route_does_not_take_answers_json_405_with_allow(client, operator_user):
    secret = ApiKey.issue(user=operator_user, name="agent")[1]
    response = client.delete("/api/me", headers=_bearer(secret))
    assert response.status_code == 405 and response["Allow"] == "GET"
    assert response.json()["detail"] == "DELETE is not allowed on /api/me; allowed: GET"


def test_a_blocked_address_is_told_when_to_retry_and_its_valid_keys_still_served(client, operator_user, settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 2
    secret = ApiKey.issue(user=operator_user, name="agent")[1]
    for n in range(2):
        assert client.get("/api/me", headers=_bearer(f"mw_{n}-guess")).status_code == 401
    for path in ("/api/me", "/api/openapi.json"):
        blocked = client.get(path, headers=_bearer("mw_9-guess"))
        assert blocked.status_code == 429, path
        assert 1 <= int(blocked["Retry-After"]) <= settings.MEMWEB_AUTH_FAILURE_WINDOW_SECONDS
        assert client.get(path, headers=_bearer(secret)).status_code == 200, path


def _locations(response) -> set[tuple]:
    return {tuple(error["loc"]) for error in response.json()["detail"]}


@pytest.mark.parametrize(("body", "field"), [
    ({"query": "refund", "kk": 5}, ("body", "payload", "kk")),  # a misspelt field is not a silent default
    ({"query": "refund", "k": True}, ("body", "payload", "k")),  # true is not 1
    ({"query": "refund", "k": "5"}, ("body", "payload", "k")),
    ({"query": "refund", "approved_only": "yes"}, ("body", "payload", "approved_only")),
    ({"query": "refund", "min_score": "0.5"}, ("body", "payload", "min_score")),
])
def test_a_body_with_an_unknown_field_or_a_coerced_value_is_refused_naming_it(client, operator_user, body, field):
    bank = bank_get_or_create(name="strict")
    secret = ApiKey.issue(user=operator_user, name="agent")[1]
    response = client.post(f"/api/orbs/banks/{bank.slug}/retrieve", json.dumps(body), content_type="application/json",
                           headers=_bearer(secret))
    assert response.status_code == 422 and field in _locations(response), response.json()


def test_an_episode_whose_success_is_a_word_is_refused(client, operator_user):
    bank = bank_get_or_create(name="strict")
    secret = ApiKey.issue(user=operator_user, name="agent")[1]
    episode = {"trajectory": trajectory(success="yes")}
    response = client.post(f"/api/orbs/banks/{bank.slug}/episodes", json.dumps(episode),
                           content_type="application/json", headers=_bearer(secret))
    assert response.status_code == 422 and ("body", "payload", "trajectory", "success") in _locations(response)


def test_the_run_launch_configs_refuse_coerced_values(client, operator_user):
    secret = ApiKey.issue(user=operator_user, name="agent")[1]
    body = {"name": "strict", "agent": {"max_steps": "8"}}
    response = client.post("/api/evaluation/runs/", json.dumps(body), content_type="application/json",
                           headers=_bearer(secret))
    assert response.status_code == 422 and "max_steps" in json.dumps(response.json())


def test_a_queued_episode_answers_202_with_an_absolute_status_url_and_location(client, operator_user):
    bank = bank_get_or_create(name="strict")
    secret = ApiKey.issue(user=operator_user, name="agent")[1]
    response = client.post(f"/api/orbs/banks/{bank.slug}/episodes", json.dumps({"trajectory": trajectory()}),
                           content_type="application/json", headers=_bearer(secret))
    assert response.status_code == 202
    status_url = response.json()["status_url"]
    assert status_url.startswith("http://testserver/api/orbs/episodes/") and response["Location"] == status_url
    assert client.get(status_url, headers=_bearer(secret)).status_code == 200


def test_listing_orbs_of_an_unknown_bank_is_a_404(client, operator_user):
    secret = ApiKey.issue(user=operator_user, name="agent")[1]
    response = client.get("/api/orbs/orbs", {"bank": "no-such-bank"}, headers=_bearer(secret))
    assert response.status_code == 404 and "no-such-bank" in response.json()["detail"]


def test_a_retrieval_without_approved_only_follows_the_bank(client, operator_user, make_orb):
    pending = make_orb("my parcel never arrived", approve=False)
    bank = pending.bank
    secret = ApiKey.issue(user=operator_user, name="agent")[1]

    def served(**body) -> list[int]:
        response = client.post(f"/api/orbs/banks/{bank.slug}/retrieve", json.dumps({"query": "parcel", **body}),
                               content_type="application/json", headers=_bearer(secret))
        return [hit["orb"]["id"] for hit in response.json()["hits"]]

    bank_policy_update(bank=bank, approved_only=False)
    assert served() == [pending.pk]  # the bank serves pending Orbs, and the request did not say otherwise
    assert served(approved_only=True) == []
    bank_policy_update(bank=bank, approved_only=True)
    assert served(approved_only=False) == []  # a bank that serves approved Orbs only does so whatever is asked


def test_the_schema_declares_the_errors_every_operation_can_give(client, operator_user):
    secret = ApiKey.issue(user=operator_user, name="codegen")[1]
    schema = client.get("/api/openapi.json", headers=_bearer(secret)).json()
    retrieve = schema["paths"]["/api/orbs/banks/{slug}/retrieve"]["post"]["responses"]
    assert {"400", "401", "403", "404", "413", "422", "429"} <= set(retrieve)
    assert "KB" in retrieve["413"]["description"]
    validation = schema["components"]["schemas"]["ValidationErrors"]["properties"]["detail"]
    assert validation["type"] == "array"  # a 422 is a list of refused fields
    assert retrieve["422"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ValidationErrors"}
    import_422 = schema["paths"]["/api/orbs/banks/import"]["post"]["responses"]["422"]["content"]["application/json"]
    declared, report = import_422["schema"]["allOf"]  # every 422 is the list; an import's adds its report
    assert declared == {"$ref": "#/components/schemas/ValidationErrors"} and "problems" in report["properties"]
    assert set(schema["paths"]["/api/health"]["get"]["responses"]) == {"200", "503"}  # public, no body, no id


def test_a_refused_body_matches_the_declared_422_shape(client, operator_user):
    bank = bank_get_or_create(name="strict")
    secret = ApiKey.issue(user=operator_user, name="agent")[1]
    response = client.post(f"/api/orbs/banks/{bank.slug}/retrieve", json.dumps({"query": ""}),
                           content_type="application/json", headers=_bearer(secret))
    assert response.status_code == 422
    entries = response.json()["detail"]
    assert isinstance(entries, list) and all({"loc", "msg"} <= set(entry) for entry in entries)


def test_every_422_has_one_shape_whichever_route_refuses(client, operator_user):
    headers = _bearer(ApiKey.issue(user=operator_user, name="agent")[1])

    def sent(path: str, body: dict):
        return client.post(path, json.dumps(body), content_type="application/json", headers=headers)

    assert sent("/api/orbs/banks", {"name": "strict"}).status_code == 201
    sentence = sent("/api/orbs/banks", {"name": "strict"})  # a route's own refusal, once a bare sentence
    assert sentence.status_code == 422
    assert sentence.json() == {"detail": [{"loc": ["body", "payload", "name"],
                                           "msg": "name: a bank called 'strict' already exists"}]}
    by_line = sent("/api/evaluation/tasks/import", {"task_set": "broken", "jsonl": "not json\n"})  # once {line, reason}
    assert by_line.status_code == 422
    [entry] = by_line.json()["detail"]
    assert entry["loc"] == ["body", "line", 1] and entry["line"] == 1 and entry["msg"]
    report = client.post("/api/orbs/banks/import", {"file": io.BytesIO(b"not a bank\n")}, headers=headers)
    assert report.status_code == 422  # the import's report stays beside the one shape
    assert all({"loc", "msg"} <= set(entry) for entry in report.json()["detail"]) and report.json()["ok"] is False
    for answer in (sentence, by_line, report, sent("/api/orbs/banks", {"name": ""})):
        assert all(isinstance(entry["loc"], list) and isinstance(entry["msg"], str)
                   for entry in answer.json()["detail"])
