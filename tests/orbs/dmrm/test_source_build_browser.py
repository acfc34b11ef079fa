"""In chromium, with a real worker: building a source memory answers at once with the job's page,
whose progress card follows the job a Celery worker runs, and links to the result when it is done."""
import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from evaluation.models import Task
from evaluation.services import episode_run
from memweb.models import Job
from orbs.dmrm.models import SourceMemory
from orbs.services import bank_get_or_create
from tests.browser import login
from tests.evaluation.conftest import builtin  # noqa: F401  (fixture)
from tests.evaluation.runs.conftest import real_broker  # noqa: F401  (fixture)
from tests.support.processes import celery_worker, output_tail, wait_on_progress, worker_env

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_job_card_follows_a_build_run_by_a_worker(browser_page, live_server, operator_user, builtin,  # noqa: F811
                                                      real_broker):  # noqa: F811
    episode_run(task=Task.objects.get(external_id="shop-clo-008"))  # a finished clothing episode, played here
    bank = bank_get_or_create(name="Team memory")
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("orbs:dmrm_source", args=[bank.slug]))
    page.get_by_label("Name", exact=True).fill("clothing")
    page.get_by_label("Min reward").fill("-1")  # keep every step, whether the episode succeeded or not
    page.get_by_label("Min q").fill("-100")
    page.get_by_role("button", name="Build (read-only once built)").click()
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    job = Job.objects.get()
    expect(page.locator(".job-status")).to_contain_text("queued")  # no worker yet: nothing was built
    assert not SourceMemory.objects.exists()

    with celery_worker(worker_env(), hostname="jobs-browser@%h") as worker:
        wait_on_progress(lambda: Job.objects.get(pk=job.pk).is_finished or worker.poll() is not None,
                         progress=lambda: Job.objects.filter(pk=job.pk).values_list("status", "done").get(),
                         stall=120, message="the worker to build the source memory")
        job.refresh_from_db()
        assert job.status == "succeeded", f"{job.error}\n{output_tail(worker)}"
    built = SourceMemory.objects.get(bank=bank, name="clothing").experiences.count()
    assert built > 0 and job.worker.startswith("jobs-browser@")
    expect(page.locator(".job-status")).to_contain_text("succeeded")  # the card polled itself
    expect(page.locator(".job-progress")).to_contain_text(f"{built} of {built}")
    page.locator(".job-result").click()
    page.wait_for_url(live_server.url + reverse("orbs:dmrm_settings", args=[bank.slug]))
    expect(page.locator("body")).to_contain_text("clothing")
