"""The run page's task x trial grid (issue 18): every task shows (no scroll box), with its verdict in
words, and the operator orders it (failing or unstable tasks first, by id) and filters it (only
failing, only unstable, by task id or request)."""
import re

import pytest
from django.urls import reverse

from evaluation.models import Task, TaskSet
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from evaluation.runs.services.results import outcome_flips, run_heatmap
from tests.browser import login

STATES = {"s": ("done", True), "f": ("done", False), "e": ("error", None), "-": ("pending", None)}
# Per task, trial by trial: s success, f failure, e infrastructure error, - not played yet.
GRID = {"shop-a": "sss", "shop-b": "fff", "shop-c": "sfs", "shop-d": "fs-", "shop-e": "ses"}


def outcomes_run(grid: dict[str, str], *, summaries: dict[str, str] | None = None) -> EvaluationRun:
    """A completed run whose rows have the given outcomes (no episodes played)."""
    run = EvaluationRun.objects.create(name="grid", spec={"trials": len(next(iter(grid.values())))},
                                     status="completed")
    task_set = TaskSet.objects.create(name="grid tasks")
    trials = [Trial.objects.create(run=run, number=n, status="done") for n in range(1, run.run_spec.trials + 1)]
    for key, outcomes in grid.items():
        task = Task.objects.create(task_set=task_set, external_id=key, domain="clothing", split="test",
                                   difficulty="easy", summary=(summaries or {}).get(key, ""), spec={})
        for trial, outcome in zip(trials, outcomes):
            status, success = STATES[outcome]
            RunEpisode.objects.create(run=run, trial=trial, task=task, task_key=key, status=status, success=success)
    return run


def test_a_task_flips_when_its_verdict_changes_between_judged_trials():
    assert outcome_flips(["success", "failure", "success"]) == 2
    assert outcome_flips(["failure", "error", "failure", ""]) == 0
    assert outcome_flips(["success", "running", "failure"]) == 1


@pytest.mark.django_db
def test_the_grid_counts_each_tasks_failed_trials_and_flips():
    heatmap = run_heatmap(run=outcomes_run(GRID, summaries={"shop-c": "a refund for a late parcel"}))
    assert heatmap["tasks"] == list(GRID)
    assert heatmap["failures"] == [0, 3, 1, 1, 1]
    assert heatmap["flips"] == [0, 0, 2, 1, 0]
    assert heatmap["summaries"] == ["", "", "a refund for a late parcel", "", ""]


def _row_labels(page) -> list[str]:
    return page.locator("#heatmap tbody th").all_inner_texts()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_operator_orders_and_filters_the_grid(browser_page, live_server, operator_user):
    run = outcomes_run({**GRID, **{f"shop-z{i:02}": "sss" for i in range(30)}},
                       summaries={"shop-c": "a refund for a late parcel"})
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + run.get_absolute_url())
    # Every task shows, in task id order, with no scroll box around the grid (it used to stop at 28 rows).
    assert _row_labels(page)[:5] == list(GRID) and len(_row_labels(page)) == 35
    assert page.evaluate("(box => box.scrollHeight <= box.clientHeight + 1)(document.getElementById('heatmap'))")
    # Rows say their verdict in words, and each cell its state: not colour only.
    row_c = page.locator('#heatmap tr[data-task="shop-c"]')
    assert row_c.locator(".heatmap-verdict").inner_text() == "2/3 passed · unstable (2 flips)"
    assert row_c.locator(".cell").nth(1).get_attribute("aria-label") == "trial 2: failure"
    page.get_by_label("Order").select_option("failing")
    assert _row_labels(page)[:4] == ["shop-b", "shop-c", "shop-d", "shop-e"]
    page.get_by_label("Order").select_option("unstable")
    assert _row_labels(page)[:2] == ["shop-c", "shop-d"]
    page.get_by_label("Show").select_option("unstable")
    assert _row_labels(page) == ["shop-c", "shop-d"]
    assert page.locator("#heatmap-count").inner_text() == "2 of 35 tasks shown"
    page.get_by_label("Show").select_option("failing")
    assert sorted(_row_labels(page)) == ["shop-b", "shop-c", "shop-d", "shop-e"]
    # The search looks at the task id and the customer's request; the address keeps the choices.
    page.get_by_label("Show").select_option("all")
    page.get_by_label("Task", exact=True).fill("late parcel")
    assert _row_labels(page) == ["shop-c"]
    page.get_by_label("Task", exact=True).fill("z0")
    assert len(_row_labels(page)) == 10
    assert re.search(r"order=unstable&show=all&task=z0$", page.url)
    page.reload()
    assert len(_row_labels(page)) == 10 and page.get_by_label("Order").input_value() == "unstable"
    assert reverse("evaluation:run_detail", args=[run.pk]) in page.url
    link = page.get_by_role("link", name="Search this run's episodes")
    assert link.get_attribute("href") == reverse("evaluation:episode_list") + f"?run={run.pk}"
