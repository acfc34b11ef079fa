"""Re-gradable runs: what a run pins at launch, a run scored against an edited task marked stale with
what changed, the re-grade job (stored trajectories scored again, new scores beside the originals)
and comparisons that say when their runs were not scored alike."""
import pytest
from django.test import Client
from django.urls import reverse

from evaluation.models import Task
from evaluation.runs.models import RegradeScore, RunEpisode, RunRegrade
from evaluation.runs.services import run_drive, run_export_json, run_staleness
from evaluation.services import BUILTIN_SET, task_spec_update
from evaluation.shop.episode import transcript_rescore
from evaluation.shop.reward import REWARD_VERSION, reward_source_hash
from memweb.models import ApiKey, Job
from tests.evaluation.conftest import play
from tests.evaluation.runs.conftest import RATES, TASK_IDS

API = "/api/evaluation/runs"
EDITED = "shop-app-001"


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


@pytest.fixture
def api(operator_user):
    _, secret = ApiKey.issue(user=operator_user, name="regrade-api")
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


@pytest.fixture
def solved(launch):
    """A finished run whose scripted agent makes no error: all 3 tasks x 2 trials succeed."""
    return run_drive(run=launch(memory_mode="none", trials=2, agent={"error_rates": {}}, name="before the fix"))


def _gold_output_added() -> Task:
    """Edit one task's gold: a fact the agent must tell that no tool gives, so every episode of it fails now."""
    task = Task.objects.get(task_set__name=BUILTIN_SET, external_id=EDITED)
    outputs = [*task.spec["required_outputs"], {"label": "code word", "value": "purple elephant", "derived": False}]
    task_spec_update(task=task, spec={**task.spec, "required_outputs": outputs})
    return task


def test_rescoring_a_stored_transcript_against_unchanged_gold_gives_its_original_score(shop_tasks):
    for seed, task in enumerate(shop_tasks[::10]):
        outcome = play(task, seed=seed, rates=RATES)
        again = transcript_rescore(task=task, transcript=outcome.messages, shop_seed=task["shop_seed"])
        assert (again.success, again.breakdown, again.state_hash) == (
            outcome.reward.success, outcome.reward.breakdown, outcome.reward.state_hash), task["id"]


def test_a_run_pins_what_it_is_scored_against_at_launch(launch, api):
    run = launch(trials=1)  # MemOrb with a fresh bank
    pins = {pin.task.external_id: pin for pin in run.task_pins.select_related("task")}
    assert sorted(pins) == TASK_IDS
    assert all((pin.version, pin.content_hash) == (1, pin.task.content_hash) for pin in pins.values())
    assert run.reward_version == REWARD_VERSION
    assert run.pins["reward"] == {"version": REWARD_VERSION, "source_hash": reward_source_hash()}
    assert run.pins["agent"]["backend"] == "scripted" and run.pins["agent"]["model"] is None
    assert len(run.pins["agent"]["config_hash"]) == len(run.pins["customer"]["config_hash"]) == 64
    memory = run.pins["memory"]
    assert (memory["bank"], memory["orbs"], memory["latest_revision"]) == (run.bank_id, 0, None)
    body = api.get(f"{API}/{run.pk}").json()
    assert body["pins"]["tasks"][0] == {"task": TASK_IDS[0], "version": 1, "content_hash": pins[TASK_IDS[0]].content_hash,
                                        "regraded_version": None}
    assert body["staleness"] == {"stale": False, "pinned": True, "tasks": [], "reward": None} and not body["stale"]
    assert run_export_json(run=run)["run"]["pins"]["memory"] == memory


def test_editing_a_task_marks_the_runs_scored_against_it_stale_naming_what_changed(operator, api, launch, solved):
    task = _gold_output_added()
    assert run_staleness(run=solved)["tasks"] == [
        {"task": EDITED, "task_id": task.pk, "pinned": 1, "current": 2, "fields": ["outputs"]}]
    page = operator.get(solved.get_absolute_url()).content.decode()
    assert 'id="run-pins"' in page and 'id="run-stale"' in page and 'id="regrade-button"' in page
    assert "version 1 → 2; changed: outputs" in page
    rows = operator.get(reverse("evaluation:run_list"), HTTP_HX_REQUEST="true").content.decode()
    assert rows.count('class="badge badge-pending"') == 1  # only the run scored against the old version
    listed = {item["id"]: item["stale"] for item in api.get(f"{API}/").json()["items"]}
    fresh = launch(memory_mode="none", trials=1, agent={"error_rates": {}})
    assert listed == {solved.pk: True} and not run_staleness(run=fresh)["stale"]
    assert api.get(f"{API}/{solved.pk}").json()["staleness"]["tasks"][0]["fields"] == ["outputs"]


