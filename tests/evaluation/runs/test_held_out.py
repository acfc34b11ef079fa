"""Held-out tasks (issue 28): a run's tasks split into train (memory learns from them) and test
(success is measured on them), the DMRM train/test preset, and held-out runs through the run page,
the API, export, import and comparison; replay runs stay as they were."""
import copy
import json

import pytest
from django.urls import reverse

from evaluation.runs.models import EvaluationRun, RunEpisode
from evaluation.runs.services import (
    RunImportError,
    RunLaunchError,
    RunsNotComparable,
    curve_launch_inline,
    run_drive,
    run_export_json,
    run_import,
    run_import_parse,
    run_launch,
    runs_compare,
)
from evaluation.runs.services.splits import _by_fraction
from memweb.models import ApiKey
from orbs.dmrm.models import DMRMRetrievalLog, ExperienceTrajectory
from tests.evaluation.runs.conftest import spec

# The built-in set labels these: shop-app-001 and shop-clo-008 train, shop-app-023 test.
LABELLED = {"shop-app-001": "train", "shop-app-023": "test", "shop-clo-008": "train"}


def _api(client, user):
    _, secret = ApiKey.issue(user=user, name="held-out")
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
    return client


def _problems(**overrides) -> list[tuple[str, str]]:
    with pytest.raises(RunLaunchError) as refused:
        run_launch(spec=spec(**overrides))
    return refused.value.problems


def test_it_learns_from_the_train_split_only_and_reports_the_test_split_everywhere(launch, client, operator_user):
    run = run_drive(run=launch(evaluation_mode="held_out", split_rule="task_set", feedback_enabled=True))
    assert run.status == EvaluationRun.Status.COMPLETED and run.task_splits == LABELLED
    assert run.memory_layer.feedback_into_memory(run)
    rows = RunEpisode.objects.filter(run=run)
    assert {(row.task_key, row.split) for row in rows} == set(LABELLED.items()) and rows.count() == 9
    assert rows.filter(split="train", orb__isnull=False).count() == 6
    assert not rows.filter(split="test", orb__isnull=False).exists()
    assert run.metrics["split"] == "test" and list(run.metrics["matrix"]) == ["shop-app-023"]
    assert sorted(run.metrics["train"]["matrix"]) == ["shop-app-001", "shop-clo-008"]

    # The off-policy curve writes the train split's feedback logs and plays the test split.
    curve = curve_launch_inline(run=run)
    assert curve.test_task_pks == [rows.get(split="test", trial__number=1).task_id]
    assert (len(curve.feedback_episode_ids), curve.batch_size) == (6, 2)

    client.force_login(operator_user)
    page = client.get(reverse("evaluation:run_detail", args=[run.pk])).content.decode()
    assert "held-out tasks (2 train / 1 test)" in page and 'id="run-splits"' in page
    detail = _api(client, operator_user).get(f"/api/evaluation/runs/{run.pk}").json()
    assert (detail["evaluation_mode"], detail["task_splits"]) == ("held_out", LABELLED)
    assert detail["measured"].startswith("held-out tasks")

    exported = json.loads(json.dumps(run_export_json(run=run)))
    assert {line["split"] for line in exported["episodes"]} == {"train", "test"}
    imported = run_import(data=exported, user=operator_user)
    assert (imported.run_spec.evaluation_mode, imported.task_splits) == ("held_out", LABELLED)
    assert imported.metrics["matrix"] == run.metrics["matrix"]
    assert imported.metrics["train"]["matrix"] == run.metrics["train"]["matrix"]
    again = run_import(data=exported, user=operator_user)  # a played run and an import differ in task set
    for view, tasks in (("test", {"shop-app-023"}), ("train", {"shop-app-001", "shop-clo-008"})):
        compared = _api(client, operator_user).get(
            "/api/evaluation/runs/compare", {"runs": [imported.pk, again.pk], "view": view}).json()
        assert (compared["view"], compared["views"]) == (view, ["test", "train"])
        assert {row["task"] for row in compared["pairs"][0]["flips"]} == tasks


def test_the_dmrm_train_test_preset_trains_on_some_tasks_then_tests_on_the_others_with_memory_frozen(launch):
    run = run_drive(run=launch(preset="dmrm_train_test", memory_mode="dmrm", trials=3, train_trials=2, seed=3))
    spec = run.run_spec
    assert (spec.evaluation_mode, run.memory_mode, spec.train_trials, spec.split_rule) == ("train_test", "dmrm", 2,
                                                                                          "fraction")
    assert run.status == EvaluationRun.Status.COMPLETED
    tests = {key for key, split in run.task_splits.items() if split == "test"}
    trains = set(run.task_splits) - tests
    assert tests and trains and run.episodes_total == 2 * len(trains) + len(tests) == run.episodes_finished
    played = {(row.trial.number, row.task_key) for row in run.run_episodes.select_related("trial")}
    assert played == {(n, key) for n in (1, 2) for key in trains} | {(3, key) for key in tests}
    test_refs = {f"evaluation-episode:{pk}" for pk in run.run_episodes.filter(split="test").values_list(
        "episode_id", flat=True)}
    written = set(ExperienceTrajectory.objects.filter(bank=run.bank).values_list("trajectory_id", flat=True))
    assert written and not written & test_refs
    assert not DMRMRetrievalLog.objects.filter(episode_ref__in=test_refs).exists()
    assert run.trial_rows.get(number=3).experiences_written == 0
    assert (run.metrics["trials"], run.metrics["train"]["trials"]) == (1, 2)


