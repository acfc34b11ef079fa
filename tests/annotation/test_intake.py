"""Uploads and memweb's own intake: the validation report and all-or-nothing storage."""
import csv
import io
import json

from annotation.models import Campaign, FeedbackTask, Item
from annotation.services import items_from_conversations, items_import, upload_parse
from tests.annotation.conftest import item_fields


def _jsonl(rows: list[dict]) -> bytes:
    return "\n".join(json.dumps(row) for row in rows).encode()


def _csv(rows: list[dict]) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
        writer.writerow({key: json.dumps(value) if isinstance(value, list | dict) else value
                         for key, value in row.items()})
    return buffer.getvalue().encode()


def _import(campaign, filename, data):
    records, problems = upload_parse(filename=filename, data=data)
    return items_import(campaign=campaign, records=records, problems=problems)


def test_it_imports_a_valid_jsonl_file_and_queues_missing_human_feedback(make_campaign):
    campaign = make_campaign(status=Campaign.Status.DRAFT)
    rows = [item_fields(source_ref="a"), item_fields(source_ref="b", human_feedback="", language="zh",
                                                     task_format="lilo")]
    report = _import(campaign, "items.jsonl", _jsonl(rows))
    assert report.ok and (report.rows, report.created, report.needs_feedback) == (2, 2, 1)
    waiting = Item.objects.get(source_ref="b")
    assert waiting.task_format == "LiLo" and waiting.feedback_task.status == FeedbackTask.Status.OPEN
    assert Item.objects.get(source_ref="a").conversation[0]["content"] == "My washing machine leaks."


def test_it_imports_a_csv_file_with_json_cells(make_campaign):
    campaign = make_campaign()
    report = _import(campaign, "items.CSV", _csv([item_fields(source_ref="x", is_gold="true",
                                                              gold_expected={"relevance": "human"})]))
    assert report.ok, report.problems
    item = Item.objects.get()
    assert item.is_gold and item.gold_expected == {"relevance": "human"}
    assert item.conversation[1]["role"] == "assistant"


def test_it_reports_every_bad_row_and_stores_nothing(make_campaign):
    campaign = make_campaign()
    rows = [
        item_fields(source_ref="ok"),
        item_fields(source_ref="r2", task_format="Medium", language="English!"),
        item_fields(source_ref="ok", simulated_feedback=""),
        item_fields(source_ref="r4", conversation=[{"role": "user"}], colour="blue"),
        item_fields(source_ref="r5", is_gold=True),
    ]
    report = _import(campaign, "items.jsonl", _jsonl(rows))
    assert not report.ok and report.created == 0
    found = {(problem.row, problem.field) for problem in report.problems}
    assert found == {(2, "task_format"), (2, "language"), (3, "source_ref"), (3, "simulated_feedback"),
                     (4, "conversation[0]"), (4, "colour"), (5, "gold_expected")}
    assert all(problem.reason for problem in report.problems)
    assert not Item.objects.exists() and not FeedbackTask.objects.exists()


def test_it_reports_unparseable_lines_with_their_row_number(make_campaign):
    campaign = make_campaign()
    data = _jsonl([item_fields()]) + b"\n{not json\n[1, 2]\n"
    report = _import(campaign, "items.jsonl", data)
    assert [(problem.row, problem.field) for problem in report.problems] == [(2, "(row)"), (3, "(row)")]
    assert not Item.objects.exists()


def test_it_rejects_a_source_ref_already_in_the_campaign(make_campaign, make_items):
    campaign = make_campaign()
    make_items(campaign, 1, source_ref="dup")
    report = _import(campaign, "items.jsonl", _jsonl([item_fields(source_ref="dup")]))
    assert [(problem.row, problem.field) for problem in report.problems] == [(1, "source_ref")]
    assert campaign.items.count() == 1


def test_it_rejects_gold_answers_outside_the_campaign_criteria_or_choices(make_campaign):
    campaign = make_campaign(allow_ties=False)
    rows = [item_fields(is_gold=True, gold_expected={"humour": "human"}),
            item_fields(is_gold=True, gold_expected={"relevance": "tie"})]
    report = _import(campaign, "items.jsonl", _jsonl(rows))
    assert [(problem.row, problem.field) for problem in report.problems] == [(1, "gold_expected"),
                                                                              (2, "gold_expected")]


def test_it_names_file_level_problems(make_campaign):
    campaign = make_campaign()
    assert _import(campaign, "items.xlsx", b"x").problems[0].reason.startswith("unsupported file type")
    assert _import(campaign, "items.csv", b"").problems[0].field == "file"
    assert "UTF-8" in _import(campaign, "items.jsonl", b"\xff\xfe{").problems[0].reason
    closed = make_campaign(status=Campaign.Status.CLOSED)
    assert _import(closed, "items.jsonl", _jsonl([item_fields()])).problems[0].field == "campaign"


def test_it_takes_memweb_conversations_through_the_same_checks(make_campaign):
    campaign = make_campaign()
    bad = items_from_conversations(campaign=campaign, conversations=[item_fields(task_format="XL")])
    assert [(problem.row, problem.field) for problem in bad.problems] == [(1, "task_format")]
    good = items_from_conversations(campaign=campaign, conversations=[
        item_fields(human_feedback="", source_ref=f"episode:{number}") for number in range(3)])
    assert good.created == 3 and FeedbackTask.objects.filter(campaign=campaign).count() == 3


def test_it_reports_a_misspelt_csv_column_once(make_campaign):
    campaign = make_campaign()
    rows = [{**item_fields(), "domian": "x"} for _ in range(3)]
    report = _import(campaign, "items.csv", _csv(rows))
    assert [(problem.row, problem.field) for problem in report.problems] == [(0, "domian")]
    assert not Item.objects.exists()
