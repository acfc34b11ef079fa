"""The evaluation JSON API: tasks, import/export and single episodes, for operators only."""
import json

from evaluation.models import Episode, TaskSet

API = "/api/evaluation"


def post(client, url, payload):
    return client.post(url, json.dumps(payload), content_type="application/json")


def test_it_needs_credentials_and_the_operator_role(client, reviewer_user, builtin):
    assert client.get(f"{API}/tasks").status_code == 401
    client.force_login(reviewer_user)
    assert client.get(f"{API}/tasks").status_code == 403
    assert post(client, f"{API}/episodes", {"task_id": builtin.tasks.first().pk}).status_code == 403
    assert not Episode.objects.exists()


def test_it_lists_filters_and_reads_tasks(agent, builtin):
    body = agent.get(f"{API}/tasks", {"domain": "appliances", "error_kind": "wrong_tool", "limit": 5}).json()
    assert body["count"] == 17 and len(body["items"]) == 5
    assert all(t["domain"] == "appliances" and "wrong_tool" in t["error_kinds"] for t in body["items"])
    task = agent.get(f"{API}/tasks/{body['items'][0]['id']}").json()
    assert task["spec"]["id"] == task["external_id"] and task["task_set"] == builtin.name
    assert agent.get(f"{API}/tasks/999999").json() == {"detail": "No task #999999"}
    assert agent.get(f"{API}/tasks", {"task_set": "nope"}).status_code == 404


def test_it_exports_and_imports_jsonl(agent, builtin):
    exported = agent.get(f"{API}/tasks/export", {"task_set": builtin.name})
    assert exported.status_code == 200 and exported["Content-Type"].startswith("application/x-ndjson")
    lines = exported.content.decode().splitlines()
    created = post(agent, f"{API}/tasks/import", {"task_set": "api-copy", "jsonl": "\n".join(lines[:3])})
    assert created.status_code == 201 and created.json() == {"task_set": "api-copy", "created": 3, "updated": 0,
                                                             "new_versions": 0}
    bad = post(agent, f"{API}/tasks/import", {"task_set": "api-bad", "jsonl": lines[0] + "\n{oops"})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["line"] == 2 and "not valid JSON" in bad.json()["detail"][0]["msg"]
    assert not TaskSet.objects.filter(name="api-bad").exists()


def test_it_runs_one_episode_synchronously(agent, builtin):
    task = builtin.tasks.get(external_id="shop-clo-008")
    response = post(agent, f"{API}/episodes", {"task_id": task.pk, "seed": 3,
                                               "agent": {"error_rates": {"result_unused": 1.0}}})
    assert response.status_code == 201
    body = response.json()
    assert body["scripted"] is True and body["agent_backend"] == "scripted" and body["success"] is False
    assert body["reward_breakdown"]["outputs"] == 0.0 and body["transcript"][0]["role"] == "user"
    again = agent.get(f"{API}/episodes/{body['id']}").json()
    assert again["transcript"] == body["transcript"]
    listed = agent.get(f"{API}/episodes", {"task_id": task.pk}).json()
    assert [e["id"] for e in listed] == [body["id"]]
    trajectory = agent.get(f"{API}/episodes/{body['id']}/trajectory").json()
    assert trajectory["task_id"] == "shop-clo-008" and trajectory["errors"][0]["kind"] == "result_unused"


def test_it_rejects_episode_requests_it_cannot_run(agent, builtin):
    task = builtin.tasks.first()
    assert post(agent, f"{API}/episodes", {"task_id": 999999}).status_code == 404
    bank = post(agent, f"{API}/episodes", {"task_id": task.pk, "memory": {"kind": "memorb", "bank": "nope"}})
    assert bank.status_code == 422 and "memory bank 'nope' does not exist" in bank.json()["detail"][0]["msg"]
    rates = post(agent, f"{API}/episodes", {"task_id": task.pk, "agent": {"error_rates": {"typo": 0.5}}})
    assert rates.status_code == 422
    assert post(agent, f"{API}/episodes", {"task_id": task.pk, "max_turns": 0}).status_code == 422
    assert not Episode.objects.exists()
