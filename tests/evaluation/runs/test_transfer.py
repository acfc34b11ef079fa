"""Export as JSON and CSV, and import: a round trip charts the same; a bad file names each
problem and writes nothing."""
import csv
import io
import json

import pytest

from evaluation.models import Task
from evaluation.runs.models import EvaluationRun, RunEpisode
from evaluation.runs.services import (
    RunImportError,
    run_drive,
    run_export_csv,
    run_export_json,
    run_import,
    run_staleness,
)
from evaluation.runs.services.transfer import FORMAT_VERSION
from evaluation.services import BUILTIN_SET, task_spec_update
from evaluation.shop.reward import REWARD_VERSION


@pytest.fixture
def played(launch):
    return run_drive(run=launch(memory_mode="none"))


def test_a_json_export_imports_back_as_the_same_results(played, operator_user):
    exported = json.loads(json.dumps(run_export_json(run=played)))
    assert exported["format"] == "memweb.evaluation-run" and len(exported["episodes"]) == 9
    copy = run_import(data=exported, user=operator_user)
    assert copy.imported and copy.imported_from == f"memweb run #{played.pk}" and copy.status == "completed"
    assert copy.scripted and copy.created_by == operator_user
    for series in ("per_trial", "cumulative", "pass_k"):
        assert copy.metrics[series] == played.metrics[series]
    assert copy.metrics["matrix"] == played.metrics["matrix"]
    assert (copy.successes, copy.episodes_total, copy.episodes_error) == (played.successes, 9, 0)
    assert not copy.run_episodes.filter(episode__isnull=False).exists()


def test_the_csv_exports_have_one_row_per_episode_and_per_chart_point(played):
    rows = list(csv.DictReader(io.StringIO(run_export_csv(run=played))))
    assert len(rows) == 9 and {r["trial"] for r in rows} == {"1", "2", "3"}
    assert all(r["status"] == "done" and r["success"] in ("True", "False") and r["episode_id"] for r in rows)
    points = list(csv.DictReader(io.StringIO(run_export_csv(run=played, part="metrics"))))
    assert [p["series"] for p in points].count("per_trial") == 3
    assert {p["series"] for p in points} == {"per_trial", "cumulative", "pass_k"}


def _broken(played) -> dict:
    data = run_export_json(run=played)
    data["episodes"][0]["status"] = "done"
    data["episodes"][0]["success"] = None
    data["episodes"][1]["trial"] = 7
    data["episodes"].append(dict(data["episodes"][2]))
    data["episodes"] = [e for e in data["episodes"] if not (e["task_id"] == "shop-clo-008" and e["trial"] == 3)]
    return data


def test_a_bad_file_names_each_problem_and_imports_nothing(played):
    with pytest.raises(RunImportError) as caught:
        run_import(data={**run_export_json(run=played), "format_version": FORMAT_VERSION + 1})
    assert caught.value.problems[0][0] == "format_version"
    with pytest.raises(RunImportError) as caught:
        run_import(data=_broken(played))
    assert caught.value.problems == [("episodes.0", "Value error, success must be true or false when status is done")]
    data = _broken(played)
    data["episodes"][0]["success"] = True
    with pytest.raises(RunImportError) as caught:
        run_import(data=data)
    fields = {field: message for field, message in caught.value.problems}
    assert fields["episodes.1.trial"] == "is 7, but the run has 3 trials"
    assert fields["episodes.8"] == "task 'shop-clo-008' trial 1 appears twice (also episodes.2)"
    assert any("has no episode for trial(s) 3" in m for f, m in caught.value.problems if f == "episodes")
    assert EvaluationRun.objects.count() == 1 and RunEpisode.objects.count() == 9


def _edit_gold(external_id: str) -> Task:
    """A new version of one task: a fact the agent must tell that no tool gives."""
    task = Task.objects.get(task_set__name=BUILTIN_SET, external_id=external_id)
    outputs = [*task.spec["required_outputs"], {"label": "code word", "value": "purple elephant", "derived": False}]
    task_spec_update(task=task, spec={**task.spec, "required_outputs": outputs})
    return task


def test_it_restores_the_pins_an_export_carries_and_checks_staleness_against_them(played, operator_user, client):
    exported = json.loads(json.dumps(run_export_json(run=played)))
    _edit_gold("shop-app-001")  # here, after the export: the imported run was scored against version 1

    copy = run_import(data=exported, user=operator_user)

    assert sorted(copy.task_pins.values_list("task__external_id", "version")) == [
        ("shop-app-001", 1), ("shop-app-023", 1), ("shop-clo-008", 1)]
    assert copy.reward_version == REWARD_VERSION
    assert {part: copy.pins[part] for part in ("agent", "customer", "reward", "memory", "feedback")} == {
        part: played.pins[part] for part in ("agent", "customer", "reward", "memory", "feedback")}
    assert copy.pins["import"] == {"pinned": True, "unmatched_tasks": [], "note": (
        "imported: pins from the exporting server, staleness checked against these task versions")}
    staleness = run_staleness(run=copy)
    assert staleness["stale"] and [change["task"] for change in staleness["tasks"]] == ["shop-app-001"]
    client.force_login(operator_user)
    page = client.get(copy.get_absolute_url()).content.decode()
    assert "Imported: pins from the exporting server, staleness checked against these task versions." in page
    assert 'id="run-stale"' in page and "3 tasks at the versions below" in page


def test_it_says_which_task_versions_it_could_not_carry(played, operator_user):
    exported = json.loads(json.dumps(run_export_json(run=played)))
    exported["run"]["pins"]["tasks"][2]["content_hash"] = "0" * 64  # a version this server never had

    copy = run_import(data=exported, user=operator_user)

    assert copy.task_pins.count() == 2 and copy.pins["import"]["unmatched_tasks"] == ["shop-clo-008"]
    assert copy.pins["import"]["note"] == (
        "imported: pins from the exporting server for 2 of 3 tasks; staleness unknown for shop-clo-008 "
        "(no task here has that version and content)")


def test_it_imports_an_old_file_without_pins_and_says_staleness_is_unknown(played, operator_user, client):
    exported = json.loads(json.dumps(run_export_json(run=played)))
    del exported["run"]["pins"]

    copy = run_import(data=exported, user=operator_user)

    assert not copy.task_pins.exists() and copy.reward_version is None
    assert copy.pins == {"import": {"pinned": False, "unmatched_tasks": [], "note": "imported without pins: staleness unknown"}}
    assert run_staleness(run=copy) == {"stale": False, "pinned": False, "tasks": [], "reward": None}
    client.force_login(operator_user)
    assert "Imported without pins: staleness unknown." in client.get(copy.get_absolute_url()).content.decode()


def test_it_refuses_a_malformed_pin_naming_it_and_imports_nothing(played):
    exported = json.loads(json.dumps(run_export_json(run=played)))
    exported["run"]["pins"]["tasks"][0]["content_hash"] = "not a hash"
    runs = EvaluationRun.objects.count()

    with pytest.raises(RunImportError) as caught:
        run_import(data=exported)

    assert [field for field, _ in caught.value.problems] == ["run.pins.tasks.0.content_hash"]
    assert EvaluationRun.objects.count() == runs
