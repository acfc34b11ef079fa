"""The runs pages: list (filters, search), launch form, run page and its live partial, actions,
compare, import, and the transcript's run context."""
import io
import json

import pytest
from django.urls import reverse

from evaluation.models import Task
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import FLIP_SORTS, run_drive, run_export_json, run_import
from tests.evaluation.runs.conftest import TASK_IDS


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


@pytest.fixture
def two_runs(launch):
    return run_drive(run=launch(memory_mode="none", name="baseline")), run_drive(run=launch(name="with memory"))


def test_reviewers_cannot_see_runs(client, reviewer_user):
    client.force_login(reviewer_user)
    assert client.get(reverse("evaluation:run_list")).status_code == 403
    assert client.post(reverse("evaluation:run_new"), {"name": "x"}).status_code == 403


def test_the_list_filters_and_searches(operator, two_runs):
    baseline, memory = two_runs
    page = operator.get(reverse("evaluation:run_list")).content.decode()
    assert "baseline" in page and "with memory" in page and "badge-scripted" in page
    rows = operator.get(reverse("evaluation:run_list"), {"memory_mode": "memorb"}, HTTP_HX_REQUEST="true")
    assert "with memory" in rows.content.decode() and "baseline" not in rows.content.decode()
    assert "<html" not in rows.content.decode()  # the htmx partial
    assert "1 run" in operator.get(reverse("evaluation:run_list"), {"q": "base"}).content.decode()
    assert "0 runs" in operator.get(reverse("evaluation:run_list"), {"status": "running"}).content.decode()


def test_the_form_launches_a_run_with_sensible_defaults(operator, builtin):
    form = operator.get(reverse("evaluation:run_new")).content.decode()
    assert 'name="trials" value="10"' in form and 'name="memory_k" value="5"' in form
    response = operator.post(reverse("evaluation:run_new"), {
        "name": "from the form", "task_ids": ", ".join(TASK_IDS), "agent": "scripted", "wrong_tool": "0.3",
        "wrong_arguments": "0.3", "result_unused": "0.3", "customer": "agenda", "memory_mode": "memorb",
        "memory_k": "5", "approved_only": "on", "per_turn": "on", "trials": "2", "seed": "0", "max_turns": "12",
        "concurrency": "4", "review_gate": "auto"})
    run = EvaluationRun.objects.get()
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.run_spec.trials == 2 and run.run_spec.memory_k == 5 and run.run_spec.agent.error_rates["wrong_tool"] == 0.3


def test_the_form_shows_launch_problems_on_their_fields(operator, builtin):
    response = operator.post(reverse("evaluation:run_new"), {
        "name": "bad", "agent": "scripted", "wrong_tool": "0", "wrong_arguments": "0", "result_unused": "0",
        "customer": "agenda", "memory_mode": "memorb", "memory_k": "5", "trials": "2", "pass_k": "3", "seed": "0",
        "max_turns": "12", "concurrency": "0", "review_gate": "auto", "task_ids": "nope"})
    assert response.status_code == 422
    form = response.context["form"]
    assert form.errors["concurrency"] == ["must be at least 1, got 0"]
    assert not EvaluationRun.objects.exists()
    response = operator.post(reverse("evaluation:run_new"), {**response.context["form"].data.dict(),
                                                             "concurrency": "2"})
    form = response.context["form"]
    assert form.errors["pass_k"] == ["Pass^k with k=3 needs at least 3 trials; the run has 2"]
    assert "nope" in form.errors["task_ids"][0]


def test_the_run_page_charts_the_run_and_polls_while_it_is_active(operator, launch):
    run = launch()
    page = operator.get(run.get_absolute_url()).content.decode()
    assert 'hx-trigger="every 2s"' in page and 'id="chart-pass-k"' in page and "run-live-data" in page
    run = run_drive(run=run)
    live = operator.get(run.get_absolute_url(), HTTP_HX_REQUEST="true")
    body = live.content.decode()
    assert "<html" not in body and "every 2s" not in body and "9 of 9 episodes finished" in body
    data = live.context["live"]
    assert data["charts"]["per_trial"]["x"] == [1, 2, 3] and not data["active"]
    assert data["heatmap"]["tasks"] == TASK_IDS and len(data["heatmap"]["cells"][0]) == 3
    state, episode_id = data["heatmap"]["cells"][0][0]
    assert state in ("success", "failure") and run.run_episodes.filter(episode_id=episode_id).exists()


