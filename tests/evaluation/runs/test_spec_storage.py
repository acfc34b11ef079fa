"""A run's settings are one stored value (issue 27): the spec and its version on the run, old runs
given theirs by the migration, version-1 export files still imported, and every place that shows,
exports or compares settings derived from the spec, so that a new setting needs no other edit."""
import json
import re

import pydantic
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from evaluation.runs import forms as run_forms
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_export_json, run_import
from evaluation.runs.services import spec as spec_module
from evaluation.runs.services.compare import identity_settings
from evaluation.runs.services.spec import (
    SETTING_ROLES,
    SPEC_VERSION,
    RunSpec,
    SettingRole,
    StoredSpecError,
    spec_panel,
    spec_upgrade,
)
from evaluation.runs.services.transfer import FORMAT_VERSION, RunImportError

BEFORE = [("evaluation", "0026_run_reflection_input")]
AFTER = [("evaluation", "0028_run_spec_one_value")]


class _WithPatience(RunSpec):
    """A spec with one more setting, as a developer adding one would write it."""

    customer_patience: int = pydantic.Field(default=3, ge=1, le=9, description="Turns a customer waits for a fix")


@pytest.fixture
def new_setting(monkeypatch):
    """The spec module's RunSpec with one more setting and its role: the one file a setting needs
    besides its use."""
    monkeypatch.setattr(spec_module, "RunSpec", _WithPatience)
    monkeypatch.setattr(run_forms, "RunSpec", _WithPatience)
    monkeypatch.setitem(SETTING_ROLES, "customer_patience", SettingRole.IDENTITY)
    return "customer_patience"


def test_a_new_setting_reaches_the_panel_the_export_the_comparison_and_the_form(new_setting, db):
    run = EvaluationRun.objects.create(name="patient", spec={new_setting: 7})
    other = EvaluationRun.objects.create(name="default")
    assert run.run_spec.customer_patience == 7 and other.run_spec.customer_patience == 3

    identity = next(group for group in spec_panel(run.run_spec) if group["role"] == SettingRole.IDENTITY)
    shown = {setting["name"]: setting for setting in identity["settings"]}
    assert (shown[new_setting]["value"], shown[new_setting]["description"]) == ("7", "Turns a customer waits for a fix")

    assert run_export_json(run=run)["run"]["spec"][new_setting] == 7

    [reader] = [setting for setting in identity_settings() if setting.label == "customer patience"]
    assert (reader.read(run), reader.read(other)) == (7, 3)

    form = run_forms.RunLaunchForm({"name": "launched", "agent": "scripted", "customer": "agenda", "wrong_tool": 0,
                                    "wrong_arguments": 0, "result_unused": 0, "memory_mode": "none", "memory_k": 5,
                                    "trials": 1, "seed": 0, "max_turns": 12, "concurrency": 1, "review_gate": "auto",
                                    new_setting: 5}, workspace=run.workspace)
    assert [field.name for field in form.generic_fields] == [new_setting]
    assert form.is_valid(), form.errors
    assert form.spec()[new_setting] == 5


def test_a_stored_spec_of_an_unknown_version_or_shape_is_refused_by_name():
    with pytest.raises(StoredSpecError, match=f"spec version {SPEC_VERSION + 1} is not one this memweb reads"):
        spec_upgrade({"name": "x"}, SPEC_VERSION + 1)
    with pytest.raises(StoredSpecError, match="memory_k"):
        spec_upgrade({"name": "x", "memory_k": 0}, SPEC_VERSION)


def test_a_launched_run_keeps_its_spec_in_force_and_the_api_carries_it(launch, agent):
    run = launch(name="stored", agent={"backend": "scripted", "error_rates": {"wrong_tool": 0.5}},
                 evaluation_mode="train_test", memory_mode="dmrm", trials=4)
    assert run.spec_version == SPEC_VERSION
    assert run.spec["train_trials"] == 2  # what launch resolved (half the trials), not "empty"
    assert run.spec["agent"]["error_rates"] == {"wrong_tool": 0.5}
    answer = agent.get(f"/api/evaluation/runs/{run.pk}").json()
    assert (answer["spec"], answer["spec_version"]) == (run.spec, SPEC_VERSION)
    assert (answer["train_trials"], answer["trials"], answer["evaluation_mode"]) == (2, 4, "train_test")


