"""The launch form's trial planner and the stored outcomes the A/A calibration reuses
(evaluation/runs/services/planner.py)."""
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from evaluation import metrics
from evaluation.runs.services import run_drive, run_matrix, run_outcomes, runs_plan_trials
from tests.evaluation.runs.conftest import TASK_IDS


def test_it_plans_from_the_stated_default_without_an_earlier_run(builtin):
    plan = runs_plan_trials(task_set="", effect=0.1, workspace=builtin.workspace)
    assert plan["default_variance"] and plan["variance"] == 0.25 and plan["tasks"] == 130
    assert plan["trials"] == metrics.trials_needed(effect=0.1, tasks=130, rates=metrics.TaskRates.default())


def test_it_plans_from_the_variance_of_earlier_runs_on_the_task_set(launch, client, operator_user):
    run = run_drive(run=launch(trials=2, memory_mode="none"))
    plan = runs_plan_trials(task_set="", effect=0.2, task_ids=TASK_IDS, workspace=run.workspace)
    rates = metrics.TaskRates.of(run_matrix(run=run, trials=2))
    assert plan["runs"] == [run.pk] and plan["tasks"] == 3 and not plan["default_variance"]
    assert plan["variance"] == pytest.approx(rates.variance) and plan["success"] == pytest.approx(rates.mean)
    assert plan["trials"] is None and "select more tasks" in plan["reason"]  # 3 tasks: p >= 0.25 whatever the trials

    client.force_login(operator_user)
    url = reverse("evaluation:run_plan") + f"?effect=20&task_ids={'+'.join(TASK_IDS)}"
    partial = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="plan"' in partial and "<html" not in partial and f"#{run.pk}" in partial
    assert "No number of trials (up to 1000) detects 20.0 points over 3 tasks" in partial
    assert "greater than or equal to 0.1" in client.get(reverse("evaluation:run_plan") + "?effect=-1").content.decode()
    assert 'hx-get="/evaluation/runs/plan/' in client.get(reverse("evaluation:run_new")).content.decode()

    out = StringIO()
    call_command("aa_calibrate", "--run", str(run.pk), "--comparisons", "20", "--planner-comparisons", "5",
                 "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["source"]["tasks"] == 3 and report["source"]["trials"] == 2
    assert run_outcomes(run_id=run.pk) == run_matrix(run=run, trials=2)
    with pytest.raises(CommandError, match="no run #999999"):
        call_command("aa_calibrate", "--run", "999999")
