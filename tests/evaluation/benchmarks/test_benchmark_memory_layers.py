"""Memory on the public benchmarks: DMRM and a naive-RAG baseline run on ECom-Bench and τ²-bench retail
through the API like MemOrb (tests/evaluation/benchmarks/test_tau2_runs.py), each completing with
per-trial success and Pass^k; the compare page compares memory against none on a benchmark, and
refuses to compare runs of two benchmarks (their arms differ in more than memory)."""
import json

import pytest
from django.urls import reverse

from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_drive
from evaluation.services.benchmarks import benchmark_import
from memweb.models import Workspace, default_workspace_id
from tests.evaluation.benchmarks.ecom_support import ecom_folder
from tests.evaluation.runs.conftest import prepared

RUNS = "/api/evaluation/runs"


@pytest.fixture
def task_sets(db, tau2_dir):
    workspace = Workspace.objects.get(pk=default_workspace_id())
    return {name: benchmark_import(benchmark=name, path=str(folder), workspace=workspace).task_set
            for name, folder in (("tau2-retail", tau2_dir), ("ecom-bench", ecom_folder()))}


def _played(agent, task_set, memory_mode: str) -> EvaluationRun:
    answer = agent.post(f"{RUNS}/", json.dumps({
        "name": f"{task_set.name} {memory_mode}", "task_set": task_set.name, "task_ids": ["0", "1"], "trials": 2,
        "pass_k": 2, "memory_mode": memory_mode, "agent": {"error_rates": {"wrong_tool": 0.5}}}),
        content_type="application/json")
    assert answer.status_code == 201, answer.content
    return run_drive(run=prepared(EvaluationRun.objects.get(pk=answer.json()["id"])))


@pytest.mark.parametrize(("benchmark", "memory_mode"), [("ecom-bench", "dmrm"), ("ecom-bench", "bm25_message"),
                                                        ("tau2-retail", "dmrm"), ("tau2-retail", "embedder_dialog")])
def test_dmrm_and_naive_rag_run_on_the_benchmarks(task_sets, agent, benchmark, memory_mode):
    run = _played(agent, task_sets[benchmark], memory_mode)
    body = agent.get(f"{RUNS}/{run.pk}").json()
    assert body["status"] == "completed" and body["episodes_total"] == 4
    assert body["metrics"]["per_trial"]["x"] == [1, 2] and len(body["metrics"]["pass_k"]["value"]) == 2


def test_the_compare_page_compares_memory_on_a_benchmark_and_refuses_two_benchmarks(task_sets, agent, client,
                                                                                    operator_user):
    memorb, plain = _played(agent, task_sets["ecom-bench"], "memorb"), _played(agent, task_sets["ecom-bench"], "none")
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:run_compare"), {"runs": [memorb.pk, plain.pk]})
    assert page.status_code == 200, page.content.decode()[:2000]
    assert "ecom-bench memorb" in page.content.decode() and "ecom-bench none" in page.content.decode()
    gold_note = f"Run #{memorb.pk} ecom-bench memorb was played by the gold-replay agent (uses the gold answer)"
    assert gold_note in page.content.decode()
    retail = _played(agent, task_sets["tau2-retail"], "none")
    refused = client.get(reverse("evaluation:run_compare"), {"runs": [memorb.pk, retail.pk]})
    assert refused.status_code == 409 and "task" in refused.content.decode()  # arms differ in more than memory


def test_every_page_showing_a_benchmark_runs_results_labels_its_gold_replay_agent(task_sets, agent, client,
                                                                                  operator_user, builtin):
    gold = _played(agent, task_sets["ecom-bench"], "none")
    shop = run_drive(run=prepared(EvaluationRun.objects.get(pk=agent.post(f"{RUNS}/", json.dumps({
        "name": "shop none", "task_set": builtin.name, "task_ids": ["shop-app-001"], "trials": 1,
        "memory_mode": "none"}), content_type="application/json").json()["id"])))
    label = "gold-replay agent (uses the gold answer)"
    client.force_login(operator_user)
    runs_list = client.get(reverse("evaluation:run_list")).content.decode()
    rows = {run.pk: runs_list.split(f'href="{run.get_absolute_url()}"', 1)[1].split("</tr>", 1)[0] for run in (gold, shop)}
    assert label in rows[gold.pk] and label not in rows[shop.pk]  # the shop's scripted agent reads no gold answer
    board = client.get(reverse("evaluation:memory_layers_board"), {"task_set": task_sets["ecom-bench"].name})
    assert label in board.content.decode()
    shop_board = client.get(reverse("evaluation:memory_layers_board"), {"task_set": builtin.name})
    assert shop_board.status_code == 200 and label not in shop_board.content.decode()
