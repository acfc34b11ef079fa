"""The runs JSON API: launch (422 naming fields), list/filter, get with progress and metrics,
cancel, resume, retry, export and import."""
import json

from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_drive
from tests.evaluation.runs.conftest import spec

API = "/api/evaluation/runs"


def post(client, url, payload=None):
    return client.post(url, json.dumps(payload or {}), content_type="application/json")


def test_it_launches_a_run_or_names_the_bad_fields(agent, builtin, operator_user):
    response = post(agent, f"{API}/", spec(trials=2))
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "queued" and body["episodes_total"] == 6 and body["scripted"]
    assert [t["number"] for t in body["progress"]] == [1, 2] and body["metrics"] is None
    assert EvaluationRun.objects.get(pk=body["id"]).created_by == operator_user

    response = post(agent, f"{API}/", spec(trials=2, pass_k=3, task_ids=["nope"]))
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert {"loc": ["body", "payload", "pass_k"], "msg": "Pass^k with k=3 needs at least 3 trials; the run has 2"} \
        in detail
    assert any(d["loc"][-1] == "task_ids" and "nope" in d["msg"] for d in detail)
    response = post(agent, f"{API}/", spec(concurrency=0))
    assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == "concurrency"
    assert EvaluationRun.objects.count() == 1


def test_it_lists_gets_and_acts_on_runs(agent, launch):
    done = run_drive(run=launch(memory_mode="none", name="finished"))
    queued = launch(name="waiting in line")
    listed = agent.get(f"{API}/", {"status": "completed"}).json()
    assert listed["count"] == 1 and listed["items"][0]["name"] == "finished"
    assert agent.get(f"{API}/", {"q": "line"}).json()["items"][0]["id"] == queued.pk
    body = agent.get(f"{API}/{done.pk}").json()
    assert body["metrics"]["per_trial"]["x"] == [1, 2, 3] and body["progress"][2]["episodes_finished"] == 3
    assert agent.get(f"{API}/999999").json() == {"detail": "No evaluation run #999999"}

    assert post(agent, f"{API}/{queued.pk}/cancel").json()["status"] == "cancelled"
    conflict = post(agent, f"{API}/{queued.pk}/cancel")
    assert conflict.status_code == 409 and "can be cancelled" in conflict.json()["detail"]
    assert post(agent, f"{API}/{queued.pk}/resume").json()["status"] == "queued"
    assert post(agent, f"{API}/{done.pk}/resume").status_code == 409
    assert post(agent, f"{API}/{done.pk}/retry").json()["status"] == "completed"  # no errors to retry


def test_it_exports_and_imports(agent, launch):
    run = run_drive(run=launch(memory_mode="none"))
    exported = agent.get(f"{API}/{run.pk}/export").json()
    assert len(exported["episodes"]) == 9
    csv_body = agent.get(f"{API}/{run.pk}/export", {"format": "csv", "part": "metrics"}).content.decode()
    assert csv_body.startswith("series,x,value,low,high")
    created = post(agent, f"{API}/import", exported)
    assert created.status_code == 201 and created.json()["status"] == "completed"
    assert created.json()["metrics"]["pass_k"] == run.metrics["pass_k"]
    bad = post(agent, f"{API}/import", {**exported, "format": "other"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "format"]


def test_it_compares_runs_with_paired_statistics_and_links_the_transcripts(agent, launch):
    baseline, memory = run_drive(run=launch(memory_mode="none")), run_drive(run=launch())
    response = agent.get(f"{API}/compare", {"runs": [memory.pk, baseline.pk], "sort": "task"})
    assert response.status_code == 200
    body = response.json()
    assert body["baseline"] == baseline.pk and body["sort"] == "task"
    pair = body["pairs"][0]
    assert pair["run"] == memory.pk and pair["test"] == "paired sign-flip permutation test over tasks"
    assert pair["success"]["low"] <= pair["success"]["estimate"] <= pair["success"]["high"]
    assert "95 % CI" in pair["verdict"] and [row["k"] for row in pair["pass_k"]] == [1, 2, 3]
    assert [flip["task"] for flip in pair["flips"]] == sorted(flip["task"] for flip in pair["flips"])
    episodes = {e for flip in pair["flips"] for e in flip["a"]["episodes"]}
    assert episodes == set(memory.run_episodes.values_list("episode_id", flat=True))


def test_it_refuses_a_comparison_it_cannot_make(agent, launch):
    one, other = run_drive(run=launch(memory_mode="none")), launch(max_turns=6)
    response = agent.get(f"{API}/compare", {"runs": [one.pk, other.pk]})
    assert response.status_code == 409 and "differ in turn limit (6 against 12)" in response.json()["detail"]
    response = agent.get(f"{API}/compare", {"runs": [one.pk, launch().pk]})
    assert response.status_code == 409 and "no finished trial" in response.json()["detail"]
    assert agent.get(f"{API}/compare", {"runs": [one.pk]}).status_code == 422
    assert agent.get(f"{API}/compare", {"runs": [one.pk, one.pk]}).status_code == 422
    assert agent.get(f"{API}/compare", {"runs": [one.pk, 999999]}).status_code == 404
    assert agent.get(f"{API}/compare", {"runs": [one.pk, other.pk], "sort": "nope"}).status_code == 422
