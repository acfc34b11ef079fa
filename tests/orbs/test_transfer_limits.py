"""A hostile bank file costs bounded work: a header then thousands of `{}` lines (tens of problems each)
is refused with the counts and only the first problems listed; a file past the line limit is refused
before its lines are read; lines are split at newlines only, as files are written."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from memweb.models import Job
from orbs.models import MemoryBank
from orbs.services import bank_export, transfer
from orbs.services.transfer import MAX_LISTED_PROBLEMS

API = "/api/orbs"


@pytest.fixture
def header(bank, make_orb) -> str:
    make_orb("The blender is too loud.")
    return next(iter(bank_export(bank=bank)))


def _hostile(header: str, lines: int) -> SimpleUploadedFile:
    return SimpleUploadedFile("hostile.jsonl", (header + "{}\n" * lines).encode())


def test_a_header_then_thousands_of_empty_objects_is_refused_with_counts_and_a_short_list(agent, header):
    answer = agent.post(f"{API}/banks/import", {"file": _hostile(header, 3000), "name": "Hostile"})
    assert answer.status_code == 422, answer.content
    body = answer.json()
    per_line = len({error["field"] for error in body["errors"] if error["line"] == 2})  # every missing field
    assert per_line > 20 and body["problems"] == 3000 * per_line
    assert len(body["errors"]) == MAX_LISTED_PROBLEMS and body["unlisted"] == body["problems"] - MAX_LISTED_PROBLEMS
    summary = f"Nothing was imported: {body['problems']} problems; the first {MAX_LISTED_PROBLEMS} are listed"
    assert body["detail"][0]["msg"] == summary
    assert not Job.objects.exists() and not MemoryBank.objects.filter(name="Hostile").exists()


def test_the_page_says_how_many_problems_it_does_not_list(client, operator_user, header):
    client.force_login(operator_user)
    page = client.post(reverse("orbs:bank_import"), {"file": _hostile(header, 300), "name": "Hostile"})
    text = page.content.decode()
    assert page.status_code == 422 and "Only the first problems are listed:" in text
    assert "Nothing was imported:</strong> " in text and " problems in 300 records" in text


def test_a_file_past_the_line_limit_is_refused_before_its_lines_are_read(agent, header, monkeypatch):
    monkeypatch.setattr(transfer, "MAX_IMPORT_LINES", 50)
    answer = agent.post(f"{API}/banks/import", {"file": _hostile(header, 60), "name": "Long"})
    assert answer.status_code == 422
    assert answer.json()["errors"] == [{"line": 0, "field": "file", "message": "has 61 lines; a bank file has at most 50"}]
    report = transfer.bank_import(lines=transfer.text_lines(header + "{}\n" * 60), name="Long")  # the job's reader
    assert report.errors[0] == {"line": 51, "field": "(file)",
                                "message": "the file has more than 50 lines; a bank file has at most 50"}
    assert report.problems < 60 * len(transfer.OrbLine.model_fields)  # it stopped reading there


def test_a_line_separator_inside_a_text_does_not_split_its_line(agent, bank, make_orb,
                                                                django_capture_on_commit_callbacks):
    make_orb("My lamp flickers\u2028and then goes dark.")  # JSON keeps U+2028 raw; str.splitlines split there
    exported = "".join(bank_export(bank=bank)).encode()
    with django_capture_on_commit_callbacks(execute=True):
        answer = agent.post(f"{API}/banks/import", {"file": SimpleUploadedFile("b.jsonl", exported), "name": "Lamp"})
    assert answer.status_code == 202, answer.content
    job = agent.get(answer["Location"]).json()
    assert (job["status"], job["result"]["orbs"]) == ("succeeded", 1), job
