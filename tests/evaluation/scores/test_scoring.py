"""Defining custom scores on a task set and computing them as background jobs: a run's job (progress,
idempotent re-run), the task set's job over finished runs, summaries, and the JSON API (create, 422
on bad settings, scoring start with its status URL, lists)."""
import pytest
from django.test import Client

from evaluation.models import Episode
from evaluation.scores import services
from evaluation.scores.kinds import ScoreConfigInvalid
from evaluation.scores.models import EpisodeScore
from evaluation.scores.services import (
    ScoringRefused,
    definition_archive,
    definition_create,
    run_score_start,
    run_scores_summary,
    task_set_score_start,
)
from memweb.jobs import job_execute
from memweb.models import ApiKey, Job

API = "/api/evaluation/scores"
pytestmark = pytest.mark.django_db


@pytest.fixture
def api(operator_user):
    _, secret = ApiKey.issue(user=operator_user, name="scores-api")
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def _episodes(run) -> list[Episode]:
    return list(Episode.objects.filter(run_episode__run=run).order_by("pk"))


def _define(run, name="lookup first", **overrides):
    fields = {"kind": "tool_called", "config": {"tool": "get_order_details"}} | overrides
    return definition_create(task_set=run.task_set, name=name, **fields)


def test_a_name_is_unique_among_the_task_sets_active_scores(finished_run):
    first = _define(finished_run)
    with pytest.raises(ScoreConfigInvalid) as taken:
        _define(finished_run, name="Lookup first")  # the same slug
    assert "has a score named" in taken.value.errors["name"]
    definition_archive(definition=first)
    assert _define(finished_run).slug == "lookup-first"


