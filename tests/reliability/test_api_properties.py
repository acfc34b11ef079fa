"""Every JSON API route, driven by inputs generated from the project's own OpenAPI schema
(schemathesis): no generated request gets a 5xx, and every 4xx answer names the problem.

Requests go in-process through Django's WSGI handler with an admin's API key, so each route's
own code runs (not just the 401 of the auth layer). Each route is driven twice: with generated
path parameters (mostly unknown objects: the 404 must say what is missing) and pointed at objects
that exist, so bodies and queries reach the services.

Queued Celery work is sent when a transaction commits; these tests run inside one transaction
that is rolled back (pytest-django's `db`), so a generated run launch writes its rows but plays no
episode, whatever trials x tasks it asks for. Playing a launched run is bounded and tested in
test_it_plays_a_small_run_launched_through_the_api. Values the generator rarely or never sends
(NaN is not JSON; NUL, lone surrogates, integers past the columns' range) have their own cases.
"""
import json
import re
from collections import defaultdict

import pytest
import schemathesis
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, settings
from pydantic import BaseModel

from annotation import services as annotation
from annotation.models import Campaign
from evaluation.runs.models import FeedbackCurve
from evaluation.runs.services import run_drive, run_launch
from evaluation.scores.models import ScoreDefinition
from evaluation.services import episode_run
from memweb.api import api
from memweb.models import Job
from memweb.webhooks import webhook_create, webhook_test_send
from orbs.dmrm.services import experiences_append_batch
from orbs.dmrm.services.learning import Transition
from orbs.services import episode_submit, orbs_retrieve, trajectory_parse
from tests.annotation.conftest import item_fields
from tests.evaluation.runs.conftest import TASK_IDS
from tests.orbs.conftest import bank, make_orb, success_trajectory  # noqa: F401  (fixtures)

EXAMPLES_PER_ROUTE = 20
GENERATION = settings(
    max_examples=EXAMPLES_PER_ROUTE,
    deadline=None,
    derandomize=True,  # the same inputs on every run: a failure here is reproducible, never flaky
    database=None,  # no .hypothesis/ folder in the checkout
    suppress_health_check=list(HealthCheck),
)

RAW_SCHEMA = api.get_openapi_schema()
schema = schemathesis.openapi.from_dict(RAW_SCHEMA)


@pytest.fixture
def wsgi_app():
    """Django's WSGI handler, as the test client runs it: neither end of a request may close the
    test's connection (it holds the transaction every test runs in)."""
    for signal in (signals.request_started, signals.request_finished):
        signal.disconnect(close_old_connections)
    yield WSGIHandler()
    for signal in (signals.request_started, signals.request_finished):
        signal.connect(close_old_connections)


# --- what a good answer looks like ----------------------------------------------------------

def _names_in(node, seen: frozenset = frozenset()) -> set[str]:
    """Every property and parameter name a fragment of the schema mentions, through its $refs."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if ref and ref not in seen:
            return _names_in(RAW_SCHEMA["components"]["schemas"][ref.rsplit("/", 1)[-1]], seen | {ref})
        found = set(node.get("properties", {})) | ({node["name"]} if isinstance(node.get("name"), str) else set())
        return found.union(*(_names_in(value, seen) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_names_in(value, seen) for value in node))
    return set()


def request_names(operation) -> set[str]:
    """The names of an operation's parameters and body fields, nested ones included."""
    raw = operation.definition.raw
    return _names_in([raw.get("parameters"), raw.get("requestBody")])


# 422s that refuse the data a request selects, not any one field of it; their message says so.
DATA_REFUSALS = {
    "POST /api/evaluation/feedback/calibration/recalibrate": ("none of the selected episodes",
                                                              "calibration is infeasible"),
    "POST /api/evaluation/feedback/calibration/recalibrate-from-campaign": ("campaign “",
                                                                            "the fit to people cannot be used"),
}


LOCATION_KEYS = ("loc", "field", "line", "row")


def _located(entry) -> bool:
    return isinstance(entry, dict) and any(entry.get(key) not in (None, "", []) for key in LOCATION_KEYS)


def _names_the_field(body: dict, case) -> bool:
    """A 422 says where: a location per error, a `field`, or the name of a field in its message."""
    detail = body.get("detail")
    if isinstance(detail, list) and detail and all(_located(entry) for entry in detail):
        return True
    listed = body.get("errors") or (body.get("report") or {}).get("problems") or []
    if body.get("field") or (listed and all(_located(entry) for entry in listed)):
        return True
    text = str(detail or body.get("error") or "")
    if text.startswith(DATA_REFUSALS.get(case.operation.label, ())):
        return True
    return any(re.search(rf"\b{re.escape(name)}\b", text) for name in request_names(case.operation))


