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


def _task_page() -> str:
    return reverse("evaluation:task_detail", args=[Task.objects.order_by("pk").first().pk])


def _finished_feedback_run() -> str:
    run = EvaluationRun.objects.create(name="finished", status=EvaluationRun.Status.COMPLETED,
                                       spec={"feedback_enabled": True, "trials": 1}, task_pks=[1])
    return run.get_absolute_url()


NOT_JSON = {"name": "run.json", "mimeType": "application/json", "buffer": b"{not json"}
# form: (its page, what is typed (a file for a file field), the button, where the message shows, what it says).
FORMS = {
    "task import": (lambda: reverse("evaluation:task_import"), {"Task set name": "mine", "…or paste JSONL": "not json"},
                    "Validate and import", ".problem-report", ["task on line 1: not valid JSON"]),
    "task play": (_task_page, {"Max turns": "0"}, "Play episode", ".field-error", ["greater than or equal to 1"]),
    # Both at once: the form's own check (name) and the launch's (task ids), not in two rounds.
    "run launch": (lambda: reverse("evaluation:run_new"), {"Name": "", "Task ids": "no-such-task"}, "Launch run",
                   ".field-error", ["This field is required", "no-such-task"]),
    "run import": (lambda: reverse("evaluation:run_import"), {"Run JSON": NOT_JSON}, "Import", ".field-error",
                   ["The file is not JSON"]),
    "run planner": (lambda: reverse("evaluation:run_plan"), {"Effect to detect (points)": "0"}, "Plan",
                    "#plan-result", ["greater than or equal to 0.1"]),
    "learning curve": (_finished_feedback_run, {"Feedback logs per batch": "0"}, "Measure a learning curve",
                       ".flash-error", ["greater than or equal to 1"]),
    "calibration": (lambda: reverse("evaluation:feedback_calibration"),
                    {"Score distribution p(S), S = 1..10": "1, 2"}, "Save parameters", ".field-error",
                    ["Give exactly 10 weights"]),
    "feedback profile": (lambda: reverse("evaluation:feedback_profile_new"), {}, "Create profile", ".field-error",
                         ["This field is required"]),
}


NEEDS_TASKS = {"task play", "run launch"}


@pytest.mark.parametrize("form", list(FORMS))
def test_it_answers_bad_input_on_every_form_with_a_message(form, request, browser_page, live_server, operator_user):
    if form in NEEDS_TASKS:
        request.getfixturevalue("builtin")
    page_of, typed, button, where, says = FORMS[form]
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + page_of())
    for label, value in typed.items():
        field = page.get_by_label(label, exact=True)
        if isinstance(value, dict):
            field.set_input_files(files=[value])
        else:
            field.fill(value)
    page.get_by_role("button", name=button).click()
    expect(page.locator(where).first).to_be_visible()
    expect(page.locator(where)).to_contain_text(says)


def _bad_tasks(shop_tasks) -> bytes:
    """Three bad lines: one missing most fields, one with a number for a tool name, one not JSON."""
    wrong_tool = {**shop_tasks[0], "id": "bar", "gold_actions": [{"name": 3, "arguments": {}}]}
    return "\n".join([json.dumps({"id": "foo", "domain": "clothing"}), json.dumps(wrong_tool), "{oops"]).encode()


def test_it_shows_a_bad_task_files_report_beside_the_form_grouped_per_task(browser_page, live_server, operator_user,
                                                                          shop_tasks):
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