def _run_file(header: dict) -> dict:
    episodes = [{"task_id": task, "trial": trial, "status": "done", "success": trial == 2, "reward": 1.0}
                for task in ("a-1", "b-2") for trial in (1, 2)]
    return {"format": "memweb.evaluation-run", "format_version": 1, "run": header, "episodes": episodes}


def test_a_version_1_file_imports_with_the_spec_its_settings_say(db, client, operator_user):
    header = {"name": "elsewhere", "trials": 2, "seed": 9, "memory_mode": "memorb", "memory_k": 3,
              "same_customer_only": True, "per_turn": False, "agent_backend": "external",
              "agent_config": {"backend": "external", "model": "theirs", "max_steps": 5},
              "concurrency": 500, "task_domain": "apparel"}
    run = run_import(data=_run_file(header))
    spec = run.run_spec
    assert (spec.trials, spec.seed, spec.memory_k, spec.same_customer_only, spec.per_turn, spec.domain) == (
        2, 9, 3, True, False, "apparel")
    # Its agent is not memweb's: the fields memweb knows are kept, the backend stays the run's column.
    assert (spec.agent.max_steps, run.agent_backend) == (5, "external")
    # A file of version 1 took concurrency up to 32767; a spec does not: that setting is at its default, and said so.
    assert spec.concurrency == RunSpec.model_fields["concurrency"].default
    assert run.pins["import"]["settings_defaulted"] == ["concurrency"]
    assert run.spec["memory_k"] == 3 and run.spec_version == SPEC_VERSION

    client.force_login(operator_user)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'data-setting="same_customer_only">yes' in page and 'data-setting="memory_k">3' in page
    exported = json.loads(json.dumps(run_export_json(run=run)))
    assert exported["format_version"] == FORMAT_VERSION and exported["run"]["spec"]["memory_k"] == 3
    assert exported["run"]["same_customer_only"] is True  # the version-1 keys are still there for their readers
    again = run_import(data=exported)
    assert run_import(data=exported).run_spec == again.run_spec == spec


def test_a_version_2_file_with_a_bad_spec_names_the_setting(db):
    data = {**_run_file({"name": "bad", "spec": {"name": "bad", "trials": 0}, "spec_version": SPEC_VERSION}),
            "format_version": 2}
    with pytest.raises(RunImportError) as refused:
        run_import(data=data)
    assert refused.value.problems[0][0] == "run.spec" and "trials" in refused.value.problems[0][1]
    assert not EvaluationRun.objects.exists()


