"""GET /api/evaluation/runs/compare/transcripts: the side-by-side page's data as JSON (both sides'
turns with memories and tool calls, what each turn differs in, the first difference, the trials and
the neighbouring tasks), a 404 naming what is missing, and another workspace's runs unknown."""
import pytest
from django.urls import reverse

from evaluation.runs.services import run_drive
from evaluation.runs.services.transcripts import transcripts_compare, turn_parts
from memweb.models import ApiKey, Workspace
from memweb.roles import Role
from tests.evaluation.runs.conftest import TASK_IDS

URL = "/api/evaluation/runs/compare/transcripts"


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


def test_it_answers_what_the_page_shows(operator, launch):
    baseline, memory = run_drive(run=launch(memory_mode="none", name="baseline")), run_drive(run=launch(name="memory"))
    task = TASK_IDS[0]
    answer = operator.get(URL, {"a": memory.pk, "b": baseline.pk, "task": task})
    assert answer.status_code == 200
    body = answer.json()
    page = transcripts_compare(run_a=memory, run_b=baseline, task_key=task)
    assert (body["task"], body["trial"], body["trials"]) == (task, page["trial"], [1, 2, 3])
    assert (body["shared"], body["position"], body["previous"], body["next"]) == (
        page["shared"], page["position"], page["previous"], page["next"])
    assert body["a"]["episode"]["id"] == page["a"]["episode"].pk and body["b"]["episode"]["id"] == page["b"]["episode"].pk
    assert body["a"]["run"] | {"url": None} == {"id": memory.pk, "name": "memory", "status": memory.status,
                                                "memory_mode": memory.memory_mode, "scripted": True,
                                                "agent_uses_gold": memory.agent_uses_gold, "url": None}
    assert body["rows"] == [{"number": row["number"], "differs": row["differs"]} for row in page["rows"]]
    expected_first = page["first_difference"]
    assert body["first_difference"] == (
        {"number": expected_first["number"], "differs": expected_first["differs"]} if expected_first else None)
    # Each turn carries its events (customer, tool calls with results, reply) and the memory text injected.
    for letter in "ab":
        turns = page[letter]["turns"]
        assert [t["number"] for t in body[letter]["turns"]] == [t["number"] for t in turns]
        assert [t["events"] for t in body[letter]["turns"]] == [t["events"] for t in turns]
        assert [t["memories"] for t in body[letter]["turns"]] == [turn_parts(t)["memories"] for t in turns]
    injected = [block for t in body["a"]["turns"] for block in t["memories"]]
    assert injected and not any(t["memories"] for t in body["b"]["turns"])  # the memory run was given memories
    tools = [event for t in body["a"]["turns"] for event in t["events"] if event["type"] == "tool"]
    assert tools and {"name", "arguments", "result"} <= set(tools[0])
    assert body["url"] == f"{reverse('evaluation:run_compare_transcripts')}?a={memory.pk}&b={baseline.pk}" \
                          f"&task={task}&trial={page['trial']}"


def test_it_switches_trial_and_says_what_is_missing_with_a_404(operator, launch):
    whole = run_drive(run=launch(memory_mode="none", trials=2))
    part = run_drive(run=launch(task_ids=TASK_IDS[:2], trials=2))
    pair = {"a": part.pk, "b": whole.pk}
    second = operator.get(URL, {**pair, "task": TASK_IDS[0], "trial": "2"}).json()
    assert second["trial"] == 2 and second["a"]["episode"]["id"] == part.run_episodes.get(
        task_key=TASK_IDS[0], trial__number=2).episode_id
    cases = [({"a": 999999, "b": whole.pk, "task": TASK_IDS[0]}, "run A: no run #999999 in this workspace", []),
             ({"b": whole.pk, "task": TASK_IDS[0]}, "run A: no run given", []),
             ({**pair, "task": "shop-clo-008"}, f"run #{part.pk} has no transcript of task shop-clo-008",
              sorted(TASK_IDS[:2])),
             ({**pair, "task": TASK_IDS[0], "trial": "9"}, "trial 9 of task shop-app-001 was played by neither run",
              []),
             ({**pair, "task": TASK_IDS[0], "trial": "x"}, "trial 'x' is not a trial number", [])]
    for params, message, shared in cases:
        answer = operator.get(URL, params)
        assert answer.status_code == 404 and message in answer.json()["detail"], params
        assert answer.json()["shared"] == shared, params


def test_runs_of_another_workspace_are_unknown_by_session_and_by_key(client, launch, user_for_role):
    baseline, memory = run_drive(run=launch(memory_mode="none", trials=1)), run_drive(run=launch(trials=1))
    elsewhere = user_for_role(Role.OPERATOR, workspace=Workspace.objects.create(slug="elsewhere", name="Elsewhere"))
    params = {"a": memory.pk, "b": baseline.pk, "task": TASK_IDS[0]}
    client.force_login(elsewhere)
    by_session = client.get(URL, params)
    assert by_session.status_code == 404 and by_session.json()["detail"] == f"run A: no run #{memory.pk} in this workspace"
    client.logout()
    secret = ApiKey.issue(user=elsewhere, name="elsewhere", workspace=elsewhere.memberships.get().workspace)[1]
    by_key = client.get(URL, params, headers={"Authorization": f"Bearer {secret}"})
    assert by_key.status_code == 404 and memory.name not in by_key.content.decode()
