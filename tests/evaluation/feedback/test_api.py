"""The feedback JSON API, for operators only."""
import json

import pytest

from evaluation.feedback.models import CalibrationSetting, EpisodeFeedback
from tests.evaluation.feedback.conftest import CONTRADICTORY, PEOPLE, make_run, plant_campaign, play_many

API = "/api/evaluation/feedback"


def post(client, url, payload):
    return client.post(url, json.dumps(payload), content_type="application/json")


def test_it_needs_credentials_and_the_operator_role(client, reviewer_user, failed_episode):
    url = f"{API}/episodes/{failed_episode.pk}"
    assert client.get(url).status_code == 401 and client.get(f"{API}/calibration").status_code == 401
    client.force_login(reviewer_user)
    assert post(client, url, {"seed": 1}).status_code == 403
    assert post(client, f"{API}/calibration/recalibrate", {"latest": 5}).status_code == 403
    assert post(client, f"{API}/calibration/recalibrate-from-campaign", {"campaign_id": 1}).status_code == 403
    assert not EpisodeFeedback.objects.exists()


def test_it_generates_once_and_reads_an_episodes_feedback(agent, failed_episode, success_episode):
    url = f"{API}/episodes/{failed_episode.pk}"
    assert agent.get(url).json() == {"detail": f"Episode #{failed_episode.pk} has no simulated feedback yet"}
    created = post(agent, url, {"seed": 11})
    assert created.status_code == 201
    body = created.json()
    assert body["behavior"] == "continue_conversation" and body["score"] == 5 and body["seed"] == 11
    assert body["critique_scripted"] and body["critique_backend"] == "scripted" and body["errors"] == []
    again = post(agent, url, {"seed": 12})
    assert again.status_code == 200 and again.json() == body == agent.get(url).json()
    ended = post(agent, f"{API}/episodes/{success_episode.pk}", {}).json()
    assert ended["response"] is None and ended["behavior"] == "end_conversation" and ended["seed"] == 0
    assert agent.get(f"{API}/episodes/999999").status_code == 404


def test_it_serves_the_calibration_table(agent):
    body = agent.get(f"{API}/calibration").json()
    assert body["global_like"] == pytest.approx(0.0559, abs=1e-12)
    assert body["global_dislike"] == pytest.approx(0.0091, abs=1e-12)
    assert [r["score"] for r in body["rows"]] == list(range(1, 11)) and body["binary"] is None
    assert body["params"]["s0_like"] == 7.5 and body["distribution_source"] == "MemoryBench reference distribution"


def test_it_recalibrates_on_given_episodes_or_refuses_with_a_reason(agent, builtin):
    ids = [e.pk for e in play_many(builtin, 12)]
    for pk in ids[:11]:
        post(agent, f"{API}/episodes/{pk}", {"seed": 1})
    both = post(agent, f"{API}/calibration/recalibrate", {"episode_ids": ids, "latest": 3})
    assert both.status_code == 422 and "exactly one of episode_ids, run_id or latest" in json.dumps(both.json())
    none = post(agent, f"{API}/calibration/recalibrate", {"episode_ids": ids[11:]})
    assert none.status_code == 422 and "none of the selected episodes" in none.json()["detail"][0]["msg"]
    # Only perfect scores: no mass where dislikes happen, so the dislike target is unreachable.
    perfect = list(EpisodeFeedback.objects.filter(score=10).values_list("episode_id", flat=True))
    happy = post(agent, f"{API}/calibration/recalibrate", {"episode_ids": perfect})
    assert happy.status_code == 422 and happy.json()["detail"][0]["msg"].startswith("calibration is infeasible: at S=1")
    done = post(agent, f"{API}/calibration/recalibrate", {"episode_ids": ids})
    assert done.status_code == 200, done.json()
    assert done.json()["distribution_source"] == "recalibrated from 11 realised scores (API: 12 episode ids)"
    assert done.json()["global_like"] == pytest.approx(0.0559, abs=1e-12)
    assert CalibrationSetting.current().distribution_source.startswith("recalibrated from 11")
    rates = agent.get(f"{API}/calibration/rates", {"latest": 3}).json()
    assert rates["n"] == 3 and sum(rates["histogram"]) == 3
    assert rates["expected"]["like"] >= 0 and rates["targets"] == {"like": 0.0559, "dislike": 0.0091}


