"""Feedback run modes (MemoryBench): on-policy feedback into the run's memory, multi-turn feedback,
and the off-policy learning curve of a finished run."""
import json

import pytest
from django.urls import reverse

from evaluation.feedback.models import EpisodeFeedback
from evaluation.runs.models import EvaluationRun, FeedbackMemory
from evaluation.runs.services import run_drive
from memweb.models import ApiKey
from orbs.models import Orb
from tests.evaluation.runs.conftest import spec

API = "/api/evaluation/runs"


@pytest.fixture
def agent(client, operator_user):
    _, secret = ApiKey.issue(user=operator_user, name="feedback-modes")
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
    return client


def _orbs_of_trial(run, number: int):
    return Orb.objects.filter(bank=run.bank, source_label=f"{run.orb_label} · trial {number}")


def test_on_policy_writes_each_trials_feedback_into_the_memory_the_next_trial_plays_against(launch):
    run = run_drive(run=launch(feedback_enabled=True, trials=2))
    assert run.status == EvaluationRun.Status.COMPLETED and run.feedback_memory == FeedbackMemory.ONPOLICY
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
    body = agent.post(f"{API}/", json.dumps(spec(feedback_enabled=True, feedback_rounds=2)),
                      content_type="application/json").json()
    assert (body["feedback_memory"], body["feedback_rounds"]) == ("onpolicy", 2)
    refused = agent.post(f"{API}/", json.dumps(spec(feedback_rounds=4)), content_type="application/json")
    assert refused.status_code == 422
    assert [d["loc"] for d in refused.json()["detail"]] == [["body", "payload", "feedback_rounds"]]
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:run_new")).content.decode()
    assert 'name="feedback_memory"' in page and 'name="feedback_rounds"' in page


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
