"""τ²-bench retail tasks in memweb's machinery: a small offline MemOrb run through the API (the
gold-replay agent, labelled as using gold, and the facts-stating customer) completing with Pass^k and
episode pages showing the reward's components; and the LLM path against the fake OpenAI server
(the agent gets policy.md and the 16 tools; the customer plays the task's scenario)."""
import json

import pytest
from django.urls import reverse

from evaluation.models import Episode, Task
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_drive
from evaluation.services.benchmarks import benchmark_import
from evaluation.services.episodes import episode_run
from memweb.models import Workspace, default_workspace_id
from tests.evaluation.runs.conftest import prepared

RUNS = "/api/evaluation/runs"
TASK_IDS = ["0", "1", "5"]  # train tasks whose gold calls change the database


@pytest.fixture
def retail(db, tau2_dir):
    return benchmark_import(benchmark="tau2-retail", path=str(tau2_dir),
                            workspace=Workspace.objects.get(pk=default_workspace_id())).task_set


def test_an_offline_memorb_run_on_tau2_tasks_completes_with_pass_k(retail, agent, operator_user, client):
    answer = agent.post(f"{RUNS}/", json.dumps({
        "name": "tau2 memorb", "task_set": retail.name, "task_ids": TASK_IDS, "trials": 3, "pass_k": 3,
        "memory_mode": "memorb", "agent": {"error_rates": {"wrong_tool": 0.5, "wrong_arguments": 0.5}}}),
        content_type="application/json")
    assert answer.status_code == 201, answer.content
    run = run_drive(run=prepared(EvaluationRun.objects.get(pk=answer.json()["id"])))
    body = agent.get(f"{RUNS}/{run.pk}").json()
    assert body["status"] == "completed" and body["episodes_total"] == 9
    metrics = body["metrics"]
    assert metrics["per_trial"]["x"] == [1, 2, 3] and metrics["pass_k"]["x"] == [1, 2, 3]
    assert len(metrics["pass_k"]["value"]) == 3 and metrics["pass_k"]["value"][0] >= metrics["pass_k"]["value"][2]
    episodes = Episode.objects.filter(task__environment="tau2-retail")
    assert episodes.count() == 9
    assert {e.agent_backend for e in episodes} == {"scripted: gold-replay agent with errors (uses the gold answer)"}
    assert all(e.agent_scripted and e.customer_scripted for e in episodes)
    assert all(set(e.reward_breakdown) >= {"db", "communicate", "nl_assertions_not_judged"} for e in episodes)
    failed = [e for e in episodes if not e.success]
    assert failed and all(e.reward_breakdown["db"] == 0.0 and e.committed_errors for e in failed)

    client.force_login(operator_user)
    run_page = client.get(reverse("evaluation:run_detail", args=[run.pk])).content.decode()
    assert 'id="run-gold-agent">gold-replay agent (uses the gold answer)' in run_page
    failed_db = sum(e.reward_breakdown["db"] == 0.0 for e in episodes)
    assert f'component=db">db</a></th><td class="num">{failed_db}</td><td class="num">9</td>' in run_page
    page = client.get(reverse("evaluation:episode_detail", args=[failed[0].pk])).content.decode()
    assert "uses the gold answer" in page and "natural-language assertions" in page
    assert ">db<" in page and ">communicate<" in page
    listed = client.get(reverse("evaluation:episode_list"), {"component": "db"}).content.decode()
    assert 'value="db" selected' in listed and reverse("evaluation:episode_detail", args=[failed[0].pk]) in listed


def test_the_llm_agent_gets_the_policy_and_tools_and_the_customer_its_scenario(retail, fake_llm):
    fake_llm.use_for("actor", "user_simulator")
    task = Task.objects.get(task_set=retail, external_id="5")
    instructions = task.spec["user_scenario"]["instructions"]
    fake_llm.reply_text(f"Hi, {instructions['known_info']}")  # the customer opens
    for call in task.spec["gold_calls"]:
        fake_llm.reply_tool_call(call["name"], call["arguments"])
    fake_llm.reply_text("Your return is requested.")
    fake_llm.reply_text("Thanks! ###STOP###")
    episode = episode_run(task=task, agent_config={"backend": "llm"}, customer_config={"backend": "llm"}, seed=0)
    assert episode.success and episode.reward_breakdown["db"] == 1.0
    assert episode.agent_backend == "llm:fake-model" and not episode.agent_scripted
    customer_prompt, agent_request = fake_llm.chat_requests[0], fake_llm.chat_requests[1]
    assert instructions["reason_for_call"] in customer_prompt["messages"][0]["content"]
    assert "# Retail agent policy" in agent_request["messages"][0]["content"]
    assert len(agent_request["tools"]) == 16
    tool_results = [m for m in episode.transcript if m["role"] == "tool"]
    assert [m["ok"] for m in tool_results] == [True] * len(task.spec["gold_calls"])


def test_a_held_out_run_uses_the_benchmarks_train_and_test_split(retail, agent):
    from evaluation.runs.models import RunEpisode

    answer = agent.post(f"{RUNS}/", json.dumps({
        "name": "tau2 held out", "task_set": retail.name, "task_ids": ["0", "1", "5"], "trials": 2,
        "memory_mode": "memorb", "evaluation_mode": "held_out", "split_rule": "task_set",
        "agent": {"error_rates": {"wrong_tool": 0.5}}}), content_type="application/json")
    assert answer.status_code == 201, answer.content
    run = run_drive(run=prepared(EvaluationRun.objects.get(pk=answer.json()["id"])))
    assert run.status == "completed" and run.task_splits == {"0": "train", "1": "train", "5": "test"}
    rows = RunEpisode.objects.filter(run=run)
    assert not rows.filter(split="test", orb__isnull=False).exists()  # memory learns from train only
    assert run.metrics["split"] == "test" and list(run.metrics["matrix"]) == ["5"]