def test_the_regrade_job_stores_new_scores_beside_the_originals(operator, api, solved,
                                                               django_capture_on_commit_callbacks):
    _gold_output_added()
    with django_capture_on_commit_callbacks(execute=True):  # the job's Celery task runs eagerly in unit tests
        response = api.post(f"{API}/{solved.pk}/regrade")
    assert response.status_code == 202 and response["Location"] == response.json()["status_url"]
    job = api.get(response["Location"]).json()
    assert job["status"] == "succeeded" and (job["result"]["episodes"], job["result"]["changed"]) == (6, 2)
    regrade = RunRegrade.objects.get(run=solved)
    flipped = RegradeScore.objects.filter(regrade=regrade, success=False)
    assert sorted(flipped.values_list("run_episode__task_key", flat=True)) == [EDITED, EDITED]
    assert set(RunEpisode.objects.filter(run=solved).values_list("success", flat=True)) == {True}  # originals kept
    solved.refresh_from_db()
    assert solved.metrics["per_trial"]["value"] == [1.0, 1.0]
    assert regrade.metrics["per_trial"]["value"] == pytest.approx([2 / 3, 2 / 3])
    page = operator.get(solved.get_absolute_url()).content.decode()
    assert 'id="regrade-per_trial"' in page and 'id="regrade-pass_k"' in page and "regrade-button" not in page
    assert '<td class="num">100.0</td><td class="num">66.7</td>' in page and "2 verdicts changed" in page
    detail = api.get(f"{API}/{solved.pk}").json()
    assert detail["stale"] and detail["regraded"] and detail["regrade"]["current"]
    assert detail["pins"]["tasks"][0]["regraded_version"] == 2
    again = api.post(f"{API}/{solved.pk}/regrade")
    assert again.status_code == 409 and "re-graded against the current versions already" in again.json()["detail"]


def test_comparing_a_stale_run_with_a_fresh_one_says_so_and_offers_the_regrade(
        operator, api, launch, solved, django_capture_on_commit_callbacks):
    _gold_output_added()
    fresh = run_drive(run=launch(memory_mode="none", trials=2, agent={"error_rates": {}}, name="after the fix"))
    query = {"runs": [solved.pk, fresh.pk]}
    page = operator.get(reverse("evaluation:run_compare"), query).content.decode()
    assert 'id="compare-stale"' in page and "Not scored alike" in page
    assert f"Run #{solved.pk} before the fix</a> is stale: {EDITED} v1 → v2 (outputs) (not re-graded yet)" in page
    refused = api.get(f"{API}/compare", query)
    assert refused.status_code == 409 and f"stale run #{solved.pk} ({EDITED} v1 → v2 (outputs))" in refused.json()["detail"]
    anyway = api.get(f"{API}/compare", {**query, "allow_stale": "true"}).json()
    assert anyway["mixed"] and [entry["run"] for entry in anyway["stale"]] == [solved.pk]
    assert anyway["pairs"][0]["success"]["estimate"] == pytest.approx(-1 / 3)  # partly the gold's change

    with django_capture_on_commit_callbacks(execute=True):  # the run page's button
        clicked = operator.post(reverse("evaluation:run_regrade", args=[solved.pk]))
    job = Job.objects.get(kind="evaluation.run_regrade")
    assert clicked.status_code == 302 and clicked["Location"] == reverse("job_detail", args=[job.pk])
    assert job.status == "succeeded" and solved.get_absolute_url() in operator.get(clicked["Location"]).content.decode()
    assert 'id="compare-regraded"' in operator.get(reverse("evaluation:run_compare"), query).content.decode()
    regraded = operator.get(reverse("evaluation:run_compare"), {**query, "scores": "regraded"}).content.decode()
    assert "Not scored alike" not in regraded and "Comparing re-graded scores" in regraded
    alike = api.get(f"{API}/compare", {**query, "scores": "regraded"}).json()
    assert not alike["mixed"] and alike["stale"] == [] and alike["pairs"][0]["success"]["estimate"] == 0.0
