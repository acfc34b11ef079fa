"""From runs to studies: a run's failing episodes (or one episode) into an annotation campaign,
through the feedback writers; failing episodes' tasks into a task set with their provenance."""
import re

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from annotation.models import Campaign, FeedbackTask
from evaluation.models import Episode, Task, TaskSet
from evaluation.runs.services import run_drive, studies
from memweb.jobs import JobContext, job_execute
from memweb.models import ApiKey, Job
from tests.support.jobs import WorkerDied, job_worker_dies_at


@pytest.fixture
def feedback_run(launch):
    return run_drive(run=launch(feedback_enabled=True, trials=2, memory_mode="none"))


def _said(response) -> str:
    return " | ".join(str(message) for message in get_messages(response.wsgi_request))


def _job_run(client, url: str, data: dict, capture) -> Job:
    """POST to a keep URL; the job it queues runs when the request commits. The finished job."""
    with capture(execute=True):
        answer = client.post(url, data)
    job = Job.objects.order_by("-pk").first()
    assert answer["Location"] == reverse("job_detail", args=[job.pk]), _said(answer)
    job.refresh_from_db()
    return job


def test_it_adds_the_failing_episodes_of_a_run_to_a_new_campaign_once(client, operator_user, feedback_run,
                                                                     django_capture_on_commit_callbacks):
    client.force_login(operator_user)
    failing = Episode.objects.filter(run_episode__run=feedback_run, success=False).order_by("pk")
    assert failing.exists()
    url = reverse("evaluation:run_keep", args=[feedback_run.pk, "campaign"])
    job = _job_run(client, url, {"which": "failing", "new_campaign": "Failing study"}, django_capture_on_commit_callbacks)
    campaign = Campaign.objects.get(name="Failing study")
    assert (job.status, job.result["url"]) == ("succeeded", reverse("annotation:campaign_detail", args=[campaign.pk]))
    items = list(campaign.items.order_by("pk"))
    assert [item.source_ref for item in items] == [f"episode:{episode.pk}" for episode in failing]
    first, episode = items[0], failing[0]
    assert first.simulated_feedback == episode.simulated_feedback.critique and first.simulated_scripted
    assert first.source_url == reverse("evaluation:episode_detail", args=[episode.pk])
    assert first.source_label.startswith(f"run #{feedback_run.pk} · trial ")
    assert first.conversation[0]["role"] == "user" and not first.is_ready  # the writers come first
    assert FeedbackTask.objects.filter(campaign=campaign, status=FeedbackTask.Status.OPEN).count() == len(items)
    card = client.get(reverse("job_detail", args=[job.pk])).content.decode()
    assert f"Open campaign “Failing study”: {len(items)} added" in card
    again = _job_run(client, url, {"which": "failing", "campaign": campaign.pk}, django_capture_on_commit_callbacks)
    assert campaign.items.count() == len(items)
    assert (again.result["created"], again.result["duplicates"]) == (0, len(items))


def test_it_refuses_an_episode_without_simulated_feedback_before_making_anything(
        client, operator_user, launch, make_campaign):
    run = run_drive(run=launch(trials=1, memory_mode="none"))
    episode = Episode.objects.filter(run_episode__run=run).first()
    campaign = make_campaign()
    client.force_login(operator_user)
    answer = client.post(reverse("evaluation:episode_keep", args=[episode.pk, "campaign"]), {"campaign": campaign.pk})
    assert f"Nothing added to a campaign: no simulated feedback to compare with on episode #{episode.pk}" in _said(answer)
    assert answer["Location"] == episode.get_absolute_url()
    assert not campaign.items.exists() and not Job.objects.exists()
    client.post(reverse("evaluation:episode_keep", args=[episode.pk, "campaign"]), {"new_campaign": "Empty"})
    assert not Campaign.objects.filter(name="Empty").exists()  # nothing to add, so no campaign made either


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of 2, and the old per-request cap (200) down to 2: a run's episodes take several batches."""
    monkeypatch.setattr(studies, "CAMPAIGN_BATCH", 2, raising=False)
    monkeypatch.setattr(studies, "MAX_EPISODES", 2)


def test_it_adds_any_number_of_episodes_in_batches_with_progress(client, operator_user, feedback_run, monkeypatch,
                                                                small_batches, django_capture_on_commit_callbacks):
    client.force_login(operator_user)
    episodes = Episode.objects.filter(run_episode__run=feedback_run)
    n = episodes.count()
    assert n > 4
    reported, real_progress = [], JobContext.progress

    def progress(context, done, total=None, message=""):
        reported.append((done, total))
        real_progress(context, done, total, message)
    monkeypatch.setattr(JobContext, "progress", progress)
    job = _job_run(client, reverse("evaluation:run_keep", args=[feedback_run.pk, "campaign"]),
                   {"which": "all", "new_campaign": "Whole run"}, django_capture_on_commit_callbacks)

    assert (job.status, job.kind, job.done, job.total, job.result["created"]) == (
        "succeeded", "evaluation.episodes_to_campaign", n, n, n)
    assert reported == [(0, n), *((min(done, n), n) for done in range(2, n + 2, 2))]
    assert Campaign.objects.get(name="Whole run").items.count() == n