def test_the_run_job_scores_every_finished_episode_with_progress_and_a_rerun_replaces(finished_run, monkeypatch):
    monkeypatch.setattr(services, "PROGRESS_EVERY", 2)
    reports = []
    monkeypatch.setattr("memweb.jobs.JobContext.progress",
                        lambda self, done, total=None, message="": reports.append((done, total)))
    definition = _define(finished_run, kind="ended_by", config={"ended_by": "stop"}, name="customer ended")
    job = run_score_start(run=finished_run)
    assert run_score_start(run=finished_run) == job  # one job while it is queued
    job_execute(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and job.result["episodes"] == 3
    assert reports == [(0, 3), (2, 3), (3, 3)]
    episodes = _episodes(finished_run)
    stored = {s.episode_id: s.passed for s in EpisodeScore.objects.filter(definition=definition)}
    assert stored == {e.pk: e.ended_by == "stop" for e in episodes}

    EpisodeScore.objects.filter(definition=definition).update(explanation="old")
    again = run_score_start(run=finished_run)
    assert again != job
    job_execute(job_id=again.pk)
    assert EpisodeScore.objects.filter(definition=definition).count() == 3
    assert not EpisodeScore.objects.filter(explanation="old").exists()


def test_the_summary_gives_mean_pass_rate_and_counts_and_an_offline_judge_is_not_judged(finished_run):
    _define(finished_run, kind="turns_at_most", config={"turns": 1}, name="one turn")
    _define(finished_run, kind="llm_judge", config={"rubric": "Was the agent polite?"}, name="polite")
    job_execute(job_id=run_score_start(run=finished_run).pk)
    rows = {row["name"]: row for row in run_scores_summary(run=finished_run)}
    short = [e.turns <= 1 for e in _episodes(finished_run)]
    assert rows["one turn"]["scored"] == 3 and rows["one turn"]["pass_rate"] == sum(short) / 3
    assert rows["one turn"]["judge"] == "rule over the stored transcript"
    assert (rows["polite"]["scored"], rows["polite"]["not_judged"], rows["polite"]["mean"]) == (0, 3, None)
    assert not EpisodeScore.objects.filter(status="not_judged").exclude(value=None).exists()


def test_a_new_score_is_computed_for_the_finished_runs_of_its_task_set(finished_run):
    definition = _define(finished_run)
    job = task_set_score_start(task_set=finished_run.task_set)
    job_execute(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert definition.scores.count() == 3 and (job.done, job.total) == (3, 3)


def test_scoring_is_refused_without_scores_or_while_the_run_plays(finished_run, launch):
    with pytest.raises(ScoringRefused, match="has no custom scores yet"):
        run_score_start(run=finished_run)
    _define(finished_run)
    with pytest.raises(ScoringRefused, match="score it once it has finished"):
        run_score_start(run=launch(memory_mode="none", trials=1))


def test_the_api_defines_a_score_and_refuses_bad_settings_naming_the_field(finished_run, api):
    url = f"{API}/task-sets/{finished_run.task_set_id}/definitions"
    bad = api.post(url, {"name": "apology", "kind": "reply_matches", "config": {"pattern": "(sorry"}},
                   content_type="application/json")
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["body", "config", "pattern"]
    assert "not a valid regular expression" in bad.json()["detail"][0]["msg"]
    assert api.post(url, {"name": "x", "kind": "dice"}, content_type="application/json").status_code == 422

    made = api.post(url, {"name": "apology", "kind": "reply_matches", "config": {"pattern": "(?i)sorry",
                                                                                   "mode": "must_not"}},
                    content_type="application/json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert (body["slug"], body["config"]) == ("apology", {"pattern": "(?i)sorry", "mode": "must_not"})
    assert body["job"]["status_url"].endswith(f"/api/jobs/{body['job']['id']}")
    assert [d["name"] for d in api.get(url).json()] == ["apology"]

    archived = api.post(f"{API}/definitions/{body['id']}/archive")
    assert archived.status_code == 200 and archived.json()["archived"]
    assert api.get(url).json() == [] and len(api.get(url, {"archived": True}).json()) == 1


def test_the_api_scores_a_run_and_lists_its_scores_page_by_page(finished_run, api):
    assert api.post(f"{API}/runs/{finished_run.pk}/score").status_code == 409
    _define(finished_run)
    started = api.post(f"{API}/runs/{finished_run.pk}/score")
    assert started.status_code == 202
    assert started["Location"] == started.json()["status_url"]
    job_execute(job_id=started.json()["id"])
    assert api.get(started.json()["status_url"]).json()["status"] == "succeeded"

    listed = api.get(f"{API}/runs/{finished_run.pk}/scores", {"limit": 2}).json()
    assert listed["count"] == 3 and len(listed["items"]) == 2
    rest = api.get(f"{API}/runs/{finished_run.pk}/scores", {"limit": 2, "offset": 2}).json()["items"]
    items = listed["items"] + rest
    assert {i["episode_id"] for i in items} == {e.pk for e in _episodes(finished_run)}
    assert all(i["status"] == "scored" and i["value"] in (0.0, 1.0) for i in items)
    summary = api.get(f"{API}/runs/{finished_run.pk}/summary").json()
    assert summary[0]["name"] == "lookup first" and summary[0]["scored"] == 3
    assert summary[0]["mean"] == sum(i["value"] for i in items) / 3
    assert api.get(f"{API}/runs/999999/summary").status_code == 404


def test_the_run_episode_and_compare_pages_show_the_scores_beside_the_reward(finished_run, launch, client,
                                                                            operator_user):
    from evaluation.runs.services import run_drive

    other = run_drive(run=launch(memory_mode="none", trials=1, agent={"error_rates": {}}, name="other run"))
    _define(finished_run, kind="llm_judge", config={"rubric": "Was the agent polite?"}, name="polite")
    _define(finished_run, kind="ended_by", config={"ended_by": "stop"}, name="customer ended")
    for run in (finished_run, other):
        job_execute(job_id=run_score_start(run=run).pk)
    client.force_login(operator_user)

    card = client.get(finished_run.get_absolute_url()).content.decode()
    assert 'id="custom-scores"' in card and "not judged (no LLM configured)" in card and "mean reward" in card
    episode = _episodes(finished_run)[0]
    page = client.get(episode.get_absolute_url()).content.decode()
    assert 'id="episode-custom-scores"' in page and "Not judged: no LLM is configured" in page

    compared = client.get("/evaluation/runs/compare/", {"runs": [finished_run.pk, other.pk]})
    assert compared.status_code == 200, compared.content[:500]
    html = compared.content.decode()
    section = html[html.index('id="compare-custom-scores"'):]
    row = section[section.index('data-score="customer ended"'):]
    row = row[:row.index("</tr>")]
    rates = [sum(e.ended_by == "stop" for e in _episodes(run)) / 3 for run in (finished_run, other)]
    assert row.count("<td") == 2 and all(f"{rate:.2f}" in row for rate in rates)
    polite = section[section.index('data-score="polite"'):]
    assert polite[:polite.index("</tr>")].count("not judged") == 2


def test_the_job_stores_an_llm_judges_values_asked_without_the_tasks_gold(finished_run, fake_llm):
    import json

    fake_llm.use_for("scorer", model="judge-model")
    fake_llm.set_default_json({"passed": True, "explanation": "The agent answered the question."})
    definition = _define(finished_run, kind="llm_judge", config={"rubric": "Did the agent answer?"}, name="answered")
    job_execute(job_id=run_score_start(run=finished_run).pk)
    stored = list(definition.scores.values_list("status", "value", "passed", "judge"))
    assert stored == [("scored", 1.0, True, "judge-model")] * 3
    prompts = ["\n".join(m["content"] for m in body["messages"]) for body in fake_llm.chat_requests]
    assert len(prompts) == 3
    snapshots = [episode.task_snapshot for episode in _episodes(finished_run)]
    assert any(gold["gold_actions"] for gold in snapshots) and any(gold["required_outputs"] for gold in snapshots)
    for gold in snapshots:
        hidden = [json.dumps(gold[key]) for key in ("gold_actions", "gold_lookups", "required_outputs") if gold[key]]
        hidden.append(json.dumps(gold["instructions"]))
        assert not [p for p in prompts for text in hidden if text in p]
    assert not [p for p in prompts if "gold" in p.lower() or "reward" in p.lower()]
    summary = {row["name"]: row for row in run_scores_summary(run=finished_run)}["answered"]
    assert (summary["pass_rate"], summary["judge"]) == (1.0, "LLM judge judge-model")
