"""JSON nested thousands of levels deep, sent to every import (banks, tasks, annotation items), through
the API and the pages: each answers with the problem named, never a server error (Python's JSON
reader and the checks that walk a value recurse once per level). memweb.json_input bounds it."""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from memweb.json_input import MAX_JSON_DEPTH
from memweb.models import ApiKey
from orbs.models import MemoryBank
from orbs.services import bank_export, bank_import
from tests.annotation.conftest import make_campaign  # noqa: F401  (fixture)
from tests.orbs.conftest import bank, make_orb  # noqa: F401  (fixtures)

TOO_DEEP = f"nested deeper than {MAX_JSON_DEPTH} levels"
# Past Python's recursion limit (the reader fails), and within it (the reader copes, a walk does not).
DEPTHS = [5000, 600]


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.fixture
def key_headers(operator_user):
    _, secret = ApiKey.issue(user=operator_user, name="importer")
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def bank_file(bank, make_orb):
    make_orb("The blender is too loud.")
    return "".join(bank_export(bank=bank)).splitlines()


def _with_deep_context(lines: list[str], depth: int) -> str:
    """The bank file with its Orb's context replaced by a deeply nested value (as text: json.dumps
    itself could not write it)."""
    orb = json.loads(lines[1]) | {"context": "@@"}
    return "\n".join([lines[0], json.dumps(orb).replace('"@@"', _deep(depth)), *lines[2:]]) + "\n"


@pytest.mark.parametrize("depth", DEPTHS)
def test_it_names_the_nesting_of_a_bank_file_in_the_api_the_page_and_the_job(client, operator_user, key_headers,
                                                                                bank_file, depth):
    text = _with_deep_context(bank_file, depth)
    answer = client.post("/api/orbs/banks/import", {"file": SimpleUploadedFile("b.jsonl", text.encode()),
                                                    "name": "Deep"}, headers=key_headers)
    assert answer.status_code == 422, answer.content
    assert answer.json()["errors"][0] == {"line": 2, "field": "(line)",
                                          "message": f"{TOO_DEEP} (arrays and objects inside each other)"}
    client.force_login(operator_user)
    page = client.post(reverse("orbs:bank_import"), {"file": SimpleUploadedFile("b.jsonl", text.encode()),
                                                     "name": "Deep"})
    assert page.status_code == 422 and TOO_DEEP in page.content.decode()
    report = bank_import(lines=text.splitlines(), name="Deep")  # what the job runs
    assert [(e["line"], e["message"].startswith(TOO_DEEP)) for e in report.errors] == [(2, True)]
    assert not MemoryBank.objects.filter(name="Deep").exists()


@pytest.mark.parametrize("depth", DEPTHS)
def test_it_names_the_nesting_of_a_task_line_in_the_api_and_the_page(client, operator_user, key_headers, depth):
    line = '{"id": "deep-1", "persona": ' + _deep(depth) + "}"
    answer = client.post("/api/evaluation/tasks/import", json.dumps({"task_set": "Deep", "jsonl": line}),
                         content_type="application/json", headers=key_headers)
    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"][0]["line"] == 1 and TOO_DEEP in answer.json()["detail"][0]["msg"]
    client.force_login(operator_user)
    page = client.post(reverse("evaluation:task_import"), {"task_set": "Deep", "text": line})
    assert page.status_code == 422 and TOO_DEEP in page.content.decode()


@pytest.mark.parametrize("depth", DEPTHS)
def test_it_names_the_nesting_of_an_item_in_the_api_and_the_page(client, operator_user, key_headers, make_campaign,
                                                                 depth):
    campaign = make_campaign()
    jsonl = ('{"conversation": ' + _deep(depth) + "}\n").encode()
    csv = ('conversation\n"' + _deep(depth) + '"\n').encode()
    for name, data in (("items.jsonl", jsonl), ("items.csv", csv)):
        answer = client.post(f"/api/annotation/campaigns/{campaign.pk}/upload",
                             {"file": SimpleUploadedFile(name, data)}, headers=key_headers)
        assert answer.status_code == 422, (name, answer.content)
        assert any(TOO_DEEP in problem["reason"] for problem in answer.json()["report"]["problems"]), name
    body = '{"items": [{"conversation": ' + _deep(depth) + "}]}"
    answer = client.post(f"/api/annotation/campaigns/{campaign.pk}/items", body, content_type="application/json",
                         headers=key_headers)
    assert answer.status_code in (400, 422) and TOO_DEEP in answer.content.decode(), answer.content
    client.force_login(operator_user)
    for name, data in (("items.jsonl", jsonl), ("items.csv", csv)):
        page = client.post(reverse("annotation:campaign_upload", args=[campaign.pk]),
                           {"file": SimpleUploadedFile(name, data)})
        assert page.status_code == 400 and TOO_DEEP in page.content.decode(), name
    assert campaign.items.count() == 0
