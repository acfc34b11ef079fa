"""The shop_validate command and the demo loader."""
import io
import json

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import Episode, Task
from evaluation.runs.demo import load_demo
from evaluation.services import tasks_import_jsonl


def test_the_validator_command_passes_on_the_built_in_tasks():
    out = io.StringIO()
    call_command("shop_validate", "--scripted", stdout=out)
    assert "All 130 tasks are valid (gold solutions replay, do-nothing agent fails, scripted agent solves)." in out.getvalue()


def test_the_validator_command_reports_broken_tasks_in_a_stored_set(builtin):
    spec = builtin.tasks.get(external_id="shop-app-011").spec
    tasks_import_jsonl(text=json.dumps(spec), task_set_name="mine")
    stored = Task.objects.get(task_set__name="mine")
    stored.spec["gold_actions"][0]["arguments"]["order_id"] = "O99999"
    stored.save(update_fields=["spec"])
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 of 1 tasks are broken"):
        call_command("shop_validate", "--task-set", "mine", stdout=out)
    assert "shop-app-011: gold call fails on a fresh shop: cancel_order: Error: no order with order_id 'O99999'" \
        in out.getvalue()
    with pytest.raises(CommandError, match="no task set 'nope'"):
        call_command("shop_validate", "--task-set", "nope")


def test_the_demo_loads_tasks_scripted_episodes_and_runs_once(db):
    out = io.StringIO()
    load_demo(stdout=out, run_tasks=3, run_trials=2)  # the demo's two runs, shrunk to 3 tasks x 2 trials
    load_demo(stdout=out, run_tasks=3, run_trials=2)
    assert Task.objects.filter(environment="shop").count() == 130
    # Both benchmarks' data lie in ../shared/benchmarks here, so their demo sets are loaded (once)
    assert Task.objects.filter(environment="tau2-retail").count() == 114
    assert Task.objects.filter(environment="ecom-bench").count() == 53
    episodes = Episode.objects.all()
    # core demo 4; two runs of 3 tasks x 2 trials; the feedback run (3 x 2) and its curve (3 points x 3 tasks);
    # the DMRM run (3 clothing tasks x 2)
    assert episodes.count() == 4 + 2 * 3 * 2 + 3 * 2 + 3 * 3 + 3 * 2 and all(e.agent_scripted for e in episodes)
    assert "0 scripted demo episode(s) played" in out.getvalue()
