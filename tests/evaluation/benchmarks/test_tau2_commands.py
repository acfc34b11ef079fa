"""`manage.py benchmark_import tau2-retail` and `manage.py env_replay tau2-retail` on the data of
../shared/benchmarks: the task set with its provenance, splits and versions; replays with the
reward's components and the final database in db.json's schema."""
import io
import json

import pytest
from django.core.management import CommandError, call_command

from evaluation.environments.benchmark import BENCHMARKS_DIR_VARIABLE
from evaluation.models import BenchmarkWorld, Task, TaskSet, TaskVersion
from evaluation.services.benchmarks import JOB_KIND
from memweb.models import Job


def _run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def imported(db, tau2_dir):
    return _run("benchmark_import", "tau2-retail", "--from", str(tau2_dir))


def test_the_import_makes_a_task_set_with_provenance_splits_and_versions(imported, tau2_dir):
    assert "[114/114] Validated 114 of 114 tasks" in imported
    assert "Task set tau2-retail: 114 created, 0 updated (0 new versions); splits: test 40, train 74." in imported
    task_set = TaskSet.objects.get(name="tau2-retail")
    provenance = task_set.provenance
    assert (provenance["licence"], provenance["layout"], provenance["source"]) == (
        "MIT", "json", "https://github.com/sierra-research/tau2-bench")
    assert set(provenance["files"]) == {"tasks.json", "db.json", "policy.md", "split_tasks.json"}
    assert BenchmarkWorld.objects.get().key == provenance["world"]
    tasks = Task.objects.filter(task_set=task_set)
    assert (tasks.count(), tasks.filter(split="train").count(), tasks.filter(environment="tau2-retail").count()) == \
        (114, 74, 114)
    assert TaskVersion.objects.filter(task__task_set=task_set).count() == 114
    assert set(tasks.values_list("domain", flat=True)) == {"retail"}


def test_importing_again_updates_in_place_without_new_versions(imported, tau2_dir):
    again = _run("benchmark_import", "tau2-retail", "--from", str(tau2_dir))
    assert "0 created, 114 updated (0 new versions)" in again
    assert BenchmarkWorld.objects.count() == 1


def test_a_folder_missing_a_file_is_refused_and_nothing_is_written(db, tmp_path, tau2_dir):
    for name in ("tasks.json", "db.json", "policy.md"):
        (tmp_path / name).symlink_to(tau2_dir / name)
    with pytest.raises(CommandError, match="missing split_tasks.json"):
        _run("benchmark_import", "tau2-retail", "--from", str(tmp_path))
    assert (TaskSet.objects.count(), BenchmarkWorld.objects.count()) == (0, 0)


def test_an_unknown_benchmark_is_refused_naming_the_known_ones(db, tau2_dir):
    with pytest.raises(CommandError, match="'shop' is not a benchmark environment; known: .*tau2-retail"):
        _run("benchmark_import", "shop", "--from", str(tau2_dir))


def test_the_import_can_be_queued_as_a_job(db, tau2_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):  # the job's Celery task runs eagerly here
        out = _run("benchmark_import", "tau2-retail", "--from", str(tau2_dir), "--queue", "--task-set", "retail-queued")
    job = Job.objects.get(kind=JOB_KIND)
    assert f"Queued job #{job.pk}" in out
    job.refresh_from_db()
    assert (job.status, job.result["created"], job.result["task_set"]) == ("succeeded", 114, "retail-queued")


def test_gold_replay_prints_reward_one_with_components(imported):
    out = _run("env_replay", "tau2-retail", "5", "--gold")
    assert out.splitlines()[:3] == ["task 5: reward 1 (success)", "  db: 1", "  communicate: 1"]


def test_actions_from_a_file_and_the_final_database_in_db_json_schema(imported, tmp_path, tau2_dir):
    spec = Task.objects.get(external_id="5").spec
    actions = tmp_path / "actions.json"
    actions.write_text(json.dumps([{"action_id": "x", **call} for call in spec["gold_calls"][:-1]]))
    out_db = tmp_path / "final.json"
    out = _run("env_replay", "tau2-retail", "5", "--actions", str(actions), "--db-out", str(out_db))
    assert "task 5: reward 0 (failure)" in out and "  db: 0" in out
    final, initial = json.loads(out_db.read_text()), json.loads((tau2_dir / "db.json").read_text())
    assert final == initial  # only look-ups: the database as db.json holds it

    gold_db = tmp_path / "gold.json"
    _run("env_replay", "tau2-retail", "5", "--gold", "--db-out", str(gold_db))
    gold = json.loads(gold_db.read_text())
    assert list(gold) == list(initial) and all(set(gold[table]) == set(initial[table]) for table in initial)
    changed = [key for key in initial["orders"] if gold["orders"][key] != initial["orders"][key]]
    assert len(changed) == 1 and gold["orders"][changed[0]]["status"] == "return requested"


