"""Issue 29's proof from the browser: a run launched from the launch form with memory "external" uses
the example BM25 service (started by the test, its own process) end to end, its page names the
service and never the key, the compare page sets it against a no-memory run like any arm, and the
memory-layers leaderboard gives it a row of its own, labelled scripted, each number opening its run."""
import pytest
from django.urls import reverse
from playwright.sync_api import expect

from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_drive
from tests.browser import login
from tests.evaluation.runs.conftest import TASK_IDS, prepared
from tests.support.memory_service import KEY, bm25_service

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _launch_from_the_form(page, live_server, *, name: str, memory: str, service: str = "") -> EvaluationRun:
    page.goto(live_server.url + reverse("evaluation:run_new"))
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Task ids").fill(" ".join(TASK_IDS[:2]))
    page.locator("#id_memory_mode").select_option(memory)
    if service:
        page.get_by_label("External memory service URL").fill(service)
        page.get_by_label("External memory service key").fill(KEY)
    page.get_by_label("Trials", exact=True).fill("2")
    page.get_by_role("button", name="Launch run").click()
    expect(page.locator("#run-status")).to_be_visible()
    return run_drive(run=prepared(EvaluationRun.objects.get(name=name)))  # played here, whatever queued it


def test_a_run_launched_from_the_form_uses_the_external_service_and_compares(
        browser_page, live_server, operator_user, builtin):
    page = browser_page
    login(page, live_server, operator_user)
    plain = _launch_from_the_form(page, live_server, name="no memory", memory="none")
    with bm25_service() as url:
        run = _launch_from_the_form(page, live_server, name="bm25 service", memory="external", service=url)

    assert (plain.status, run.status) == ("completed", "completed"), run.status_message
    told = run.run_episodes.get(trial__number=2, task_key=TASK_IDS[0]).episode
    assert told.memories[0]["external"]["retrieved"] == 2
    page.goto(live_server.url + run.get_absolute_url())
    expect(page.locator("#run-external-service")).to_contain_text("bm25-example 0.1.0 at 127.0.0.1")
    assert KEY not in page.content()
    page.goto(live_server.url + reverse("evaluation:episode_detail", args=[told.pk]))
    expect(page.locator("details[data-memory=external]").first).to_contain_text("retrieved 2, injected 2")
    expect(page.locator("#external-learning")).to_contain_text("The service learnt 1 item")
    page.goto(f"{live_server.url}{reverse('evaluation:run_compare')}?runs={plain.pk}&runs={run.pk}")
    expect(page.locator("#compare-refusal")).to_have_count(0)
    expect(page.locator(".verdict").first).not_to_be_empty()
    expect(page.locator("main")).to_contain_text("external memory layer (HTTP contract)")

    page.get_by_role("link", name="Memory layers").first.click()
    row = page.locator("#memory-layers-board tr[data-layer='external memory layer (HTTP contract): bm25-example']")
    expect(row).to_contain_text("scripted")
    expect(page.locator("#memory-layers-board tr[data-layer='no memory']")).to_be_visible()
    row.locator("a.board-success").click()
    expect(page).to_have_url(live_server.url + run.get_absolute_url())
