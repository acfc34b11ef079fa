"""MemOrb's ablations as runs: the k = 1 preset, the complex structured reflection, the No-Memory
baseline's 4k context window, and the same-customer filter named for what it is."""
import json

from django.urls import reverse

from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import RunLaunchError, run_drive, run_launch
from evaluation.runs.services.spec import LLM_CONTEXT_TOKENS, RunSpec
from memweb.models import ApiKey
from orbs.models import Orb
from tests.evaluation.runs.conftest import spec

API = "/api/evaluation/runs/"


def _api(client, user):
    _, secret = ApiKey.issue(user=user, name="ablations")
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
    return client


def test_the_k1_preset_launches_through_the_api_and_the_run_page_says_so(builtin, client, operator_user):
    body = {key: value for key, value in spec(name="k=1").items() if key != "memory_mode"} | {"preset": "memorb_k1"}
    response = _api(client, operator_user).post(API, json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    assert (response.json()["memory_k"], response.json()["preset"]) == (1, "memorb_k1")
    run = EvaluationRun.objects.get(pk=response.json()["id"])
    assert (run.memory_mode, run.run_spec.memory_k, run.bank.retrieval_k) == ("memorb", 1, 1)
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:run_detail", args=[run.pk])).content.decode()
    assert "MemOrb with k = 1 (the paper&#x27;s no-cross-user ablation)" in page and "k=1" in page


def test_a_preset_refuses_a_field_it_sets_given_otherwise(builtin):
    try:
        run_launch(spec=spec(preset="memorb_k1", memory_k=5))
    except RunLaunchError as error:
        assert error.problems == [("memory_k", "the preset memorb_k1 sets memory_k to 1, got 5")]
    else:
        raise AssertionError("the launch was accepted")
    assert not EvaluationRun.objects.exists()


def test_the_same_customer_filter_is_not_called_the_no_cross_user_ablation():
    described = RunSpec.model_fields["same_customer_only"].description
    assert "not the paper's no-cross-user ablation" in described and "memorb_k1" in described


def test_the_launch_form_offers_the_presets_and_the_reflection_style(builtin, client, operator_user):
    client.force_login(operator_user)
    form = client.get(reverse("evaluation:run_new")).content.decode()
    assert 'value="memorb_k1"' in form and 'value="structured"' in form and 'name="agent_context_tokens"' in form
    posted = {"name": "structured from the form", "task_ids": "shop-app-001", "agent": "scripted",
              "wrong_tool": 0.3, "wrong_arguments": 0.3, "result_unused": 0.3, "customer": "agenda",
              "memory_mode": "none", "memory_k": 5, "reflection_style": "simple", "preset": "memorb_structured",
              "approved_only": "on", "per_turn": "on", "trials": 2, "seed": 0, "max_turns": 12, "concurrency": 1,
              "review_gate": "auto", "withhold_probability": 0}
    response = client.post(reverse("evaluation:run_new"), posted)
    run = EvaluationRun.objects.get(name="structured from the form")
    assert response.status_code == 302
    assert (run.run_spec.preset, run.memory_mode, run.run_spec.reflection_style) == ("memorb_structured", "memorb", "structured")


def test_a_structured_run_writes_structured_orbs_and_shows_it(launch, client, operator_user):
    run = run_drive(run=launch(name="structured", reflection_style="structured", trials=1, task_ids=["shop-app-001"]))
    orb = Orb.objects.get(bank=run.bank)
    assert [line.split(":")[0] for line in orb.outcome.splitlines()][-1] == "New plan"
    assert "Root cause:" in orb.outcome and orb.reflector_backend == "scripted"
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:run_detail", args=[run.pk])).content.decode()
    assert 'data-setting="reflection_style">complex structured' in page


def test_every_llm_arm_gets_the_papers_4k_window_with_memory_or_without(builtin, fake_llm, client, operator_user):
    fake_llm.use_for("actor")
    run = run_launch(spec=spec(name="no memory", memory_mode="none", agent={"backend": "llm"}))
    assert run.run_spec.agent.context_tokens == LLM_CONTEXT_TOKENS == 4096
    memory = run_launch(spec=spec(name="memory", agent={"backend": "llm"}))
    assert memory.run_spec.agent.context_tokens == 4096  # memory is the only difference between the arms
    assert run_launch(spec=spec(name="scripted")).run_spec.agent.context_tokens is None
    chosen = run_launch(spec=spec(name="8k", memory_mode="none", agent={"backend": "llm", "context_tokens": 8192}))
    assert chosen.run_spec.agent.context_tokens == 8192
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:run_detail", args=[run.pk])).content.decode()
    assert "context tokens 4096" in page
