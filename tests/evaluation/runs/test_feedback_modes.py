"""Feedback run modes (MemoryBench): on-policy feedback into the run's memory, multi-turn feedback,
and the off-policy learning curve of a finished run."""
import json

import pytest
from django.urls import reverse

from evaluation.feedback.models import EpisodeFeedback
from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, FeedbackCurve, FeedbackMemory
from evaluation.runs.services import (
    CurveLaunchError,
    curve_drive,
    curve_launch,
    run_drive,
    run_export_json,
    run_import,
)
from evaluation.runs.services import curve as curve_module
from orbs.models import Orb
from tests.evaluation.runs.conftest import spec

API = "/api/evaluation/runs"


def _orbs_of_trial(run, number: int):
    return Orb.objects.filter(bank=run.bank, source_label=f"{run.orb_label} · trial {number}")


def test_on_policy_writes_each_trials_feedback_into_the_memory_the_next_trial_plays_against(launch):
    run = run_drive(run=launch(feedback_enabled=True, trials=2))
    assert run.status == EvaluationRun.Status.COMPLETED and run.run_spec.feedback_memory == FeedbackMemory.ONPOLICY
    first = list(_orbs_of_trial(run, 1))
    assert len(first) == 3
    for orb in first:
        feedback = EpisodeFeedback.objects.get(episode__run_episode__orb=orb)
        assert orb.context["user_feedback"]["satisfaction"] == feedback.score
        assert orb.context["user_feedback"]["critique"] == feedback.critique
        assert orb.context["user_feedback"]["critique_backend"] == "scripted"
    second = run.run_episodes.filter(trial__number=2).select_related("episode")
    hits = {hit["orb_id"] for row in second for memory in row.episode.memories for hit in memory["hits"]}
    assert hits and hits <= {orb.pk for orb in first}  # trial 2 was reminded of trial 1's feedback


def test_the_plain_variant_keeps_feedback_out_of_memory(launch):
    run = run_drive(run=launch(feedback_enabled=True, trials=1, feedback_memory="none"))
    assert EpisodeFeedback.objects.count() == 3
    orbs = list(_orbs_of_trial(run, 1))
    assert len(orbs) == 3 and not any("user_feedback" in orb.context for orb in orbs)


def test_the_api_and_the_form_offer_the_feedback_modes(agent, builtin, operator_user, client):
    body = agent.post(f"{API}/", json.dumps(spec(feedback_enabled=True, feedback_rounds=2,
                                                  feedback_calibration="realised")),
                      content_type="application/json").json()
    assert (body["feedback_memory"], body["feedback_rounds"], body["feedback_calibration"]) == \
        ("onpolicy", 2, "realised")
    refused = agent.post(f"{API}/", json.dumps(spec(feedback_rounds=4)), content_type="application/json")
    assert refused.status_code == 422
    assert [d["loc"] for d in refused.json()["detail"]] == [["body", "payload", "feedback_rounds"]]
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:run_new")).content.decode()
    assert 'name="feedback_memory"' in page and 'name="feedback_rounds"' in page
    assert 'name="feedback_calibration"' in page


def test_a_feedback_run_by_default_has_up_to_three_rounds_on_the_reference_and_exports_it(
        launch, client, operator_user):
    """MemoryBench's user gives up to three feedback turns and its action model is calibrated on the
    reference p(S); a run file written before the calibration setting existed is from a realised run."""
    run = run_drive(run=launch(feedback_enabled=True, trials=1, feedback_memory="none"))
    assert (run.run_spec.feedback_rounds, run.run_spec.feedback_calibration) == (3, "reference")
    rows = EpisodeFeedback.objects.filter(episode__run_episode__run=run)
    assert {row.params["rounds"] for row in rows} == {3}
    assert {row.params["calibrate_on"] for row in rows} == {"reference"}
    client.force_login(operator_user)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'data-setting="feedback_rounds">3' in page
    assert 'data-setting="feedback_calibration">the reference distribution' in page
    exported = json.loads(json.dumps(run_export_json(run=run)))
    assert exported["run"]["feedback_calibration"] == exported["run"]["spec"]["feedback_calibration"] == "reference"
    assert run_import(data=exported, user=operator_user).run_spec.feedback_calibration == "reference"
    # A file of format version 1 (settings as separate keys) from before the setting existed.
    header = {name: value for name, value in exported["run"].items()
              if name not in ("spec", "spec_version", "feedback_calibration")}
    older = run_import(data={**exported, "format_version": 1, "run": header}, user=operator_user)
    assert older.run_spec.feedback_calibration == "realised"
    assert ('data-setting="feedback_calibration">variant: the run&#x27;s own realised scores'
            in client.get(older.get_absolute_url()).content.decode())


def test_a_multi_turn_feedback_run_stores_and_shows_each_round(launch, client, operator_user):
    run = run_drive(run=launch(feedback_enabled=True, trials=1, feedback_rounds=2))
    rows = list(EpisodeFeedback.objects.filter(episode__run_episode__run=run))
    assert len(rows) == 3 and all(row.params["rounds"] == 2 for row in rows)
    continued = [row for row in rows if row.behavior == "continue_conversation"]
    assert continued and all(len(row.rounds) == 1 and row.rounds[0]["round"] == 2 for row in continued)
    orb = Orb.objects.get(pk=run.run_episodes.get(episode=continued[0].episode).orb_id)
    assert orb.context["user_feedback"]["rounds"][0]["satisfaction"] == continued[0].rounds[0]["score"]
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:episode_detail", args=[continued[0].episode_id])).content.decode()
    assert "Round 2" in page and "Agent's answer to the critique" in page
    assert continued[0].rounds[0]["revision"].split(".")[0].replace("'", "&#x27;") in page