def test_a_batch_writes_one_database_and_one_result_line_per_list(imported, tmp_path):
    spec = Task.objects.get(external_id="5").spec
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(json.dumps(line) for line in (
        {"task_id": "5", "actions": spec["gold_calls"]},
        {"task_id": 5, "actions": [{"name": "cancel_pending_order", "arguments": {"order_id": "#W0", "reason": "x"}}]},
    )) + "\n")
    out = _run("env_replay", "tau2-retail", "--batch", str(batch), "--db-out-dir", str(tmp_path / "dbs"))
    results = [json.loads(line) for line in out.splitlines()]
    assert [(r["line"], r["reward"], r["components"]["db"]) for r in results] == [(1, 1.0, 1.0), (2, 0.0, 0.0)]
    assert results[1]["refused"] == [{"index": 0, "name": "cancel_pending_order", "error": "Error: Order not found"}]
    assert sorted(path.name for path in (tmp_path / "dbs").iterdir()) == ["1.json", "2.json"]


def test_replay_refuses_bad_input_with_a_message(imported, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"arguments": {}}]))
    with pytest.raises(CommandError, match="action 0 must be an object with a name"):
        _run("env_replay", "tau2-retail", "5", "--actions", str(bad))
    with pytest.raises(CommandError, match="no imported tau2-retail task '999'"):
        _run("env_replay", "tau2-retail", "999", "--gold")
    batch = tmp_path / "batch.jsonl"
    batch.write_text('{"task_id": "5", "actions": []}\n{"task_id": "999", "actions": []}\n')
    with pytest.raises(CommandError, match="'999'"):
        _run("env_replay", "tau2-retail", "--batch", str(batch), "--db-out-dir", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_replay_reads_a_folder_without_an_import(db, tau2_dir):
    out = _run("env_replay", "tau2-retail", "0", "--gold", "--from", str(tau2_dir))
    assert out.startswith("task 0: reward 1 (success)")


def test_the_demo_loads_a_benchmark_set_only_when_its_data_is_present(db, tmp_path, monkeypatch, tau2_dir):
    from evaluation.demo import load_demo

    monkeypatch.setenv(BENCHMARKS_DIR_VARIABLE, str(tmp_path))
    out = io.StringIO()
    load_demo(stdout=out)
    assert "no tau2-retail data at" in out.getvalue() and not Task.objects.filter(environment="tau2-retail").exists()
    monkeypatch.setenv(BENCHMARKS_DIR_VARIABLE, str(tau2_dir.parent))
    load_demo(stdout=out)
    load_demo(stdout=out)
    assert Task.objects.filter(environment="tau2-retail", task_set__name="tau2-retail").count() == 114
    assert out.getvalue().count("task set tau2-retail with 114 tasks") == 1


def test_the_api_queues_an_import_for_an_administrator(client, role_admin_user, operator_user, tau2_dir,
                                                       django_capture_on_commit_callbacks):
    from memweb.models import ApiKey

    _, operator_key = ApiKey.issue(user=operator_user, name="operator")
    url, body = "/api/evaluation/benchmarks/import", {"benchmark": "tau2-retail", "path": str(tau2_dir)}
    refused = client.post(url, json.dumps(body), content_type="application/json",
                          HTTP_AUTHORIZATION=f"Bearer {operator_key}")
    assert refused.status_code == 403
    _, admin_key = ApiKey.issue(user=role_admin_user, name="admin")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {admin_key}"}
    missing = client.post(url, json.dumps({**body, "path": "/no/such/folder"}), content_type="application/json",
                          **headers)
    assert missing.status_code == 422
    assert missing.json()["detail"][0]["msg"] == "/no/such/folder: no such folder on the server"
    with django_capture_on_commit_callbacks(execute=True):  # the job's Celery task runs eagerly here
        answer = client.post(url, json.dumps(body), content_type="application/json", **headers)
    assert answer.status_code == 202
    job = client.get(answer["Location"], **headers).json()
    assert (job["status"], job["result"]["created"]) == ("succeeded", 114)


def test_the_import_page_starts_the_job_for_an_administrator(client, role_admin_user, operator_user, tau2_dir,
                                                             django_capture_on_commit_callbacks):
    from django.urls import reverse

    client.force_login(operator_user)
    assert "Import a benchmark" not in client.get(reverse("evaluation:task_import")).content.decode()
    assert client.post(reverse("evaluation:benchmark_import"), {"benchmark": "tau2-retail"}).status_code == 403
    client.force_login(role_admin_user)
    assert "Import a benchmark" in client.get(reverse("evaluation:task_import")).content.decode()
    wrong = client.post(reverse("evaluation:benchmark_import"), {"benchmark": "tau2-retail", "path": "/no/such"})
    assert wrong.status_code == 422 and "/no/such: no such folder on the server" in wrong.content.decode()
    with django_capture_on_commit_callbacks(execute=True):  # a folder that is no benchmark: the job says why
        client.post(reverse("evaluation:benchmark_import"), {"benchmark": "tau2-retail", "path": str(tau2_dir.parent)})
    failed = Job.objects.get(kind=JOB_KIND)
    assert failed.status == "failed" and "missing tasks.json" in failed.error and not TaskSet.objects.exists()
    failed.delete()
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(reverse("evaluation:benchmark_import"),
                              {"benchmark": "tau2-retail", "path": str(tau2_dir), "task_set": "retail"})
    assert started.status_code == 302
    job = Job.objects.get(kind=JOB_KIND)
    assert started["Location"] == reverse("job_detail", args=[job.pk]) and job.status == "succeeded"
    assert TaskSet.objects.get(name="retail").tasks.count() == 114
