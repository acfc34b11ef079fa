"""memweb_client cannot drift from the server: every method it offers calls a route the served
OpenAPI document declares, with its path and query parameters, body fields the route takes (and every
one it requires), and reads answers whose fields the document declares (tests/clients/schema_check.py)."""
import ast
import copy
import dataclasses
import importlib.util
import inspect

import pytest
from memweb_client import AsyncClient, Client, routes
from memweb_client.routes import Route

from tests.clients.conftest import PYTHON_CLIENT
from tests.clients.schema_check import route_problems

# Methods that call no route of their own: they poll one (wait_*) or manage the connection.
HELPERS = {"close", "aclose", "wait_for_episode", "wait_for_job"}


@pytest.fixture
def served_schema(client, api_key) -> dict:
    answer = client.get("/api/openapi.json", HTTP_AUTHORIZATION=f"Bearer {api_key}")
    assert answer.status_code == 200, answer.content[:300]
    return answer.json()


def public_methods(kind: type) -> dict:
    return {name: member for name, member in inspect.getmembers(kind, callable) if not name.startswith("_")}


def all_routes() -> list[Route]:
    return [value for value in vars(routes).values() if isinstance(value, Route)]


@pytest.mark.django_db
def test_every_route_matches_the_served_schema(served_schema):
    problems = [problem for route in all_routes() for problem in route_problems(served_schema, route)]
    assert problems == []


@pytest.mark.parametrize("kind", [Client, AsyncClient])
def test_every_client_method_is_a_checked_route_or_a_helper(kind):
    methods = public_methods(kind)
    unmarked = sorted(name for name, method in methods.items() if not hasattr(method, "route") and name not in HELPERS)
    assert unmarked == []
    called = {id(method.route) for method in methods.values() if hasattr(method, "route")}
    assert called == {id(route) for route in all_routes()}, "a route no method calls"


@pytest.mark.django_db
def test_the_check_catches_a_renamed_field_a_missing_route_and_a_new_required_field(served_schema):
    drifted = copy.deepcopy(served_schema)
    orb = drifted["components"]["schemas"]["OrbOut"]
    orb["properties"]["observation"] = orb["properties"].pop("obs")
    drifted["paths"].pop("/api/jobs/{job_id}")
    retrieve_in = drifted["components"]["schemas"]["RetrieveIn"]
    retrieve_in["properties"]["filters"] = {"type": "object"}
    retrieve_in["required"].append("filters")
    remember_in = drifted["components"]["schemas"]["RememberIn"]
    remember_in["properties"]["lesson"] = remember_in["properties"].pop("text")

    problems = [problem for route in all_routes() for problem in route_problems(drifted, route)]
    assert any("Orb.obs is not in the schema" in problem for problem in problems)
    assert "GET /api/jobs/{job_id}: no such operation in the schema" in problems
    assert any("RetrieveIn lacks ['filters'], which the schema requires" in problem for problem in problems)
    assert any("RememberIn has ['text'], which the schema lacks" in problem for problem in problems)


def test_answers_are_frozen_dataclasses():
    for route in all_routes():
        for kind in route.answers.values():
            if kind is not None and dataclasses.is_dataclass(kind):
                assert kind.__dataclass_params__.frozen, kind


def _annotations(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign):
            yield node.annotation
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from (arg.annotation for arg in (*node.args.args, *node.args.kwonlyargs) if arg.annotation)
            if node.returns:
                yield node.returns


@pytest.mark.parametrize("module", sorted((PYTHON_CLIENT / "memweb_client").glob("*.py")), ids=lambda path: path.name)
def test_the_client_is_python_3_9_syntax_with_annotations_3_9_can_evaluate(module):
    """The package promises Python 3.9; this checkout runs 3.11. Dataclass annotations are evaluated at
    run time (typing.get_type_hints), where 3.9 has no `X | Y`; 3.9's parser has no `match`."""
    tree = ast.parse(module.read_text(), feature_version=(3, 9))
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.Match)]
    unions = [ast.unparse(annotation) for annotation in _annotations(tree)
              if any(isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) for node in ast.walk(annotation))]
    assert unions == []


def test_the_type_stub_says_what_each_client_s_methods_return():
    """client.pyi is what tools/write_stub.py makes of the clients now: AsyncClient's methods awaited."""
    spec = importlib.util.spec_from_file_location("write_stub", PYTHON_CLIENT / "tools" / "write_stub.py")
    write_stub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(write_stub)
    committed = (PYTHON_CLIENT / "memweb_client" / "client.pyi").read_text()
    assert write_stub.stub() == committed, "regenerate it: python clients/python/tools/write_stub.py"
    asynchronous = ast.parse(committed).body[-1]
    assert asynchronous.name == "AsyncClient"
    assert {type(node) for node in asynchronous.body if node.name != "__init__"} == {ast.AsyncFunctionDef}
