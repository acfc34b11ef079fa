"""Tasks in the database: the built-in set, JSONL export, and all-or-nothing import."""
import json

from evaluation.models import Task, TaskSet
from evaluation.services import tasks_export_jsonl, tasks_filtered, tasks_import_jsonl, taskset_builtin_load


def test_it_loads_the_built_in_set_once(builtin):
    assert builtin.is_builtin and builtin.tasks.count() == 130
    assert builtin.tasks.filter(domain="appliances").count() == 53
    again = taskset_builtin_load()
    assert again.pk == builtin.pk and Task.objects.count() == 130


def test_it_filters_tasks_by_domain_split_difficulty_error_kind_and_text(builtin):
    mine = {"workspace": builtin.workspace}
    wrong_tool = tasks_filtered(error_kind="wrong_tool", **mine)
    assert wrong_tool.count() == 39 and all("wrong_tool" in t.error_kinds for t in wrong_tool)
    hard_clothing = tasks_filtered(domain="clothing", difficulty="hard", split="test", **mine)
    assert all((t.domain, t.difficulty, t.split) == ("clothing", "hard", "test") for t in hard_clothing)
    assert [t.external_id for t in tasks_filtered(q="shop-app-007", **mine)] == ["shop-app-007"]
    assert tasks_filtered(q="no order number", **mine).count() == 39


def _exported_lines(builtin, count: int) -> list[dict]:
    return [json.loads(line) for line in tasks_export_jsonl(task_set=builtin).splitlines()[:count]]


def test_an_exported_set_imports_back_under_a_new_name(builtin):
    text = tasks_export_jsonl(task_set=builtin)
    assert len(text.splitlines()) == 130
    report = tasks_import_jsonl(text=text, task_set_name="copy", description="a copy")
    assert report.ok and report.created == 130 and report.updated == 0
    copied = TaskSet.objects.get(name="copy")
    assert not copied.is_builtin and copied.description == "a copy"
    assert tasks_export_jsonl(task_set=copied) == text


def test_an_import_updates_tasks_that_are_already_in_the_set(builtin):
    specs = _exported_lines(builtin, 2)
    tasks_import_jsonl(text="\n".join(json.dumps(s) for s in specs), task_set_name="mine")
    specs[0]["persona"]["patience"] = 5 if specs[0]["persona"]["patience"] != 5 else 4
    report = tasks_import_jsonl(text=json.dumps(specs[0]), task_set_name="mine")
    assert (report.created, report.updated) == (0, 1)
    stored = Task.objects.get(task_set__name="mine", external_id=specs[0]["id"])
    assert stored.spec["persona"]["patience"] == specs[0]["persona"]["patience"]


def test_an_import_rejects_bad_rows_by_line_number_and_writes_nothing(builtin):
    good, unsolvable, missing, duplicate = _exported_lines(builtin, 4)
    unsolvable["customer_id"] = "C9999"
    del missing["persona"]
    duplicate["id"] = good["id"]
    lines = [json.dumps(good), "", "{not json", json.dumps(unsolvable), json.dumps(missing), json.dumps(duplicate),
             "[1, 2]"]
    report = tasks_import_jsonl(text="\n".join(lines), task_set_name="broken")
    assert not report.ok
    reasons = dict(report.errors)
    assert sorted(reasons) == [3, 4, 5, 6, 7]
    assert "not valid JSON" in reasons[3]
    assert "customer_id 'C9999' is not in the shop" in reasons[4]
    assert reasons[5] == "persona: Field required"
    assert f"duplicate id {good['id']!r} (first on line 1)" in reasons[6]
    assert "must be a JSON object, got list" in reasons[7]
    assert not TaskSet.objects.filter(name="broken").exists() and Task.objects.count() == 130


def test_an_import_never_touches_the_built_in_set_and_needs_content(builtin):
    line = json.dumps(_exported_lines(builtin, 1)[0])
    refused = tasks_import_jsonl(text=line, task_set_name=builtin.name)
    assert refused.errors == [(0, f"task set {builtin.name!r} is built in and cannot be changed by an import; "
                                  "choose another name")]
    assert tasks_import_jsonl(text="\n\n", task_set_name="empty").errors == [(0, "the file holds no tasks")]
    assert tasks_import_jsonl(text=line, task_set_name="  ").errors == [(0, "task set: a name is required")]
