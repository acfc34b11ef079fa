"""Environments as plug-ins: the toy library (examples/memweb_toy_env), installed here as a separate
package and found by its `memweb.environments` entry point, is validated, imported, played in a run
through the API with scripted players, shown on the episode page and re-graded like the shop."""
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from evaluation.environments import UnknownEnvironment, environment, environment_names, environments_refresh
from evaluation.models import Episode, Task
from evaluation.runs.models import EvaluationRun, RunRegrade
from evaluation.runs.services import run_drive, run_staleness
from evaluation.services import task_spec_update, tasks_import_jsonl, taskset_builtin_load
from tests.evaluation.runs.conftest import prepared
from tests.support.packages import package_install, packages_importable

RUNS = "/api/evaluation/runs"


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """The toy package pip-installed into a folder of its own, importable here and in worker subprocesses."""
    with packages_importable(package_install("memweb_toy_env", tmp_path_factory.mktemp("toy"))):
        environments_refresh()
        yield environment("library")
    environments_refresh()


def _post(client, url, payload):
    return client.post(url, json.dumps(payload), content_type="application/json")


def test_the_registry_finds_the_installed_package_by_its_entry_point(library, agent):
    assert {"shop", "library"} <= set(environment_names())
    assert library.name == "library" and environment().name == "shop"
    with pytest.raises(UnknownEnvironment, match="unknown environment 'moon'; known: .*library.*shop"):
        environment("moon")
    listed = {world["name"]: world for world in agent.get("/api/evaluation/environments").json()}
    assert listed["library"]["tools"] == ["find_member", "search_books", "place_hold"]
    assert listed["library"]["builtin_set"] == "library-5" and listed["shop"]["builtin_set"] == "shop-130"


def test_the_validator_checks_the_toy_tasks_and_an_import_names_its_environment(library, db, capsys, client,
                                                                               operator_user):
    call_command("shop_validate", environment="library", scripted=True)
    assert "All 5 tasks are valid (gold solutions replay, do-nothing agent fails, scripted agent solves)" \
        in capsys.readouterr().out
    good, broken = library.builtin_tasks()[1], library.builtin_tasks()[2]
    broken["gold_actions"] = [{"name": "place_hold", "arguments": {"member_id": "M2", "book_id": "B2"}}]
    refused = tasks_import_jsonl(text=json.dumps(good) + "\n" + json.dumps(broken) + "\n", task_set_name="holds",
                                 environment_name="library")
    assert refused.errors == [
        (2, "gold call fails on a fresh library: place_hold: Error: a copy is on the shelf: no hold is needed"),
        (2, "the gold actions do not change the library")] and not Task.objects.exists()
    assert tasks_import_jsonl(text=json.dumps(good), task_set_name="holds", environment_name="library").created == 1
    assert Task.objects.get(external_id="lib-002").environment == "library"
    mixed = tasks_import_jsonl(text=json.dumps(good), task_set_name="holds")  # the shop validator's set?
    assert mixed.errors == [(0, "environment: task set 'holds' holds library tasks; import shop tasks into "
                                "another set")]
    unknown = tasks_import_jsonl(text=json.dumps(good), task_set_name="other", environment_name="moon")
    assert unknown.errors[0][1].startswith("environment: unknown environment 'moon'")

    client.force_login(operator_user)  # the import page names the environment too
    page = client.post(reverse("evaluation:task_import"), {"task_set": "shelf", "environment": "library",
                                                           "text": json.dumps(library.builtin_tasks()[0])})
    assert page.status_code == 200 and '<option value="library" selected>' in page.content.decode()
    assert Task.objects.get(task_set__name="shelf").environment == "library"


def test_a_run_plays_the_toy_world_end_to_end_and_regrades(library, db, agent, operator_user, client,
                                                           django_capture_on_commit_callbacks):
    taskset_builtin_load(environment_name="library")
    answer = _post(agent, f"{RUNS}/", {"name": "library run", "task_set": "library-5", "trials": 2,
                                        "memory_mode": "none", "agent": {"error_rates": {"wrong_arguments": 0.5}}})
    assert answer.status_code == 201, answer.content
    run = run_drive(run=prepared(EvaluationRun.objects.get(pk=answer.json()["id"])))
    body = agent.get(f"{RUNS}/{run.pk}").json()
    assert body["status"] == "completed" and body["episodes_total"] == 10
    episodes = Episode.objects.filter(task__environment="library")
    assert episodes.count() == 10 and {e.agent_backend for e in episodes} == {"scripted-librarian"}
    failed = [e for e in episodes if not e.success]
    assert all(e.reward_breakdown["state"] == 0.0 and e.committed_errors == ["wrong_arguments"] for e in failed)
    assert all(e.task.spec["gold_actions"] for e in failed)  # only a hold can go wrong
    assert run.reward_version == library.reward_version == run.pins["reward"]["version"]

    client.force_login(operator_user)
    held = episodes.filter(task__external_id="lib-002").first()
    page = client.get(reverse("evaluation:episode_detail", args=[held.pk])).content.decode()
    assert "place_hold" in page and "Could you put a hold on" in page

    task = Task.objects.get(external_id="lib-001", task_set__name="library-5")
    task_spec_update(task=task, spec={**task.spec, "required_outputs": [{"label": "shelf", "value": "top shelf"}]})
    assert run_staleness(run=run)["tasks"][0]["fields"] == ["outputs"]
    with django_capture_on_commit_callbacks(execute=True):  # the job's Celery task runs eagerly here
        regrade = _post(agent, f"{RUNS}/{run.pk}/regrade", {})
    assert regrade.status_code == 202
    job = agent.get(regrade["Location"]).json()
    assert job["status"] == "succeeded" and job["result"]["changed"] == 2  # both trials of lib-001 fail now
    assert RunRegrade.objects.get(run=run).reward_version == library.reward_version


def test_the_empty_task_list_loads_any_environments_built_in_set_and_refuses_an_unknown_one(library, client,
                                                                                          operator_user):
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:task_list")).content.decode()
    assert 'data-environment="shop"' in page and 'data-environment="library"' in page
    assert "Load the built-in tasks of library" in page and "library-5" in page
    loaded = client.post(reverse("evaluation:tasks_load_builtin"), {"environment": "library"}, follow=True)
    assert "Loaded the built-in task set library-5 (5 tasks)" in loaded.content.decode()
    assert set(Task.objects.values_list("environment", flat=True)) == {"library"}
    refused = client.post(reverse("evaluation:tasks_load_builtin"), {"environment": "moon"}, follow=True)
    assert "No built-in task set for the environment “moon”: choose one of library, shop." in refused.content.decode()
    assert Task.objects.count() == 5
