"""The validator over all 130 tasks, and the reward's components."""
import copy

from evaluation.shop.generator import shop_fresh
from evaluation.shop.reward import gold_replay, mentions, reward_compute
from evaluation.shop.validate import spec_errors, task_problems
from tests.evaluation.conftest import task_by_template


def _gold_calls(task):
    return [{"name": c["name"], "arguments": c["arguments"], "ok": True}
            for c in task["gold_lookups"] + task["gold_actions"]]


def _told(task):
    return [" ".join(o["value"] for o in task["required_outputs"])]


def test_it_validates_every_built_in_task(shop_tasks):
    for task in shop_tasks:
        normalised, problems = spec_errors(task)
        assert problems == [], task["id"]
        assert normalised == task


def test_it_fails_a_do_nothing_agent_on_every_task(shop_tasks):
    fresh = shop_fresh()
    for task in shop_tasks:
        assert not reward_compute(task=task, final_state=fresh, calls=[], replies=[]).success, task["id"]


def test_it_rewards_the_gold_solution_with_full_marks(shop_tasks):
    task = task_by_template(shop_tasks, "schedule_repair_no_id")
    result = reward_compute(task=task, final_state=gold_replay(task).state, calls=_gold_calls(task), replies=_told(task))
    assert result.success and result.reward == 1.0
    assert result.breakdown == {"state": 1.0, "grounded": 1.0, "lookups": 1.0, "outputs": 1.0,
                                "lookups_made": float(len(task["gold_lookups"])), "outputs_told": 1.0}


def test_it_fails_an_episode_that_invents_an_order_id(shop_tasks):
    task = task_by_template(shop_tasks, "track_order")
    replies = [_told(task)[0] + " I also found your other order O99999."]
    result = reward_compute(task=task, final_state=gold_replay(task).state, calls=_gold_calls(task), replies=replies)
    assert not result.success
    assert result.breakdown["grounded"] == 0.0 and result.invented_ids == ["O99999"]
    assert result.breakdown["state"] == result.breakdown["lookups"] == result.breakdown["outputs"] == 1.0


def test_it_fails_a_change_with_wrong_arguments_on_the_state_component(shop_tasks):
    task = task_by_template(shop_tasks, "cancel_order")
    action = copy.deepcopy(task["gold_actions"][0])
    action["arguments"]["reason"] = "delivery_too_slow" if action["arguments"]["reason"] != "delivery_too_slow" \
        else "found_cheaper"
    wrong = copy.deepcopy(task) | {"gold_actions": [action]}
    result = reward_compute(task=task, final_state=gold_replay(wrong).state, calls=_gold_calls(wrong), replies=[])
    assert not result.success and result.breakdown["state"] == 0.0 and result.breakdown["lookups"] == 1.0


def test_it_counts_only_successful_calls_as_look_ups(shop_tasks):
    task = task_by_template(shop_tasks, "track_order")
    calls = [dict(c, ok=c["name"] != "track_shipment") for c in _gold_calls(task)]
    result = reward_compute(task=task, final_state=shop_fresh(), calls=calls, replies=_told(task))
    assert result.breakdown["lookups"] == 0.0
    assert [m["name"] for m in result.missing_lookups] == ["track_shipment"]


def test_it_compares_amounts_as_numbers_and_other_facts_as_text():
    assert mentions("79.00", "The fee is $79.")
    assert mentions("1234.50", "That is 1,234.50 USD")
    assert not mentions("79.00", "The fee is 179.00 USD or 7.90")
    assert mentions("size M", "I recommend Size  M for you")
    assert not mentions("2025-06-18", "It arrives on 2025-06-19")


def test_it_reports_an_unsolvable_task_and_why(shop_tasks):
    task = copy.deepcopy(task_by_template(shop_tasks, "cancel_order"))
    shipped = next(o for o in shop_fresh()["orders"].values() if o["status"] == "shipped")
    task["gold_actions"][0]["arguments"]["order_id"] = shipped["id"]
    problems = task_problems(task)
    assert any("gold call fails on a fresh shop" in p and "only pending or processing orders" in p for p in problems)


def test_it_reports_a_task_that_an_idle_agent_would_pass(shop_tasks):
    task = copy.deepcopy(task_by_template(shop_tasks, "material_info"))
    task["gold_lookups"] = []
    task["required_outputs"] = []
    assert task_problems(task) == ["the task has neither gold look-ups nor gold actions, so nothing can be checked"]


def test_it_reports_a_required_fact_no_tool_can_tell(shop_tasks):
    task = copy.deepcopy(task_by_template(shop_tasks, "track_order"))
    task["required_outputs"].append({"label": "driver", "value": "Mr. Smith", "derived": False})
    assert any("'driver'" in p and "appears in no gold tool result" in p for p in task_problems(task))


def test_it_names_each_structural_problem(shop_tasks):
    task = copy.deepcopy(shop_tasks[0])
    task["domain"] = "furniture"
    task["persona"]["patience"] = 0
    task["gold_actions"] = [{"name": "launch_rocket", "arguments": {}}]
    del task["split"]
    spec, problems = spec_errors(task)
    assert spec is None
    joined = " | ".join(problems)
    for where in ("domain:", "persona.patience:", "gold_actions.0.name:", "split:"):
        assert where in joined
