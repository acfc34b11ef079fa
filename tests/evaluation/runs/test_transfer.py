"""Export as JSON and CSV, and import: a round trip charts the same; a bad file names each
problem and writes nothing."""
import csv
import io
import json

import pytest

from evaluation.runs.models import EvaluationRun, RunEpisode
from evaluation.runs.services import RunImportError, run_drive, run_export_csv, run_export_json, run_import


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
        run_import(data={**run_export_json(run=played), "format_version": 2})
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