def problem_with(response, case) -> str | None:
    """Why this answer breaks the contract, or None when it keeps it."""
    if response.status_code >= 500:
        return f"server error {response.status_code}"
    if response.status_code < 400:
        return None
    if response.status_code == 405:  # answered by django-ninja before any memweb code, in plain text
        return None if response.headers.get("allow") else "405 without an Allow header"
    try:
        body = response.json()
    except ValueError:
        return f"{response.status_code} without a JSON body: {response.text[:200]!r}"
    if not isinstance(body, dict) or not (body.get("detail") or body.get("errors") or body.get("error")):
        return f"{response.status_code} does not say what is wrong: {body!r}"
    if response.status_code == 422 and not _names_the_field(body, case):
        return f"422 does not name the field: {body!r}"
    return None


def call_and_check(case, wsgi_app, headers) -> None:
    # Each request in a savepoint rolled back afterwards: in production every request has its own
    # transaction, and here every example (and every replay while shrinking) starts from one state.
    savepoint = transaction.savepoint()
    try:
        response = case.call(app=wsgi_app, headers=headers)
    finally:
        transaction.savepoint_rollback(savepoint)
    problem = problem_with(response, case)
    assert problem is None, f"{case.operation.label}: {problem}\n{case.as_curl_command(headers=headers)}"


# --- objects for the routes that name one --------------------------------------------------------

def _task(request, user):
    return request.getfixturevalue("builtin").tasks.get(external_id=TASK_IDS[0])


def _campaign(request, user):
    campaign = Campaign.objects.create(name="existing", status=Campaign.Status.OPEN, created_by=user)
    annotation.items_import(campaign=campaign, records=[(1, item_fields())])
    return campaign


def _item(request, user):
    """An item of the campaign `campaign_id` names (the path names the campaign first)."""
    campaign = Campaign.objects.filter(name="existing").first() or _campaign(request, user)
    return campaign.items.first()


def _run(request, user):
    request.getfixturevalue("builtin")
    return run_launch(spec={"name": "existing", "task_ids": TASK_IDS[:1], "trials": 1}, user=user)


def _experience(request, user):
    step = Transition(trajectory_id="existing", step=0, goal="return the kettle", observation="it arrived broken",
                      action="get_order", reward=1.0, done=True, success=True)
    return experiences_append_batch(bank=request.getfixturevalue("bank"), transitions=[step])[0]


def _ingested(request, user):
    trajectory = trajectory_parse(success_trajectory("My kettle broke."))
    return episode_submit(bank=request.getfixturevalue("bank"), trajectory=trajectory, queue=False)


def _webhook(user):
    # Its deliveries are queued on commit, which these tests never reach: nothing is sent.
    return webhook_create(url="https://receiver.example/hook", events=["run.finished"], user=user)[0]


# Path parameter name -> how to make an object it can name (its value in the URL).
MAKERS = {
    "slug": lambda request, user: request.getfixturevalue("bank").slug,
    "orb_id": lambda request, user: request.getfixturevalue("make_orb")("Where is my parcel?", approve=False).pk,
    "ingest_id": lambda request, user: _ingested(request, user).pk,
    "experience_id": lambda request, user: _experience(request, user).pk,
    "retrieval_id": lambda request, user: orbs_retrieve(bank=request.getfixturevalue("bank"), query="parcel",
                                                        context={}).retrieval_id,
    "task_id": lambda request, user: _task(request, user).pk,
    "task_set_id": lambda request, user: _task(request, user).task_set_id,
    "definition_id": lambda request, user: ScoreDefinition.objects.create(
        task_set=_task(request, user).task_set, name="existing", slug="existing", kind="turns_at_most",
        config={"turns": 10}).pk,
    "episode_id": lambda request, user: episode_run(task=_task(request, user)).pk,
    "run_id": lambda request, user: _run(request, user).pk,
    "campaign_id": lambda request, user: _campaign(request, user).pk,
    "item_id": lambda request, user: _item(request, user).pk,
    "curve_id": lambda request, user: FeedbackCurve.objects.create(run=_run(request, user), batch_size=1, batches=1).pk,
    "job_id": lambda request, user: Job.objects.create(kind="orbs.bank_copy", title="existing", created_by=user).pk,
    "token": lambda request, user: str(annotation.assignment_next(campaign=_campaign(request, user),
                                                                  annotator=user).token),
    "webhook_id": lambda request, user: _webhook(user).pk,
    "delivery_id": lambda request, user: webhook_test_send(_webhook(user)).pk,
}


@pytest.fixture
def existing(request, role_admin_user):
    """Points a case at objects that exist: every path parameter, and each integer query or body
    field that names an object (task_id, run_id...). Objects are made on first use, so each
    route's test builds only what it names."""
    made = {}

    def value(name: str):
        if name not in made:
            made[name] = MAKERS[name](request, role_admin_user)
        return made[name]

    def pointed(fields: dict) -> dict:
        return {name: value(name) if name in MAKERS and isinstance(item, int) else item
                for name, item in fields.items()}

    def point(case) -> None:
        case.path_parameters = {name: value(name) for name in case.path_parameters}
        if isinstance(case.query, dict):
            case.query = pointed(case.query)
        if isinstance(case.body, dict):
            case.body = pointed(case.body)

    return point