def test_a_launch_names_each_unusable_held_out_setting(builtin):
    assert _problems(train_trials=2) == [("train_trials", "is only used when evaluation_mode is train_test")]
    assert _problems(evaluation_mode="train_test", train_trials=3) == [
        ("train_trials", "must be less than trials (3): the test split needs at least one trial, got 3")]
    assert _problems(evaluation_mode="train_test", pass_k=3) == [
        ("pass_k", "Pass^k with k=3 needs at least 3 test trials; the run has 2 (trials 3 minus train_trials 1)")]
    only_train = _problems(evaluation_mode="held_out", split_rule="task_set", task_ids=["shop-app-001",
                                                                                         "shop-clo-008"])
    assert only_train == [("split_rule", "held-out tasks need at least one train and one test task; the 2 "
                                         "selected tasks give 2 train and 0 test (rule task_set)")]
    with pytest.raises(RunLaunchError):
        run_launch(spec=spec(preset="dmrm_train_test", evaluation_mode="held_out"))
    assert not EvaluationRun.objects.exists()


def test_the_launch_form_launches_a_held_out_run(builtin, client, operator_user):
    client.force_login(operator_user)
    assert 'value="train_test"' in client.get(reverse("evaluation:run_new")).content.decode()
    posted = {"name": "held out from the form", "task_ids": " ".join(LABELLED), "agent": "scripted", "wrong_tool": 0.3,
              "wrong_arguments": 0.3, "result_unused": 0.3,
              "customer": "agenda", "memory_mode": "memorb", "memory_k": 5, "trials": 2, "seed": 0, "max_turns": 12,
              "concurrency": 1, "review_gate": "auto", "evaluation_mode": "train_test", "split_rule": "task_set",
              "train_trials": 2}
    refused = client.post(reverse("evaluation:run_new"), posted)
    assert refused.status_code == 422 and "the test split needs at least one trial" in refused.content.decode()
    assert client.post(reverse("evaluation:run_new"), posted | {"trials": 3}).status_code == 302
    run = EvaluationRun.objects.get(name="held out from the form")
    assert (run.run_spec.evaluation_mode, run.run_spec.train_trials, run.task_splits, run.episodes_total) == (
        "train_test", 2, LABELLED, 2 * 2 + 1)


def test_the_fraction_rule_holds_out_a_seeded_share_of_each_domain():
    tasks = [(f"a{n}", "appliances") for n in range(10)] + [(f"c{n}", "clothing") for n in range(4)]
    split = _by_fraction(tasks, 0.3, seed=1)
    assert split == _by_fraction(list(reversed(tasks)), 0.3, seed=1)  # the seed decides, not the order
    tests = sorted(key for key, value in split.items() if value == "test")
    assert sum(key.startswith("a") for key in tests) == 3 and sum(key.startswith("c") for key in tests) == 1
    assert tests != sorted(key for key, value in _by_fraction(tasks, 0.3, seed=2).items() if value == "test")


def test_an_old_export_imports_as_replay_and_a_split_that_disagrees_is_refused(launch, operator_user):
    replay = run_drive(run=launch(memory_mode="none"))
    old = json.loads(json.dumps(run_export_json(run=replay)))
    old["format_version"] = 1  # a file of format 1: settings as separate keys, no spec
    del old["run"]["spec"], old["run"]["spec_version"]
    for line in old["episodes"]:
        del line["split"]
    for name in ("evaluation_mode", "split_rule", "test_fraction", "train_trials", "task_splits"):
        del old["run"][name]
    imported = run_import(data=old, user=operator_user)
    assert (imported.run_spec.evaluation_mode, imported.task_splits) == ("replay", {})
    assert imported.metrics["matrix"] == replay.metrics["matrix"] and "split" not in imported.metrics
    runs_compare(runs=[imported, run_import(data=old)])  # replay runs compare as before

    held_out = copy.deepcopy(old)
    held_out["run"] |= {"evaluation_mode": "train_test", "train_trials": 2, "task_splits": LABELLED}
    with pytest.raises(RunImportError) as refused:
        run_import_parse(held_out)
    problems = refused.value.problems
    assert ("episodes.1.trial", "is 1, but task 'shop-app-023' plays trial 3 only (its test split)") in problems
    assert ("episodes.6.trial", "is 3, but task 'shop-app-001' plays trials 1–2 only (its train split)") in problems


def test_a_replay_run_and_a_held_out_run_are_not_compared(launch):
    replay = run_drive(run=launch(memory_mode="none", trials=1))
    held_out = run_drive(run=launch(memory_mode="none", trials=1, evaluation_mode="held_out", split_rule="task_set"))
    with pytest.raises(RunsNotComparable, match="differ in measured tasks"):
        runs_compare(runs=[replay, held_out])
