"""Background jobs (memweb.jobs): a registered function runs on the job's task, its progress and
its result or failure are recorded, and its status is read through the API by its owner only."""
from datetime import timedelta

import pytest
from django.apps import apps
from django.utils import timezone

from memweb.jobs import JobFailed, job_execute, job_start, jobs_resend_stale
from memweb.models import ApiKey, Job, WorkerHeartbeat
from memweb.services import worker_claimant

seen: list[tuple] = []  # what the job's row held after each of its progress calls


def counting_job(context, *, steps: int) -> dict:
    for step in range(1, steps + 1):
        context.progress(step, steps, f"step {step} of {steps}")
        seen.append(Job.objects.filter(pk=context.job_id).values_list("status", "done", "total", "message").get())
    return {"counted": steps, "upload": context.upload, "url": "/orbs/banks/", "link_text": "Open the banks"}


def refusing_job(context) -> dict:
    context.progress(1, 3, "checked")
    raise JobFailed("the name was taken meanwhile")


def crashing_job(context) -> dict:
    raise ValueError("a bug")


def delivered_twice_job(context) -> dict:
    seen.append("ran")
    if len(seen) == 1:  # its message is delivered again while it runs (a broker's redelivery)
        job_execute(job_id=context.job_id, worker="celery@other#i2/9")
    return {}


@pytest.fixture(autouse=True)
def test_kinds(monkeypatch):
    """Job kinds of this module, declared as an app declares its own (memweb.registry)."""
    kinds = (("test.count", f"{__name__}.counting_job"), ("test.refuse", f"{__name__}.refusing_job"),
             ("test.crash", f"{__name__}.crashing_job"), ("test.twice", f"{__name__}.delivered_twice_job"))
    monkeypatch.setattr(apps.get_app_config("memweb"), "job_kinds", kinds, raising=False)
    seen.clear()


def test_a_job_is_queued_when_its_transaction_commits_and_records_progress_and_result(
        db, operator_user, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as queued:
        job = job_start(kind="test.count", title="Count", payload={"steps": 3}, user=operator_user, upload="file")
    assert len(queued) == 1 and Job.objects.get(pk=job.pk).status == Job.Status.QUEUED
    queued[0]()  # the Celery task (eager in unit tests)
    assert seen == [("running", 1, 3, "step 1 of 3"), ("running", 2, 3, "step 2 of 3"),
                    ("running", 3, 3, "step 3 of 3")]
    job.refresh_from_db()
    assert (job.status, job.done, job.total, job.progress_percent) == ("succeeded", 3, 3, 100)
    assert job.result["counted"] == 3 and job.result["upload"] == "file"
    assert job.upload == "" and job.finished_at and job.started_at and job.created_by == operator_user


def test_a_refusal_is_recorded_as_it_is_and_a_crash_with_its_type(db):
    refused = job_start(kind="test.refuse", title="Refuse", payload={})
    crashed = job_start(kind="test.crash", title="Crash", payload={}, upload="kept until the end")
    for job in (refused, crashed):
        job_execute(job_id=job.pk)
        job.refresh_from_db()
    assert (refused.status, refused.error, refused.done, refused.total) == (
        "failed", "the name was taken meanwhile", 1, 3)
    assert (crashed.status, crashed.error, crashed.upload) == ("failed", "ValueError: a bug", "")


def test_a_redelivered_message_of_a_finished_job_runs_nothing(db):
    job = job_start(kind="test.count", title="Count", payload={"steps": 1})
    job_execute(job_id=job.pk)
    job_execute(job_id=job.pk)
    assert len(seen) == 1


def _live_worker_process() -> str:
    """The claimant name of a pool process of a worker that beats now."""
    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="celery@h", instance="i1", pid=7, processes=[8], started_at=now,
                                   seen_at=now)
    return worker_claimant(hostname="celery@h", instance="i1", pid=8)


def test_a_second_delivery_while_a_live_worker_runs_the_job_runs_nothing(db):
    job = job_start(kind="test.twice", title="Twice", payload={})
    job_execute(job_id=job.pk, worker=_live_worker_process())
    job.refresh_from_db()
    assert seen == ["ran"] and (job.status, job.worker) == ("succeeded", "celery@h#i1/8")