def names_objects(context) -> bool:
    return "{" in context.operation.path or bool(request_names(context.operation) & set(MAKERS))


# --- the properties ------------------------------------------------------------------------------

@schema.parametrize()
@GENERATION
def test_it_answers_generated_requests_without_server_errors(case, db, wsgi_app, admin_key_headers):
    call_and_check(case, wsgi_app, admin_key_headers)


# Fuzzing only: the coverage phase's malformed bodies are refused before any object is looked up,
# so the first test has already sent them; here the valid bodies reach the services.
on_objects = schemathesis.openapi.from_dict(
    RAW_SCHEMA, config=schemathesis.Config.from_dict({"phases": {"coverage": {"enabled": False}}}),
).include(names_objects)


@on_objects.parametrize()
@GENERATION
def test_it_answers_generated_requests_on_existing_objects(case, db, existing, wsgi_app, admin_key_headers):
    existing(case)
    call_and_check(case, wsgi_app, admin_key_headers)


def _project_models() -> list[type[BaseModel]]:
    """Every pydantic model the project's apps define (the API's modules are all imported)."""
    pending, found = [BaseModel], []
    while pending:
        for model in pending.pop().__subclasses__():
            pending.append(model)
            if model.__module__.split(".")[0] in {"memweb", "orbs", "evaluation", "annotation"}:
                found.append(model)
    return found


def test_the_properties_run_on_the_schema_served_to_an_api_key(client, admin_key_headers):
    """Generation needs the schema when tests are collected, before a key can exist; this proves the
    document the properties use is the one an integrator's tools fetch over HTTP with a key."""
    served = client.get("/api/openapi.json", headers=admin_key_headers)
    assert served.status_code == 200
    assert served.json() == json.loads(json.dumps(RAW_SCHEMA))


def test_it_documents_each_schema_name_with_one_shape():
    """django-ninja files every model under its class name: two different models with one name
    leave the OpenAPI document describing one route's body or answer with the other's fields."""
    shapes = defaultdict(dict)
    for model in _project_models():
        if model.__name__ in RAW_SCHEMA["components"]["schemas"]:
            shapes[model.__name__][f"{model.__module__}.{model.__qualname__}"] = model.model_json_schema()
    clashes = {name: sorted(by_path) for name, by_path in shapes.items()
               if len({json.dumps(shape, sort_keys=True) for shape in by_path.values()}) > 1}
    assert clashes == {}


def test_it_plays_a_small_run_launched_through_the_api(client, builtin, admin_key_headers):
    """The launch route generated above never plays; here one bounded launch (1 trial x 2 tasks)
    is played through to the end by the same steps the workers take."""
    from evaluation.runs.models import EvaluationRun

    response = client.post("/api/evaluation/runs/", {"name": "bounded", "task_ids": TASK_IDS[:2], "trials": 1},
                           content_type="application/json", headers=admin_key_headers)
    assert response.status_code == 201, response.content
    run = run_drive(run=EvaluationRun.objects.get(pk=response.json()["id"]))
    assert run.status == EvaluationRun.Status.COMPLETED and run.episodes_finished == 2


@pytest.mark.parametrize(("route", "body", "status", "says"), [
    ("retrieve", '{"query": "parcel", "context": {"budget": NaN}}', 422, '"loc": ["body", "context", "budget"]'),
    ("retrieve", '{"query": "par\\u0000cel", "context": {}}', 422, '"loc": ["body", "query"]'),
    ("retrieve", '{"query": "\\ud800", "context": {}}', 422, '"msg": "text must not contain NUL'),
    ("retrieve", '{"query": "parcel", ', 400, "the request body is not valid JSON: Expecting"),
    ("transitions", '{"transitions": [{"trajectory_id": "t", "step": 2147483648, "goal": "g", "observation": "o",'
                    ' "action": "a", "reward": 1}]}', 422, '"loc": ["body", "payload", "transitions", 0, "step"]'),
    ("episodes", '{"task_id": 1, "seed": 9223372036854775808}', 422, '"loc": ["body", "payload", "seed"]'),
    ("task_import", '{"task_set": "big", "jsonl": "%s"}' % ("x" * 3 * 1024 * 1024), 413,
     "the request body is larger than 2560 KB"),
])
def test_it_refuses_what_the_database_cannot_store_naming_the_field(client, bank, admin_key_headers, route, body,
                                                                     status, says):
    url = {"retrieve": f"/api/orbs/banks/{bank.slug}/retrieve", "episodes": "/api/evaluation/episodes",
           "transitions": f"/api/orbs/experiences/banks/{bank.slug}/transitions",
           "task_import": "/api/evaluation/tasks/import"}[route]
    response = client.post(url, body, content_type="application/json", headers=admin_key_headers)
    assert (response.status_code, says in response.content.decode()) == (status, True), response.content[:500]


def test_it_refuses_a_nul_character_in_a_query_parameter(client, db, admin_key_headers):
    response = client.get("/api/evaluation/tasks", {"q": "oven\x00"}, headers=admin_key_headers)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["query", "q"]
