"""Arms of a comparison differ only in what is compared: every run setting has a role, withholding
is an explicit mode, and the compare page and API refuse, warn about, or narrow to shared tasks
what else differs, and say in the verdict what was measured."""
import pytest
from django.urls import reverse

from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import RunLaunchError, RunsNotComparable, run_drive, run_launch, runs_compare
from evaluation.runs.services.compare import (
    MEMORY_READERS,
    SPEC_READERS,
    WITHHOLDING,
    identity_settings,
    memory_differences,
    memory_settings,
)
from evaluation.runs.services.spec import SETTING_ROLES, RunSpec, SettingRole, settings_of_role
from tests.evaluation.runs.conftest import TASK_IDS, spec

API = "/api/evaluation/runs"


def test_every_run_setting_has_a_role_and_every_identity_setting_is_read_back_from_a_run():
    assert set(SETTING_ROLES) == set(RunSpec.model_fields)
    # Readers are only for settings compared otherwise than as their spec value: the rest need none.
    assert set(SPEC_READERS) <= set(settings_of_role(SettingRole.IDENTITY))
    assert set(MEMORY_READERS) <= set(settings_of_role(SettingRole.MEMORY))
    assert {"reflection style", "review gate", "preset"} <= {setting.label for setting in memory_settings()}
    labels = {setting.label for setting in identity_settings()}
    # The agent's and customer's own fields are read from their configs, so a new one is compared too.
    assert {"agent context window", "agent max tokens", "agent step limit", "customer max tokens", "turn limit",
            WITHHOLDING, "seed", "embedding model", "agent model"} <= labels


@pytest.mark.django_db  # a run row's defaults read the default workspace
def test_the_verdict_names_every_memory_setting_the_runs_differ_in():
    simple = EvaluationRun(memory_mode="memorb", spec={"memory_k": 5, "reflection_style": "simple",
                                                      "reflection_input": "trajectory"})
    oracle = EvaluationRun(memory_mode="memorb", spec={"memory_k": 1, "reflection_style": "structured",
                                                      "reflection_input": "oracle"})
    assert memory_differences(oracle, simple) == [
        "k (1 against 5)", "reflection style (structured against simple)", "reflection input (oracle against trajectory)"]
    assert memory_differences(simple, simple) == []
    # Against no memory, the other run's unused memory settings are not differences.
    assert memory_differences(oracle, EvaluationRun(memory_mode="none")) == ["memory (MemOrb against no memory)"]


def test_withholding_is_only_the_explicit_effect_measurement_mode(builtin, operator_user, client):
    assert RunSpec(name="x").withhold_probability == 0.0
    with pytest.raises(RunLaunchError) as refused:
        run_launch(spec=spec(withhold_probability=0.3), user=operator_user)
    assert [field for field, _ in refused.value.problems] == ["withhold_probability"]
    assert "memory_effects" in refused.value.problems[0][1]
    with pytest.raises(RunLaunchError) as naive:
        run_launch(spec=spec(memory_mode="bm25_dialog", memory_effects=True), user=operator_user)
    assert naive.value.problems == [("memory_effects", "effect measurement needs MemOrb or DMRM memory, "
                                                       "not bm25_dialog")]
    assert not EvaluationRun.objects.exists()
    client.force_login(operator_user)
    assert 'name="memory_effects"' in client.get(reverse("evaluation:run_new")).content.decode()
    posted = {"name": "effects", "task_ids": "shop-app-001", "agent": "scripted", "customer": "agenda",
              "wrong_tool": 0, "wrong_arguments": 0, "result_unused": 0, "memory_mode": "memorb", "memory_k": 5,
              "trials": 1, "seed": 0, "max_turns": 12, "concurrency": 1, "review_gate": "auto",
              "withhold_probability": 0, "memory_effects": "on"}
    assert client.post(reverse("evaluation:run_new"), posted).status_code == 302
    assert EvaluationRun.objects.get(name="effects").run_spec.withhold_probability == 0.2