def test_it_takes_a_runs_episodes(agent, builtin):
    episodes = play_many(builtin, 12)
    for episode in episodes:
        post(agent, f"{API}/episodes/{episode.pk}", {"seed": 1})
    run = make_run("no memory", episodes[2:])
    rates = agent.get(f"{API}/calibration/rates", {"run_id": run.pk}).json()
    assert rates["n"] == 10 and sum(rates["histogram"]) == 10
    done = post(agent, f"{API}/calibration/recalibrate", {"run_id": run.pk})
    assert done.status_code == 200 and done.json()["distribution_source"].endswith(f"(API: run #{run.pk})")
    assert post(agent, f"{API}/calibration/recalibrate", {"run_id": 999999}).json() == \
        {"detail": "No evaluation run #999999"}


def test_it_previews_and_applies_the_fit_to_a_campaigns_people(agent, operator_user):
    campaign = plant_campaign("Planted people", PEOPLE, writer=None)
    url = f"{API}/calibration/recalibrate-from-campaign"
    preview = post(agent, url, {"campaign_id": campaign.pk})
    body = preview.json()
    assert preview.status_code == 200 and (body["n"], body["applied"], body["problem"]) == (18, False, None)
    assert [row["n"] for row in body["rows"]] == [0, 3, 3, 0, 3, 0, 4, 0, 5, 0]
    assert body["rows"][8]["observed_like"] == pytest.approx(0.8) and body["rows"][3]["observed_like"] is None
    assert body["rows"][8]["before_like"] == pytest.approx(agent.get(f"{API}/calibration").json()["rows"][8]["p_like"])
    assert CalibrationSetting.current().distribution_source == "MemoryBench reference distribution"
    applied = post(agent, url, {"campaign_id": campaign.pk, "apply": True}).json()
    assert applied["applied"] and applied["rows"] == body["rows"] and applied["distribution_source"] == \
        "refitted to people's actions in campaign “Planted people” (18 conversations) (API)"
    table = agent.get(f"{API}/calibration").json()
    assert table["params"] == body["params"]
    assert [row["p_like"] for row in table["rows"]] == pytest.approx([row["fit_like"] for row in body["rows"]])
    assert CalibrationSetting.current().updated_by == operator_user
    again = post(agent, url, {"campaign_id": campaign.pk, "apply": True}).json()
    assert again["params"] == body["params"]
    assert again["rows"][8]["before_like"] == pytest.approx(again["rows"][8]["fit_like"], abs=1e-12)


def test_it_refuses_an_unknown_or_thin_campaign_a_contradictory_fit_and_loose_input(agent):
    url = f"{API}/calibration/recalibrate-from-campaign"
    assert post(agent, url, {"campaign_id": 999999}).json() == {"detail": "No annotation campaign #999999"}
    few = plant_campaign("Few", PEOPLE[:3], writer=None)
    thin = post(agent, url, {"campaign_id": few.pk, "apply": True})
    assert thin.status_code == 422 and "has 3 conversations" in thin.json()["detail"][0]["msg"]
    contradictory = plant_campaign("Contradictory", CONTRADICTORY, writer=None)
    preview = post(agent, url, {"campaign_id": contradictory.pk}).json()
    assert preview["params"] is None and "must not exceed 1" in preview["problem"]
    refused = post(agent, url, {"campaign_id": contradictory.pk, "apply": True})
    assert refused.status_code == 422 and refused.json()["detail"][0]["msg"].startswith("the fit to people cannot be used")
    for loose in ({"campaign_id": contradictory.pk, "dry_run": True}, {"campaign_id": str(contradictory.pk)},
                  {"campaign_id": contradictory.pk, "apply": "yes"}):
        assert post(agent, url, loose).status_code == 422, loose
    assert CalibrationSetting.current().distribution_source == "MemoryBench reference distribution"