def _migrate(executor: MigrationExecutor, target: list):
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def test_the_migration_gives_old_runs_the_spec_their_columns_say_and_reverses(db):
    executor = MigrationExecutor(connection)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # so ALTER TABLE waits on no deferred checks
    old = _migrate(executor, BEFORE)
    OldRun = old.get_model("evaluation", "EvaluationRun")
    task_set = old.get_model("evaluation", "TaskSet").objects.create(name="old tasks")
    launched = OldRun.objects.create(
        name="launched long ago", task_set=task_set, task_domain="appliances", memory_mode="dmrm", memory_k=4,
        memory_per_turn=False, withhold_probability=0.25, trials=6, seed=11, max_turns=9, review_gate="wait",
        agent_config={"backend": "scripted", "error_rates": {"wrong_tool": 0.2}}, preset="dmrm_n1",
        dmrm_config={"alpha": 0.5, "gamma": 0.9, "c_max": 512, "n_success": 1, "bank_only_key": True},
        evaluation_mode="train_test", split_rule="task_set", train_trials=4, reflection_input="oracle",
        feedback_enabled=True, feedback_calibration="realised", bank_copied_from="Appliance memory")
    imported = OldRun.objects.create(name="from elsewhere", imported=True, agent_backend="external",
                                     agent_config={"backend": "external"}, trials=2, concurrency=900)

    new = _migrate(executor, AFTER)
    NewRun = new.get_model("evaluation", "EvaluationRun")
    launched_spec = NewRun.objects.get(pk=launched.pk).spec
    assert {name: launched_spec[name] for name in (
        "task_set", "domain", "memory_mode", "memory_k", "per_turn", "memory_effects", "withhold_probability",
        "trials", "seed", "max_turns", "review_gate", "preset", "evaluation_mode", "split_rule", "train_trials",
        "reflection_input", "feedback_enabled", "feedback_calibration", "bank_source")} == {
        "task_set": "old tasks", "domain": "appliances", "memory_mode": "dmrm", "memory_k": 4, "per_turn": False,
        "memory_effects": True, "withhold_probability": 0.25, "trials": 6, "seed": 11, "max_turns": 9,
        "review_gate": "wait", "preset": "dmrm_n1", "evaluation_mode": "train_test", "split_rule": "task_set",
        "train_trials": 4, "reflection_input": "oracle", "feedback_enabled": True, "feedback_calibration": "realised",
        "bank_source": "Appliance memory"}
    assert launched_spec["agent"]["error_rates"] == {"wrong_tool": 0.2}
    assert (launched_spec["dmrm"]["n_success"], launched_spec["dmrm"]["c_max"]) == (1, 512)
    imported_spec = NewRun.objects.get(pk=imported.pk).spec
    assert imported_spec["agent"]["backend"] == "scripted" and imported_spec["concurrency"] == 4
    assert imported_spec["trials"] == 2

    back = _migrate(executor, BEFORE).get_model("evaluation", "EvaluationRun").objects.get(pk=launched.pk)
    assert (back.memory_k, back.memory_per_turn, back.trials, back.train_trials, back.split_rule, back.preset) == (
        4, False, 6, 4, "task_set", "dmrm_n1")
    _migrate(executor, executor.loader.graph.leaf_nodes())
    assert EvaluationRun.objects.get(pk=launched.pk).run_spec.memory_k == 4


def test_the_run_page_lists_each_setting_once_by_role(launch, client, operator_user):
    run = launch(name="panel")
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:run_detail", args=[run.pk])).content.decode()
    for name, info in RunSpec.model_fields.items():
        assert page.count(f'data-setting="{name}"') == (0 if info.exclude else 1), name  # a secret is never shown
    assert page.index('id="settings-memory"') < page.index('data-setting="memory_k"') < page.index(
        'id="settings-identity"') < page.index('data-setting="seed"')


def test_the_run_page_marks_the_settings_its_memory_layer_ignores(launch, client, operator_user):
    client.force_login(operator_user)
    pages = {mode: client.get(launch(name=mode, memory_mode=mode).get_absolute_url()).content.decode()
             for mode in ("none", "memorb", "bm25_dialog")}
    def unused(page: str, name: str) -> bool:
        return re.search(f'data-setting="{name}" class="muted">[^<]*<em class="setting-unused">', page) is not None
    assert unused(pages["none"], "review_gate") and unused(pages["none"], "memory_k")
    assert not unused(pages["memorb"], "review_gate") and not unused(pages["memorb"], "reflection_input")
    assert unused(pages["bm25_dialog"], "reflection_input") and not unused(pages["bm25_dialog"], "memory_k")
    assert not unused(pages["none"], "seed")  # identity settings hold whatever the memory


def test_a_stored_spec_written_around_memweb_still_opens_its_run(db, client, operator_user):
    run = EvaluationRun.objects.create(name="written by hand", spec={"review_gate": "<b>never</b>", "seed": 4})
    assert (run.run_spec.review_gate, run.run_spec.seed, run.spec_unreadable) == ("auto", 4, ["review_gate"])
    client.force_login(operator_user)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="run-spec-unreadable"' in page and "shown at their defaults: review_gate" in page