def test_the_beat_resends_jobs_nobody_claimed_for_long_and_those_whose_worker_died(
        db, settings, django_capture_on_commit_callbacks):
    settings.JOB_RESEND_SECONDS = 60
    now, live = timezone.now(), _live_worker_process()
    lost, fresh, orphaned, busy = (job_start(kind="test.count", title=f"Count {n}", payload={"steps": 1})
                                   for n in range(4))
    Job.objects.filter(pk=lost.pk).update(queued_at=now - timedelta(minutes=5))  # its message never came
    Job.objects.filter(pk=orphaned.pk).update(status=Job.Status.RUNNING, worker="celery@h#i0/5", started_at=now)
    Job.objects.filter(pk=busy.pk).update(status=Job.Status.RUNNING, worker=live, started_at=now - timedelta(hours=1))
    with django_capture_on_commit_callbacks() as sent:
        assert jobs_resend_stale() == 2
    for send in sent:
        send()  # the resent messages, run eagerly
    states = dict(Job.objects.values_list("pk", "status"))
    assert [states[job.pk] for job in (lost, fresh, orphaned, busy)] == ["succeeded", "queued", "succeeded", "running"]


def test_an_unregistered_kind_is_refused_before_anything_is_queued(db):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="no installed app provides the job kind 'test.nothing'"):
        job_start(kind="test.nothing", title="Nothing", payload={})
    assert not Job.objects.exists()


def test_the_status_url_answers_the_jobs_owner_only(client, operator_user, reviewer_user):
    job = job_start(kind="test.count", title="Count", payload={"steps": 2}, user=operator_user)
    job_execute(job_id=job.pk)
    _, secret = ApiKey.issue(user=operator_user, name="agent")
    answer = client.get(f"/api/jobs/{job.pk}", headers={"Authorization": f"Bearer {secret}"})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["status"], body["done"], body["total"], body["progress_percent"]) == ("succeeded", 2, 2, 100)
    assert body["status_url"] == f"http://testserver/api/jobs/{job.pk}"
    assert body["result_url"] == "http://testserver/orbs/banks/"
    assert body["url"] == f"http://testserver/jobs/{job.pk}/"
    _, other = ApiKey.issue(user=reviewer_user, name="someone else")
    refused = client.get(f"/api/jobs/{job.pk}", headers={"Authorization": f"Bearer {other}"})
    assert refused.status_code == 404 and refused.json() == {"detail": f"No job #{job.pk} of yours"}


def test_the_schema_declares_the_status_route(admin_client):
    schema = admin_client.get("/api/openapi.json").json()
    answers = schema["paths"]["/api/jobs/{job_id}"]["get"]["responses"]
    assert "JobOut" in answers["200"]["content"]["application/json"]["schema"]["$ref"] and "404" in answers
    imports = schema["paths"]["/api/orbs/banks/import"]["post"]["responses"]
    assert "202" in imports and "422" in imports


def test_the_job_page_polls_until_the_job_has_finished(client, operator_user):
    client.force_login(operator_user)
    job = job_start(kind="test.refuse", title="Import of bank “Shop”", payload={}, user=operator_user)
    queued = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'hx-trigger="every 1s"' in queued and "No Celery worker is running" in queued
    job_execute(job_id=job.pk)
    card = client.get(f"/jobs/{job.pk}/", headers={"HX-Request": "true"}).content.decode()
    assert "hx-trigger" not in card and "the name was taken meanwhile" in card and "1 of 3" in card
    assert "<html" not in card
    listing = client.get("/jobs/").content.decode()
    assert "Import of bank “Shop”" in listing and "failed" in listing


def test_the_admin_reads_a_job_without_loading_its_upload(admin_client):
    job = job_start(kind="test.count", title="Count", payload={"steps": 1}, upload="a large file")
    assert admin_client.get("/admin/memweb/job/").status_code == 200
    page = admin_client.get(f"/admin/memweb/job/{job.pk}/change/").content.decode()
    assert "Count" in page and "a large file" not in page
