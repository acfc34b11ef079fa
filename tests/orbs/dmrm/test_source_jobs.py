"""Building a source memory is a background job: the page and the API check the name and the
thresholds at once, answer with the job, and build nothing in the request; the job embeds batch by
batch, records its progress, and writes all of the memory or, failing, nothing."""
import pytest
from django.urls import reverse

from memweb.models import ApiKey, Job
from orbs.dmrm.models import Experience, SourceMemory
from orbs.dmrm.services import source as source_service
from tests.orbs.conftest import post
from tests.orbs.dmrm.conftest import build_approved, shop_trajectory

FORM = {"name": "clothing", "source_domain": "clothing", "min_reward": 1.0, "min_q": 0.0, "gamma": 0.9}


@pytest.fixture(autouse=True)
def finished_episodes(monkeypatch):
    """Three finished episodes of the clothing domain (two steps each) as the episodes source gives them."""
    episodes = [shop_trajectory(f"clo-{n}") for n in range(3)]
    monkeypatch.setattr(source_service, "source_trajectories_from_episodes", lambda *, domain, workspace, limit=500: episodes)


@pytest.fixture
def agent_headers(operator_user):
    _, secret = ApiKey.issue(user=operator_user, name="agent")
    return {"Authorization": f"Bearer {secret}"}


def test_the_page_answers_with_the_job_and_a_worker_builds(client, operator_user, dmrm, settings,
                                                            django_capture_on_commit_callbacks):
    settings.EMBEDDING_BATCH_SIZE = 4
    client.force_login(operator_user)
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(reverse("orbs:dmrm_source_build", args=[dmrm.bank.slug]), FORM)
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("job_detail", args=[job.pk])
    assert not SourceMemory.objects.exists() and job.status == "queued"  # the request built nothing
    queued[0]()  # the worker's task (eager in unit tests)
    job.refresh_from_db()
    assert (job.status, job.done, job.total) == ("succeeded", 6, 6)  # 6 steps, embedded in batches of 4
    assert job.result["experiences"] == 6 and job.result["url"] == reverse("orbs:dmrm_settings",
                                                                           args=[dmrm.bank.slug])
    memory = SourceMemory.objects.get(bank=dmrm.bank, name="clothing")
    assert memory.created_by == operator_user and memory.experiences.count() == 6
    page = client.get(reverse("job_detail", args=[job.pk])).content.decode()
    assert "succeeded" in page and job.result["url"] in page and "hx-trigger" not in page


def test_a_taken_name_is_refused_at_once_without_a_job(client, operator_user, dmrm):
    build_approved(dmrm.bank, name="clothing")
    client.force_login(operator_user)
    response = client.post(reverse("orbs:dmrm_source_build", args=[dmrm.bank.slug]), FORM)
    assert response.status_code == 422 and "already has a source memory called" in response.content.decode()
    assert not Job.objects.exists()


def test_the_api_answers_202_with_a_status_url(client, dmrm, agent_headers, django_capture_on_commit_callbacks):
    url = f"/api/orbs/experiences/banks/{dmrm.bank.slug}/source-memories"
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, url, FORM, headers=agent_headers)
    assert response.status_code == 202
    status_url = response.json()["status_url"]
    assert response["Location"] == status_url and status_url.startswith("http://testserver/api/jobs/")
    job = client.get(status_url, headers=agent_headers).json()
    assert (job["status"], job["result"]["source_memory"], job["result"]["experiences"]) == (
        "succeeded", "clothing", 6)
    again = post(client, url, FORM, headers=agent_headers)
    assert again.status_code == 422 and again.json()["detail"][0]["loc"] == ["body", "payload", "name"]
    nothing = post(client, url, FORM | {"name": "strict", "min_q": 5.0}, headers=agent_headers)
    assert nothing.status_code == 422 and "no step of these episodes passes them" in nothing.json()["detail"][0]["msg"]


def test_a_build_that_fails_in_the_job_writes_nothing_and_says_why(dmrm, operator_user,
                                                                   django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as queued:
        job = source_service.source_memory_build_start(bank=dmrm.bank, actor=operator_user, **FORM)
    build_approved(dmrm.bank, name="clothing")  # someone took the name before the worker ran
    before = Experience.objects.count()
    queued[0]()
    job.refresh_from_db()
    assert job.status == "failed"
    assert job.error == "Nothing was built: name: bank 'DMRM shop' already has a source memory called 'clothing'"
    assert Experience.objects.count() == before and SourceMemory.objects.count() == 1
