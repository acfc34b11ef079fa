"""Bad files for the three imports (a task set's JSONL, annotation items, a memory bank's JSONL),
through their pages and their API routes: each is refused with an error that names the line (or
row) and the problem, and every table the import writes holds exactly the rows it held before.

Already covered elsewhere and not repeated: bad lines in otherwise good files (tests/evaluation/
test_tasks_io.py, tests/annotation/test_intake.py, tests/orbs/test_transfer.py). Here: truncated
lines, wrong encodings, text PostgreSQL cannot store, wrong JSON types, empty and oversized files.
"""
import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import Campaign
from evaluation.services import tasks_export_jsonl
from orbs.services import bank_export
from orbs.services import transfer as bank_transfer
from tests.annotation.conftest import item_fields
from tests.orbs.conftest import bank, make_orb  # noqa: F401  (fixtures)
from tests.reliability.conftest import row_counts

MB = 1024 * 1024


@dataclass
class Sent:
    status: int
    text: str  # the page's visible text, or the API's JSON as text


def visible_text(response) -> str:
    """What a person reads on the page: tags dropped, entities decoded, spaces collapsed."""
    without_tags = re.sub(r"<[^>]+>", " ", response.content.decode())
    return re.sub(r"\s+", " ", html.unescape(without_tags))


def answered(response) -> Sent:
    if response["Content-Type"].startswith("application/json"):
        return Sent(response.status_code, json.dumps(response.json(), ensure_ascii=False))
    return Sent(response.status_code, visible_text(response))


# --- the three imports, each through its page and its API route -------------------------------

@dataclass
class Importer:
    tables: tuple[str, ...]
    free_text: tuple  # where in a line a person's free text sits
    wrong_type: tuple  # a field, and a value of the wrong JSON type for it
    page: Callable  # (client, file bytes, campaign) -> response
    api: Callable  # (client, file bytes, its encoding, campaign, headers) -> response