def test_it_adds_the_rest_when_the_job_is_redelivered_and_nothing_twice(client, operator_user, feedback_run, monkeypatch,
                                                                       small_batches, django_capture_on_commit_callbacks):
    client.force_login(operator_user)
    n = Episode.objects.filter(run_episode__run=feedback_run).count()
    with django_capture_on_commit_callbacks():  # queued; the workers below run it
        client.post(reverse("evaluation:run_keep", args=[feedback_run.pk, "campaign"]),
                    {"which": "all", "new_campaign": "Whole run"})
    job = Job.objects.get()
    job_worker_dies_at(monkeypatch, done=2)  # after the first batch
    with pytest.raises(WorkerDied):
        job_execute(job_id=job.pk)
    campaign = Campaign.objects.get(name="Whole run")
    assert campaign.items.count() == 2
    monkeypatch.undo()

    job_execute(job_id=job.pk)  # the message re-delivered to another worker

    job.refresh_from_db()
    assert (job.status, job.result["created"], job.result["duplicates"]) == ("succeeded", n - 2, 2)
    refs = list(campaign.items.values_list("source_ref", flat=True))
    assert len(refs) == len(set(refs)) == n


def test_it_copies_failing_tasks_into_a_task_set_with_their_provenance_once(client, operator_user, feedback_run):
    client.force_login(operator_user)
    url = reverse("evaluation:run_keep", args=[feedback_run.pk, "task-set"])
    failing = Episode.objects.filter(run_episode__run=feedback_run, success=False).select_related("run_episode")
    client.post(url, {"which": "failing", "new_task_set": "Keepers"})
    kept = Task.objects.filter(task_set__name="Keepers")
    assert sorted(kept.values_list("external_id", flat=True)) == sorted({e.task.external_id for e in failing})
    task = kept.first()
    source = failing.filter(task__external_id=task.external_id).order_by("pk").first()
    assert task.provenance == {"run": feedback_run.pk, "trial": source.run_episode.trial.number,
                               "episode": source.pk, "task": str(source.task)}
    again = client.post(url, {"which": "failing", "task_set": "Keepers"})
    assert "Already in “Keepers”, not copied again" in _said(again) and kept.count() == len(set(
        failing.values_list("task__external_id", flat=True)))
    builtin = client.post(url, {"which": "all", "task_set": TaskSet.objects.get(is_builtin=True).name})
    assert "Task set: Select a valid choice" in _said(builtin)


@pytest.fixture
def make_campaign(db, operator_user):
    def make() -> Campaign:
        return Campaign.objects.create(name="Open study", status=Campaign.Status.OPEN, created_by=operator_user)
    return make


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_adds_a_runs_failing_episodes_to_a_campaign_in_the_browser(browser_page, live_server, operator_user,
                                                                       feedback_run):
    """The job runs when the request commits (eager Celery); its page links to the campaign."""
    from playwright.sync_api import expect

    from tests.browser import login

    failing = Episode.objects.filter(run_episode__run=feedback_run, success=False).count()
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + feedback_run.get_absolute_url())
    forms = page.locator("#study-forms")  # loaded into the run page by htmx
    expect(forms.get_by_label("Episodes").first).to_have_value("failing")
    page.locator("#to-study").screenshot(path="/tmp/annotation-shots/run-to-study-1280.png")
    forms.get_by_label("or a new campaign").fill("Browser study")
    forms.get_by_role("button", name="Add to the campaign").click()
    page.wait_for_url("**/jobs/*/")
    page.get_by_role("link", name=f"Open campaign “Browser study”: {failing} added").click()
    page.wait_for_url("**/annotation/campaigns/*/")
    rows = page.locator("#item-rows tbody tr")
    expect(rows).to_have_count(failing)
    source = rows.first.get_by_role("link", name=re.compile(rf"run #{feedback_run.pk} · trial \d+ · episode #"))
    expect(rows.first.locator(".badge-scripted")).to_have_text("scripted feedback")
    expect(rows.first).to_contain_text("needs human feedback")
    page.locator("#item-rows").screenshot(path="/tmp/annotation-shots/items-from-run-1280.png")
    source.click()  # the item's source: the episode it came from
    expect(page.locator("h1")).to_contain_text("Episode #")
    expect(page.locator("#study-forms")).to_be_visible()  # the episode page offers the same, for itself
    page.set_viewport_size({"width": 390, "height": 900})
    page.locator("#to-study").screenshot(path="/tmp/annotation-shots/episode-to-study-390.png")


def test_the_api_adds_a_runs_episodes_by_a_job_or_names_the_problem(operator_user, feedback_run, make_campaign,
                                                                   django_capture_on_commit_callbacks):
    _, secret = ApiKey.issue(user=operator_user, name="studies")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    url = f"/api/evaluation/runs/{feedback_run.pk}/campaign"
    with django_capture_on_commit_callbacks(execute=True):
        accepted = api.post(url, {"which": "all", "new_campaign": "From the API"}, content_type="application/json")

    assert accepted.status_code == 202, accepted.content
    job = api.get(accepted["Location"]).json()
    campaign = Campaign.objects.get(name="From the API")
    assert (job["status"], job["result"]["created"]) == ("succeeded", campaign.items.count())
    closed = make_campaign()
    Campaign.objects.filter(pk=closed.pk).update(status=Campaign.Status.CLOSED)
    refused = api.post(url, {"campaign_id": closed.pk}, content_type="application/json")
    assert refused.status_code == 422 and refused.json()["detail"] == [{"loc": ["body", "payload", "campaign_id"], "msg": (
        f"no open or draft campaign #{closed.pk} here; choose another, or name a new one")}]
    empty = api.post(url, {"which": "trial", "trial": 9, "new_campaign": "Nine"}, content_type="application/json")
    assert empty.status_code == 422 and empty.json()["detail"] == [{"loc": ["body", "payload", "trial"], "msg": (
        f"run #{feedback_run.pk} has no finished episode in trial 9")}]
    assert Job.objects.count() == 1 and not Campaign.objects.filter(name="Nine").exists()
