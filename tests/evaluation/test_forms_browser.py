"""In chromium: every form of the evaluation pages (tasks, runs, feedback) that takes typed input
answers bad input with a message beside the field or on the page (issue 18, "silent failures"),
and the task import's report of a bad file is shown beside the form, grouped per task."""
import json

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from evaluation.models import Task
from evaluation.runs.models import EvaluationRun
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _task_import(page, url):
    page.goto(url(reverse("evaluation:task_import")))
    page.get_by_label("Task set name").fill("mine")
    page.get_by_label("…or paste JSONL").fill("not json")
    page.get_by_role("button", name="Validate and import").click()
    return page.locator(".problem-report"), "task on line 1: not valid JSON"


def _task_play(page, url):
    page.goto(url(reverse("evaluation:task_detail", args=[Task.objects.order_by("pk").first().pk])))
    page.get_by_label("Max turns").fill("0")
    page.get_by_role("button", name="Play episode").click()
    return page.locator(".field-error"), "greater than or equal to 1"


def _run_launch(page, url):
    page.goto(url(reverse("evaluation:run_new")))
    page.get_by_label("Name", exact=True).fill("")
    page.get_by_label("Task ids").fill("no-such-task")
    page.get_by_role("button", name="Launch run").click()
    # Both at once: the form's own check (name) and the launch's check (task ids), not in two rounds.
    expect(page.locator(".field-error", has_text="Name")).to_contain_text("This field is required")
    return page.locator(".field-error", has_text="Task ids"), "no-such-task"


def _run_import(page, url):
    page.goto(url(reverse("evaluation:run_import")))
    page.get_by_label("Run JSON").set_input_files(files=[{"name": "run.json", "mimeType": "application/json",
                                                          "buffer": b"{not json"}])
    page.get_by_role("button", name="Import").click()
    return page.locator(".field-error"), "The file is not JSON"


def _run_plan(page, url):
    page.goto(url(reverse("evaluation:run_plan")))
    page.get_by_label("Effect to detect (points)").fill("0")
    page.get_by_role("button", name="Plan").click()
    return page.locator("#plan-result"), "greater than or equal to 0.1"


def _learning_curve(page, url):
    run = EvaluationRun.objects.create(name="finished", status=EvaluationRun.Status.COMPLETED, feedback_enabled=True,
                                       trials=1, task_pks=[1])
    page.goto(url(run.get_absolute_url()))
    page.get_by_label("Feedback logs per batch").fill("0")
    page.get_by_role("button", name="Measure a learning curve").click()
    return page.locator(".flash-error"), "greater than or equal to 1"


def _calibration(page, url):
    page.goto(url(reverse("evaluation:feedback_calibration")))
    page.get_by_label("Score distribution p(S), S = 1..10").fill("1, 2")
    page.get_by_role("button", name="Save parameters").click()
    return page.locator(".field-error"), "Give exactly 10 weights"


def _profile(page, url):
    page.goto(url(reverse("evaluation:feedback_profile_new")))
    page.get_by_role("button", name="Create profile").click()
    return page.locator(".field-error").first, "This field is required"


FORMS = {"task import": _task_import, "task play": _task_play, "run launch": _run_launch, "run import": _run_import,
         "run planner": _run_plan, "learning curve": _learning_curve, "calibration": _calibration,
         "feedback profile": _profile}


@pytest.mark.parametrize("form", list(FORMS))
def test_it_answers_bad_input_on_every_form_with_a_message(form, browser_page, live_server, builtin, operator_user):
    login(browser_page, live_server, operator_user)
    message, text = FORMS[form](browser_page, lambda path: live_server.url + path)
    expect(message).to_be_visible()
    expect(message).to_contain_text(text)


def _bad_tasks(shop_tasks) -> bytes:
    """Three bad lines: one missing most fields, one with a number for a tool name, one not JSON."""
    wrong_tool = {**shop_tasks[0], "id": "bar", "gold_actions": [{"name": 3, "arguments": {}}]}
    return "\n".join([json.dumps({"id": "foo", "domain": "clothing"}), json.dumps(wrong_tool), "{oops"]).encode()


def test_it_shows_a_bad_task_files_report_beside_the_form_grouped_per_task(browser_page, live_server, builtin,
                                                                          operator_user, shop_tasks):
    page = browser_page
    login(page, live_server, operator_user)
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live_server.url + reverse("evaluation:task_import"))
        page.get_by_label("Task set name").fill("mine")
        page.get_by_label("JSONL file").set_input_files(files=[{"name": "tasks.jsonl", "mimeType": "text/plain",
                                                                "buffer": _bad_tasks(shop_tasks)}])
        page.get_by_role("button", name="Validate and import").click()
        # Silent failure: the 422 report used to be dropped by htmx; it now shows in the import card.
        report = page.locator("section[aria-labelledby='import-title'] .problem-report")
        expect(report).to_be_visible()
        # Walls of "Field required": one line per task, naming it and each field.
        records = report.locator("li")
        expect(records).to_have_count(3)
        expect(records.nth(0)).to_contain_text("task on line 1 (id: foo): missing fields split, difficulty")
        expect(records.nth(1)).to_contain_text("task on line 2 (id: bar): gold_actions[0].name must be a string")
        expect(records.nth(2)).to_contain_text("task on line 3: not valid JSON")
        assert "Field required" not in report.inner_text()
        box = report.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert not Task.objects.filter(task_set__name="mine").exists()