def _file(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def _tasks_api(client, data: bytes, encoding: str, headers):
    """The task import route takes the lines in a JSON body; a badly encoded file is a badly
    encoded body."""
    body = json.dumps({"task_set": "upload", "jsonl": data.decode(encoding)}, ensure_ascii=False)
    return client.post("/api/evaluation/tasks/import", body.encode(encoding), content_type="application/json",
                       headers=headers)


IMPORTERS = {
    "tasks": Importer(
        tables=("evaluation.TaskSet", "evaluation.Task"), free_text=("instructions",),
        wrong_type=(("persona",), "a calm customer"),
        page=lambda client, data, campaign: client.post(reverse("evaluation:task_import"),
                                                        {"task_set": "upload", "file": _file("tasks.jsonl", data)}),
        api=lambda client, data, encoding, campaign, headers: _tasks_api(client, data, encoding, headers),
    ),
    "items": Importer(
        tables=("annotation.Item", "annotation.FeedbackTask"), free_text=("task_description",),
        wrong_type=(("conversation",), {"role": "user", "content": "hello"}),
        page=lambda client, data, campaign: client.post(reverse("annotation:campaign_upload", args=[campaign.pk]),
                                                        {"file": _file("items.jsonl", data)}),
        api=lambda client, data, encoding, campaign, headers: client.post(
            f"/api/annotation/campaigns/{campaign.pk}/upload", {"file": _file("items.jsonl", data)}, headers=headers),
    ),
    "bank": Importer(
        tables=("orbs.MemoryBank", "orbs.Orb", "orbs.ReviewEvent", "orbs.EpisodeRecord"),
        free_text=("source_label",), wrong_type=(("vector",), "0.1, 0.2"),
        page=lambda client, data, campaign: client.post(reverse("orbs:bank_import"),
                                                        {"file": _file("bank.jsonl", data), "name": "Imported"}),
        api=lambda client, data, encoding, campaign, headers: client.post(
            "/api/orbs/banks/import", {"file": _file("bank.jsonl", data), "name": "Imported"}, headers=headers),
    ),
}


@pytest.fixture
def good_lines(request) -> Callable[[str], list[str]]:
    """Two lines each import takes as they are: exported tasks, items, a bank's header and Orb."""
    def lines(kind: str) -> list[str]:
        if kind == "tasks":
            return tasks_export_jsonl(task_set=request.getfixturevalue("builtin")).splitlines()[:2]
        if kind == "items":
            return [json.dumps(item_fields(source_ref=f"ref-{n}")) for n in range(2)]
        request.getfixturevalue("make_orb")("My blender arrived without its lid.")
        return [line.rstrip("\n") for line in bank_export(bank=request.getfixturevalue("bank"))]

    return lines


@pytest.fixture
def campaign(role_admin_user):
    return Campaign.objects.create(name="Uploads", status=Campaign.Status.OPEN, created_by=role_admin_user)


@pytest.fixture
def send(client, campaign, role_admin_user, admin_key_headers):
    """send(kind, route, data, encoding) -> what came back; the admin signs in for pages."""
    client.force_login(role_admin_user)

    def sent(kind: str, route: str, data: bytes, encoding: str = "utf-8") -> Sent:
        importer = IMPORTERS[kind]
        if route == "page":
            return answered(importer.page(client, data, campaign))
        return answered(importer.api(client, data, encoding, campaign, admin_key_headers))

    return sent


# --- bad files ---------------------------------------------------------------------------------

def _with(line: str, path: tuple, value) -> str:
    record = json.loads(line)
    target = record
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return json.dumps(record, ensure_ascii=False)


def malformed(kind, lines):
    return f"{lines[0]}\n{{not json\n", "utf-8"


def truncated(kind, lines):
    """The second line cut in the middle, as an interrupted copy leaves it."""
    return f"{lines[0]}\n{lines[1][:len(lines[1]) // 2]}", "utf-8"


def latin_1(kind, lines):
    line = _with(lines[1], IMPORTERS[kind].free_text, "Crème brûlée, s'il vous plaît")
    return f"{lines[0]}\n{line}\n", "latin-1"


def utf_16(kind, lines):
    return "\n".join(lines) + "\n", "utf-16"


def nul_character(kind, lines):
    """JSON may carry U+0000 (as \\u0000); PostgreSQL text and jsonb cannot."""
    line = _with(lines[1], IMPORTERS[kind].free_text, "before\x00after")
    return f"{lines[0]}\n{line}\n", "utf-8"


def wrong_type(kind, lines):
    path, value = IMPORTERS[kind].wrong_type
    return f"{lines[0]}\n{_with(lines[1], path, value)}\n", "utf-8"


def empty(kind, lines):
    return "", "utf-8"


# kind, route -> what each bad file must be told: (status, text the answer must contain). Every importer
# reads by memweb.jsonl's recipe, so a file's and a line's problems are worded alike.
# Line 2 is the bad line; the bank's line 1 is its header, the items' rows count from 1.
REFUSALS = {
    ("tasks", "page"): {
        malformed: (422, "task on line 2 : not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
        truncated: (422, "task on line 2 : not valid JSON (Unterminated string"),
        latin_1: (422, "The file is not UTF-8 text (invalid continuation byte at byte"),
        utf_16: (422, "The file is not UTF-8 text (invalid start byte at byte 0)."),
        nul_character: (422, "task on line 2 (id: shop-app-002) : instructions : text must not contain NUL"),
        wrong_type: (422, "task on line 2 (id: shop-app-002) : persona must be an object"),
        empty: (422, "One task per line, as exported. The submitted file is empty."),
    },
    ("tasks", "api"): {
        malformed: (422, '"loc": ["body", "line", 2], "msg": "not valid JSON (Expecting property name'),
        truncated: (422, '"loc": ["body", "line", 2], "msg": "not valid JSON (Unterminated string'),
        latin_1: (400, "the request body is not valid JSON: 'utf-8' codec can't decode byte 0xe8"),
        nul_character: (422, '"loc": ["body", "line", 2], "msg": "instructions: text must not contain NUL'),
        wrong_type: (422, '"loc": ["body", "line", 2], "msg": "persona: Input should be a valid dictionary'),
        empty: (422, '"loc": ["body", "line", 0], "msg": "the file holds no tasks"'),
    },
    ("items", "page"): {
        malformed: (400, "row 2 : not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
        truncated: (400, "row 2 : not valid JSON (Unterminated string"),
        latin_1: (400, "the file : file : not UTF-8 text (invalid continuation byte at byte"),
        utf_16: (400, "the file : file : not UTF-8 text (invalid start byte at byte 0)"),
        nul_character: (400, "row 2 : task_description : text must not contain NUL"),
        wrong_type: (400, "row 2 : conversation must be a list of at most 500 messages"),
        empty: (400, "Items file Upload The submitted file is empty."),
    },
    ("items", "api"): {
        malformed: (422, '"row": 2, "field": "(row)", "reason": "not valid JSON (Expecting property name'),
        truncated: (422, '"row": 2, "field": "(row)", "reason": "not valid JSON (Unterminated string'),
        latin_1: (422, '"row": 0, "field": "file", "reason": "not UTF-8 text (invalid continuation byte'),
        utf_16: (422, '"row": 0, "field": "file", "reason": "not UTF-8 text (invalid start byte at byte 0)"'),
        nul_character: (422, '"row": 2, "field": "task_description", "reason": "text must not contain NUL'),
        wrong_type: (422, '"row": 2, "field": "conversation", "reason": "must be a list of at most 500 messages"'),
        empty: (422, '"row": 0, "field": "file", "reason": "no rows to import"'),
    },
    ("bank", "page"): {
        malformed: (422, "line 2 : not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
        # Where the cut lands (inside a vector's digits, between two numbers) decides the JSON decoder's words.
        truncated: (422, "line 2 : not valid JSON ("),
        latin_1: (422, "line 0 : file : not UTF-8 text (invalid continuation byte"),
        utf_16: (422, "line 0 : file : not UTF-8 text (invalid start byte at byte 0)"),
        nul_character: (422, "line 2 : source_label : text must not contain NUL"),
        wrong_type: (422, "line 2 : vector must be a list"),
        empty: (422, "JSONL file A file from a bank's “Export JSONL”. The submitted file is empty."),
    },
    ("bank", "api"): {
        malformed: (422, '"line": 2, "field": "(line)", "message": "not valid JSON (Expecting property name'),
        truncated: (422, '"line": 2, "field": "(line)", "message": "not valid JSON ('),
        latin_1: (422, '"line": 0, "field": "file", "message": "not UTF-8 text (invalid continuation byte'),
        utf_16: (422, '"line": 0, "field": "file", "message": "not UTF-8 text (invalid start byte at byte 0)"'),
        nul_character: (422, '"line": 2, "field": "source_label", "message": "text must not contain NUL'),
        wrong_type: (422, '"line": 2, "field": "vector", "message": "Input should be a valid array"'),
        empty: (422, '"line": 1, "field": "(line)", "message": "the file is empty; line 1 must describe the bank"'),
    },
}
CASES = [(kind, route, bad) for (kind, route), refusals in REFUSALS.items() for bad in refusals]


@pytest.mark.parametrize(("kind", "route", "bad"), CASES,
                         ids=[f"{kind}-{route}-{bad.__name__}" for kind, route, bad in CASES])
def test_a_bad_file_is_refused_by_name_and_writes_nothing(kind, route, bad, good_lines, send):
    text, encoding = bad(kind, good_lines(kind))
    before = row_counts(*IMPORTERS[kind].tables)
    answer = send(kind, route, text.encode(encoding), encoding)
    status, says = REFUSALS[kind, route][bad]
    assert (answer.status, says in answer.text) == (status, True), answer.text[:2000]
    assert row_counts(*IMPORTERS[kind].tables) == before


def test_a_utf_16_task_file_sent_as_a_json_body_is_read_as_the_same_lines(good_lines, send):
    """JSON bodies may be UTF-16 (RFC 8259 readers detect it); the lines inside are what count."""
    text, _ = utf_16("tasks", good_lines("tasks"))
    before = row_counts(*IMPORTERS["tasks"].tables)
    answer = send("tasks", "api", text.encode("utf-16"), "utf-16")
    assert (answer.status, json.loads(answer.text)["created"]) == (201, 2)
    assert row_counts(*IMPORTERS["tasks"].tables)["evaluation.Task"] == before["evaluation.Task"] + 2


@pytest.mark.parametrize("kind", IMPORTERS)
@pytest.mark.parametrize("route", ["page", "api"])
def test_a_utf_8_file_that_starts_with_a_byte_order_mark_imports(kind, route, good_lines, send,
                                                                 django_capture_on_commit_callbacks):
    """Editors on Windows save UTF-8 with a byte-order mark: the file is fine, and imports (a bank
    through its background job, run eagerly here)."""
    main_table = IMPORTERS[kind].tables[0]  # the task set, the items, the bank
    before = row_counts(main_table)[main_table]
    with django_capture_on_commit_callbacks(execute=True):
        answer = send(kind, route, ("\n".join(good_lines(kind)) + "\n").encode("utf-8-sig"), "utf-8-sig")
    assert answer.status in (200, 201, 202, 302), answer.text[:2000]
    assert row_counts(main_table)[main_table] > before


# --- files over the size limit -----------------------------------------------------------------

def _oversized(line: str, size: int) -> bytes:
    """`line` repeated past `size` bytes (the limit is checked before any line is read)."""
    data = (line + "\n").encode()
    return data * (size // len(data) + 1)


@pytest.mark.parametrize(("kind", "route", "size", "status", "says"), [
    ("tasks", "page", 5 * MB, 422, "The file is larger than 5 MB."),
    ("tasks", "api", 5 * MB, 413, "the request body is larger than 2560 KB"),
    ("items", "page", 10 * MB, 400, "the file : file : larger than 10 MB"),
    ("items", "api", 10 * MB, 422, '"row": 0, "field": "file", "reason": "larger than 10 MB"'),
])
def test_a_file_over_the_limit_is_refused_with_the_limit(kind, route, size, status, says, good_lines, send):
    data = _oversized(good_lines(kind)[0], size)
    before = row_counts(*IMPORTERS[kind].tables)
    answer = send(kind, route, data)
    assert (answer.status, says in answer.text) == (status, True), answer.text[:2000]
    assert row_counts(*IMPORTERS[kind].tables) == before


@pytest.mark.parametrize(("route", "says"), [("page", "line 0 : file : larger than 2 MB"),
                                             ("api", '"line": 0, "field": "file", "message": "larger than 2 MB"')])
def test_a_bank_file_over_the_limit_is_refused_before_it_is_read(route, says, good_lines, send, monkeypatch):
    """The real limit is 64 MB; a smaller one here keeps the test light, the check is the same."""
    lines = good_lines("bank")
    monkeypatch.setattr(bank_transfer, "MAX_IMPORT_BYTES", 2 * MB)
    before = row_counts(*IMPORTERS["bank"].tables)
    answer = send("bank", route, _oversized(lines[1], 2 * MB))
    assert (answer.status, says in answer.text) == (422, True), answer.text[:2000]
    assert row_counts(*IMPORTERS["bank"].tables) == before
