"""From runs to studies: a run's failing episodes (or one episode) into an annotation campaign,
through the feedback writers; failing episodes' tasks into a task set with their provenance."""
import re

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from annotation.models import Campaign, FeedbackTask
from evaluation.models import Episode, Task, TaskSet
from evaluation.runs.services import run_drive


@pytest.fixture
def feedback_run(launch):
    return run_drive(run=launch(feedback_enabled=True, trials=2, memory_mode="none"))


def _said(response) -> str:
    return " | ".join(str(message) for message in get_messages(response.wsgi_request))


def test_it_adds_the_failing_episodes_of_a_run_to_a_new_campaign_once(client, operator_user, feedback_run):
    client.force_login(operator_user)
    failing = Episode.objects.filter(run_episode__run=feedback_run, success=False).order_by("pk")
    assert failing.exists()
    url = reverse("evaluation:run_keep", args=[feedback_run.pk, "campaign"])
    added = client.post(url, {"which": "failing", "new_campaign": "Failing study"})
    campaign = Campaign.objects.get(name="Failing study")
    assert added["Location"] == reverse("annotation:campaign_detail", args=[campaign.pk])
    items = list(campaign.items.order_by("pk"))
    assert [item.source_ref for item in items] == [f"episode:{episode.pk}" for episode in failing]
    first, episode = items[0], failing[0]
    assert first.simulated_feedback == episode.simulated_feedback.critique and first.simulated_scripted
    assert first.source_url == reverse("evaluation:episode_detail", args=[episode.pk])
    assert first.source_label.startswith(f"run #{feedback_run.pk} · trial ")
    assert first.conversation[0]["role"] == "user" and not first.is_ready  # the writers come first
    assert FeedbackTask.objects.filter(campaign=campaign, status=FeedbackTask.Status.OPEN).count() == len(items)
    again = client.post(url, {"which": "failing", "campaign": campaign.pk})
    assert campaign.items.count() == len(items)
    assert "not added again: episode:" in _said(again) and again["Location"] == feedback_run.get_absolute_url()


def test_it_names_an_episode_without_simulated_feedback_and_adds_nothing(
        client, operator_user, launch, make_campaign):
    run = run_drive(run=launch(trials=1, memory_mode="none"))
    episode = Episode.objects.filter(run_episode__run=run).first()
    campaign = make_campaign()
    client.force_login(operator_user)
    answer = client.post(reverse("evaluation:episode_keep", args=[episode.pk, "campaign"]), {"campaign": campaign.pk})
    assert f"No simulated feedback to compare with, not added: episode #{episode.pk}" in _said(answer)
    assert not campaign.items.exists()
    client.post(reverse("evaluation:episode_keep", args=[episode.pk, "campaign"]), {"new_campaign": "Empty"})
    assert not Campaign.objects.filter(name="Empty").exists()  # nothing added, so no campaign made either


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
    page.wait_for_url("**/annotation/campaigns/*/")
    expect(page.locator(".messages")).to_contain_text(f"Added {failing} conversation")
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