def test_a_feedback_run_shows_its_score_histogram_action_rates_and_feedback(operator, launch):
    without = run_drive(run=launch(trials=1, memory_mode="none"))
    assert "Simulated user feedback" not in operator.get(without.get_absolute_url()).content.decode()
    run = run_drive(run=launch(trials=2, memory_mode="none", feedback_enabled=True))
    response = operator.get(run.get_absolute_url())
    page, feedback = response.content.decode(), response.context["feedback"]
    assert feedback["rates"].n == 6 and sum(feedback["rates"].histogram) == 6
    assert len(feedback["histogram_chart"]["realised"]) == 10 and 'id="histogram-data"' in page
    assert 'id="rates-table"' in page and "6 episodes with feedback" in page and "6 feedback rows" in page
    assert page.count('class="small critique-cell"') == 6 and "evaluation/feedback/calibration.js" in page
    assert f'href="/evaluation/feedback/?run={run.pk}"' in page
    assert f'href="/evaluation/feedback/calibration/?run={run.pk}"' in page
    scoped = operator.get(reverse("evaluation:feedback_browser"), {"run": run.pk}).content.decode()
    assert "6 feedback rows" in scoped


def test_the_action_buttons_cancel_and_resume(operator, launch):
    run = launch()
    assert operator.post(reverse("evaluation:run_cancel", args=[run.pk])).status_code == 302
    run.refresh_from_db()
    assert run.status == "cancelled" and "operator" in run.status_message
    response = operator.post(reverse("evaluation:run_cancel", args=[run.pk]), follow=True)
    assert "only a preparing, queued, running or waiting run can be cancelled" in response.content.decode()
    operator.post(reverse("evaluation:run_resume", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == "queued"  # never started: it is queued again


def test_the_transcript_shows_its_run_and_the_memory_it_wrote(operator, launch):
    run = run_drive(run=launch(trials=2))
    row = run.run_episodes.filter(trial__number=2, orb__isnull=False).select_related("episode").first()
    page = operator.get(row.episode.get_absolute_url()).content.decode()
    assert f"#{run.pk} small run" in page and "trial 2 of 2" in page
    assert f'href="/orbs/{row.orb_id}/"' in page
    hit = next(h for m in row.episode.memories for h in m["hits"])
    assert f'href="/orbs/{hit["orb_id"]}/"' in page


def test_the_compare_page_overlays_runs_and_tests_the_difference(operator, two_runs):
    baseline, memory = two_runs
    response = operator.get(reverse("evaluation:run_compare"), {"runs": [baseline.pk, memory.pk]})
    page = response.content.decode()
    assert 'id="compare-data"' in page and f'id="pair-{memory.pk}-flips"' in page
    comparison = response.context["comparison"]
    assert [c["name"] for c in comparison["charts"]] == ["baseline", "with memory"]
    pair = comparison["pairs"][0]
    assert pair["run"] == memory and pair["baseline"] == baseline
    assert pair["verdict"] in page.replace("&#x27;", "'") and "95 % CI" in pair["verdict"]
    assert [row["k"] for row in pair["pass_k"]] == [1, 2, 3] and len(pair["per_trial"]) == 3
    rows = {row["task"]: row for row in pair["flips"]}
    assert set(rows) == set(TASK_IDS)
    for key, row in rows.items():
        a, b = memory.metrics["matrix"][key], baseline.metrics["matrix"][key]
        assert row["difference"] == pytest.approx((sum(a) - sum(b)) / 3)
    assert "Choose at least two runs" in operator.get(reverse("evaluation:run_compare"),
                                                      {"runs": [baseline.pk]}).content.decode()


def test_it_links_every_trial_of_a_compared_task_to_its_transcript(operator, two_runs):
    baseline, memory = two_runs
    page = operator.get(reverse("evaluation:run_compare"), {"runs": [baseline.pk, memory.pk]}).content.decode()
    for run in two_runs:
        for episode_id in run.run_episodes.values_list("episode_id", flat=True):
            assert f'href="{reverse("evaluation:episode_detail", args=[episode_id])}"' in page


def test_it_sorts_the_flip_table_on_the_server(operator, two_runs):
    baseline, memory = two_runs
    for sort in FLIP_SORTS:
        response = operator.get(reverse("evaluation:run_compare"), {"runs": [baseline.pk, memory.pk], "sort": sort})
        flips = response.context["comparison"]["pairs"][0]["flips"]
        assert response.context["comparison"]["sort"] == sort and flips == sorted(flips, key=FLIP_SORTS[sort])
    by_task = operator.get(reverse("evaluation:run_compare"), {"runs": [baseline.pk, memory.pk], "sort": "task"})
    assert [row["task"] for row in by_task.context["comparison"]["pairs"][0]["flips"]] == sorted(TASK_IDS)


def test_it_refuses_runs_over_different_tasks_with_the_reason(operator, launch):
    one = run_drive(run=launch(memory_mode="none"))
    other = run_drive(run=launch(task_ids=TASK_IDS[:2]))
    response = operator.get(reverse("evaluation:run_compare"), {"runs": [one.pk, other.pk]})
    assert response.status_code == 409 and response.context["comparison"] is None
    assert "cannot be compared" in response.content.decode()
    assert "different tasks (2 and 3; 2 shared" in response.context["refusal"]


def test_it_refuses_runs_of_different_agents(operator, launch):
    one = run_drive(run=launch(memory_mode="none"))
    other = run_drive(run=launch(agent={"error_rates": {"wrong_tool": 0.1}}))
    response = operator.get(reverse("evaluation:run_compare"), {"runs": [one.pk, other.pk]})
    assert response.status_code == 409 and "differ in agent error rates (wrong_tool 0.1 against" in response.context["refusal"]


def test_exports_download_and_the_import_page_takes_them_back(operator, two_runs):
    baseline, _ = two_runs
    exported = operator.get(reverse("evaluation:run_export_json", args=[baseline.pk]))
    assert exported["Content-Disposition"] == f'attachment; filename="run-{baseline.pk}.json"'
    csv_body = operator.get(reverse("evaluation:run_export_csv", args=[baseline.pk])).content.decode()
    assert csv_body.splitlines()[0].startswith("task_id,trial,status,success")
    upload = io.BytesIO(exported.content)
    upload.name = "run.json"
    response = operator.post(reverse("evaluation:run_import"), {"file": upload})
    imported = EvaluationRun.objects.get(imported=True)
    assert response.status_code == 302 and response["Location"] == imported.get_absolute_url()
    bad = io.BytesIO(json.dumps({**json.loads(exported.content), "episodes": []}).encode())
    bad.name = "bad.json"
    response = operator.post(reverse("evaluation:run_import"), {"file": bad})
    assert response.status_code == 422 and "Nothing was imported" in response.content.decode()
    assert EvaluationRun.objects.filter(imported=True).count() == 1


def test_a_bad_run_file_is_reported_per_episode(operator, two_runs):
    data = run_export_json(run=two_runs[0])
    data["episodes"][1] |= {"trial": "x", "success": None}
    del data["episodes"][2]["task_id"]
    upload = io.BytesIO(json.dumps(data).encode())
    upload.name = "run.json"
    page = operator.post(reverse("evaluation:run_import"), {"file": upload}).content.decode()
    second = data["episodes"][1]
    assert (f"<strong>episode 2 (task {second['task_id']}, trial x)</strong>: <code>trial</code> must be a whole number"
            in page)
    assert "<strong>episode 3 (trial 1)</strong>: missing field <code>task_id</code>" in page


def test_an_imported_run_pages_without_transcripts(operator, two_runs):
    copy = run_import(data=run_export_json(run=two_runs[0]))
    page = operator.get(copy.get_absolute_url()).content.decode()
    assert "imported" in page and "Cancel run" not in page and "Click a cell" not in page


def test_the_run_page_says_the_smallest_effect_the_run_could_have_detected(operator, launch):
    run = run_drive(run=launch(memory_mode="none"))
    response = operator.get(run.get_absolute_url())
    detectable = response.context["detectable"]
    assert detectable["trials"] == 3 and detectable["tasks"] == 3
    page = response.content.decode()
    assert 'id="run-detectable"' in page
    # 3 verdicts per task: the variance is known, but over 3 tasks the sign-flip test cannot reach 5 %
    assert detectable["variance"] is not None and detectable["effect"] is None
    assert "too few for 80 % power at the 5 % level" in " ".join(page.split())


def test_it_refuses_runs_scored_against_an_edited_task(operator, launch):
    one = run_drive(run=launch(memory_mode="none"))
    task = Task.objects.get(pk=one.task_pks[0])
    task.spec = {**task.spec, "instructions": task.spec["instructions"] + " Be brief."}  # as a re-import edits in place
    task.save(update_fields=["spec"])
    other = run_drive(run=launch())
    assert one.tasks_fingerprint and other.tasks_fingerprint != one.tasks_fingerprint
    response = operator.get(reverse("evaluation:run_compare"), {"runs": [one.pk, other.pk]})
    assert response.status_code == 409 and "different versions of their tasks" in response.context["refusal"]
