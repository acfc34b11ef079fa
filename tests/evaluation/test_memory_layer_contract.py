"""The contract from memweb's side: a client that knows only docs/memory-layer-contract.openapi.json
(its paths, methods, request examples and answer schemas) drives a memweb bank under
/api/memory-layer/<bank>/, and every answer validates against the document's schemas."""
import json
from pathlib import Path

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012 as DRAFT_2020_12

from evaluation.memory_layers.schemas import contract_openapi
from memweb.models import ApiKey, Workspace
from orbs.services import bank_get_or_create

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "memory-layer-contract.openapi.json"


class DocumentClient:
    """Calls a service the way a harness in another language would: from the document alone."""

    def __init__(self, document: dict, http, base: str, key: str):
        self.document, self.http, self.base, self.key = document, http, base, key
        self.registry = Registry().with_resource("contract.json", Resource(
            contents={"components": document["components"]}, specification=DRAFT_2020_12))

    def example(self, call: str) -> dict:
        """A request body of `call`: the first example the document gives for it."""
        body = self._operation(call)[1]["requestBody"]["content"]["application/json"]["schema"]
        return json.loads(json.dumps(self._resolved(body)["examples"][0]))

    def call(self, call: str, body: dict | None = None):
        method, operation = self._operation(call)
        response = self.http.generic(method.upper(), f"{self.base}/{call}", json.dumps(body) if body else "",
                                     content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {self.key}")
        answer = response.json()
        schema = operation["responses"][str(response.status_code)]["content"]["application/json"]["schema"]
        jsonschema.validate(answer, {"$ref": "contract.json" + schema["$ref"]}, registry=self.registry,
                            cls=jsonschema.Draft202012Validator)
        return response.status_code, answer

    def _operation(self, call: str) -> tuple[str, dict]:
        [(method, operation)] = self.document["paths"][f"/{call}"].items()
        return method, operation

    def _resolved(self, schema: dict) -> dict:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return self.document["components"]["schemas"][name]


@pytest.fixture
def document() -> dict:
    return json.loads(DOCUMENT.read_text())


def test_the_committed_document_is_the_contract_memweb_speaks(document):
    assert document == contract_openapi(), ("regenerate it: python -m evaluation.memory_layers.schemas > "
                                            "docs/memory-layer-contract.openapi.json")


def test_a_client_written_from_the_document_drives_a_memweb_bank(document, client, operator_user):
    bank = bank_get_or_create(name="Contract bank", auto_approve="always")
    _, secret = ApiKey.issue(user=operator_user, name="harness")
    harness = DocumentClient(document, client, f"/api/memory-layer/{bank.slug}", secret)

    status, described = harness.call("describe")
    assert status == 200 and described["contract_version"].startswith("1.") and bank.slug in described["name"]
    namespace = harness.example("reset")
    assert harness.call("reset", namespace) == (200, {"removed": 0})
    status, learnt = harness.call("learn", harness.example("learn"))
    assert status == 200 and learnt["learned"] == 1
    assert harness.call("learn", harness.example("learn"))[1]["learned"] == 0  # the same episode is learnt once
    status, snapshot = harness.call("snapshot", namespace)
    assert snapshot["items"] == 1
    status, retrieved = harness.call("retrieve", harness.example("retrieve"))
    assert status == 200 and [item["id"] for item in retrieved["items"]] == learnt["item_ids"]
    assert retrieved["prompt_block"]
    assert harness.call("reset", namespace) == (200, {"removed": 1})
    assert harness.call("snapshot", namespace)[1]["items"] == 0
    assert harness.call("retrieve", harness.example("retrieve"))[1]["items"] == []

    refused = harness.example("retrieve") | {"contract_version": "2.0"}
    status, answer = harness.call("retrieve", refused)
    assert status == 422 and "contract_version 2.0" in str(answer["detail"])
    other = bank_get_or_create(name="Elsewhere", workspace=Workspace.objects.create(name="Other", slug="other"))
    assert DocumentClient(document, client, f"/api/memory-layer/{other.slug}", secret).call("describe")[0] == 404
    assert DocumentClient(document, client, f"/api/memory-layer/{bank.slug}", "mw_wrong").call("describe")[0] == 401