def _hit_orbs(episode_ids) -> set[int]:
    episodes = Episode.objects.filter(pk__in=episode_ids)
    return {hit["orb_id"] for episode in episodes for memory in episode.memories for hit in memory["hits"]}


def test_the_off_policy_curve_writes_a_finished_runs_feedback_in_batches_and_replays_its_tasks(
        launch, agent, client, operator_user):
    run = run_drive(run=launch(feedback_enabled=True, trials=2, memory_mode="none"))
    client.force_login(operator_user)
    response = client.post(reverse("evaluation:feedback_curve_launch", args=[run.pk]), {"batch_size": ""})
    curve = FeedbackCurve.objects.get(run=run)
    assert response.status_code == 302 and response["Location"] == curve.get_absolute_url()
    assert (curve.batch_size, curve.batches, curve.status) == (3, 2, FeedbackCurve.Status.QUEUED)
    assert agent.get(f"{API}/feedback-curves/{curve.pk}").json()["points"] == []

    curve = curve_drive(curve=curve)
    assert curve.status == FeedbackCurve.Status.COMPLETED and curve.scripted
    assert [(p["batches"], p["feedback_logs"], p["orbs"], p["tasks"]) for p in curve.points] == \
           [(0, 0, 0, 3), (1, 3, 3, 3), (2, 6, 6, 3)]
    first_batch = set(Orb.objects.filter(bank=curve.bank).order_by("pk").values_list("pk", flat=True)[:3])
    assert not _hit_orbs(curve.points[0]["episode_ids"])  # the empty bank
    assert _hit_orbs(curve.points[1]["episode_ids"]) and _hit_orbs(curve.points[1]["episode_ids"]) <= first_batch
    assert all("user_feedback" in orb.context for orb in Orb.objects.filter(bank=curve.bank))
    seeds = [sorted(Episode.objects.filter(pk__in=p["episode_ids"]).values_list("task__external_id", "seed"))
             for p in curve.points]
    assert seeds[0] == seeds[1] == seeds[2]  # the points differ only in memory
    for point in curve.points:
        assert point["success_rate"] == point["successes"] / 3 and point["low"] <= point["success_rate"] <= point["high"]

    body = agent.get(f"{API}/feedback-curves/{curve.pk}").json()
    assert body["status"] == "completed" and body["status_url"] == f"{API}/feedback-curves/{curve.pk}"
    assert [p["batches"] for p in body["points"]] == [0, 1, 2] and body["scripted"]
    page = client.get(curve.get_absolute_url()).content.decode()
    assert "badge-scripted" in page and "3 of 3 points measured" in page and 'id="curve-data"' in page
    assert f'"label": "run #{run.pk} (scripted)"' in page
    assert f'href="{curve.get_absolute_url()}"' in client.get(run.get_absolute_url()).content.decode()


def test_a_curve_is_refused_for_an_unfinished_or_feedbackless_run_or_too_many_batches(launch, agent, monkeypatch):
    queued = launch(feedback_enabled=True, trials=1)
    with pytest.raises(CurveLaunchError, match="run_id: run #.* is queued"):
        curve_launch(run=queued)
    assert agent.post(f"{API}/{queued.pk}/feedback-curves", "{}", content_type="application/json").status_code == 409
    silent = run_drive(run=launch(trials=1, memory_mode="none"))
    with pytest.raises(CurveLaunchError, match="has no simulated feedback"):
        curve_launch(run=silent)
    judged = run_drive(run=launch(feedback_enabled=True, trials=1, memory_mode="none"))
    monkeypatch.setattr(curve_module, "MAX_CURVE_BATCHES", 2)
    with pytest.raises(CurveLaunchError) as refused:
        curve_launch(run=judged, batch_size=1)  # 3 logs in batches of 1: 3 batches, over the limit of 2
    assert refused.value.problems == [("batch_size", "must be at least 2 (at most 2 batches of the 3 feedback logs), got 1")]
    response = agent.post(f"{API}/{judged.pk}/feedback-curves", json.dumps({"batch_size": 0}),
                          content_type="application/json")
    assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == "batch_size"
    assert not FeedbackCurve.objects.exists()


def test_a_curve_posted_to_the_api_is_measured_by_its_celery_tasks(launch, agent, django_capture_on_commit_callbacks):
    run = run_drive(run=launch(feedback_enabled=True, trials=1, memory_mode="none"))
    with django_capture_on_commit_callbacks(execute=True) as sent:  # Celery runs eagerly in unit tests
        response = agent.post(f"{API}/{run.pk}/feedback-curves", json.dumps({"batch_size": 2}),
                              content_type="application/json")
    assert response.status_code == 201 and len(sent) == 3  # one message per point: 0, 1 and 2 batches
    body = agent.get(response.json()["status_url"]).json()
    assert body["status"] == "completed" and body["progress_percent"] == 100
    assert [(p["batches"], p["feedback_logs"], p["orbs"]) for p in body["points"]] == [(0, 0, 0), (1, 2, 2), (2, 3, 3)]