def test_a_comparison_refuses_another_context_window_and_names_what_it_measured(launch, client, operator_user):
    baseline = run_drive(run=launch(memory_mode="none", name="baseline", trials=2))
    memory = run_drive(run=launch(name="memory", trials=2, seed=1))
    # An old run: its agent config predates the context window and it has no pins; it still compares.
    agent = {k: v for k, v in baseline.spec["agent"].items() if k != "context_tokens"}
    EvaluationRun.objects.filter(pk=baseline.pk).update(pins={}, spec={**baseline.spec, "agent": agent})
    baseline.refresh_from_db()
    verdict = runs_compare(runs=[baseline, memory])["pairs"][0]["verdict"]
    assert ("Measured on replayed tasks (within-task learning: the same tasks every trial), over all 3 tasks: memory "
            "(MemOrb against no memory); equal: ") in verdict
    assert "agent context window, " in verdict and "turn limit" in verdict
    assert verdict.endswith("; not equal: seed (1 against 0).")  # another sample of the same arm: a warning

    EvaluationRun.objects.filter(pk=memory.pk).update(
        spec={**memory.spec, "agent": {**memory.spec["agent"], "context_tokens": 4096}})
    memory.refresh_from_db()
    with pytest.raises(RunsNotComparable) as refused:
        runs_compare(runs=[baseline, memory])
    assert "differ in agent context window (4096 against none)" in str(refused.value) and refused.value.acceptable
    accepted = runs_compare(runs=[baseline, memory], accept_differences=True)["pairs"][0]
    assert "not equal: agent context window (4096 against none); seed (1 against 0)." in accepted["verdict"]
    assert [d["setting"] for d in accepted["differences"] if d["refuses"]] == ["agent context window"]

    client.force_login(operator_user)
    page = client.get(reverse("evaluation:run_compare"), {"runs": [baseline.pk, memory.pk]}).content.decode()
    assert 'id="compare-accept"' in page and "&amp;accept=1" in page
    run_page = client.get(memory.get_absolute_url()).content.decode()
    assert 'data-setting="memory_effects">no' in run_page
    effects = client.get(reverse("evaluation:memory_effects", args=[memory.bank.slug])).content.decode()
    assert 'id="effects-unmeasured"' in effects and f"Run #{memory.pk} memory</a> did not measure effects" in effects


def test_runs_sharing_some_tasks_compare_on_those_when_asked(launch, agent, operator_user):
    whole = run_drive(run=launch(memory_mode="none", trials=1))
    part = run_drive(run=launch(task_ids=TASK_IDS[:2], trials=1))
    refused = agent.get(f"{API}/compare", {"runs": [whole.pk, part.pk]})
    assert refused.status_code == 409 and "with shared_tasks=true" in refused.json()["detail"]
    body = agent.get(f"{API}/compare", {"runs": [whole.pk, part.pk], "shared_tasks": True}).json()
    pair = body["pairs"][0]
    assert pair["shared_tasks"] == 2 and sorted(flip["task"] for flip in pair["flips"]) == sorted(TASK_IDS[:2])
    assert pair["success"]["tasks"] == 2 and "over the 2 tasks the runs share:" in pair["verdict"]
    assert "tasks" not in pair["equal"] and "task set" in pair["equal"]

    agent.force_login(operator_user)
    page = agent.get(reverse("evaluation:run_compare"), {"runs": [whole.pk, part.pk]}).content.decode()
    assert 'id="compare-shared"' in page and "Compare on the 2 shared tasks" in page
    shared = agent.get(reverse("evaluation:run_compare"), {"runs": [whole.pk, part.pk], "shared": "1"})
    assert shared.status_code == 200 and 'id="compare-shared-note"' in shared.content.decode()
    assert [len(chart["per_trial"]["value"]) for chart in shared.context["comparison"]["charts"]] == [1, 1]
    assert "shared=1" in shared.context["runs_query"]
