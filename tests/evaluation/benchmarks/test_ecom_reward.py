"""ECom-Bench's reward and the validator: gold replay of every task earns 1, doing nothing earns 0,
each component fails on its own, and the final database is ECom-Bench's own schema."""
import copy
import json

import pytest

from evaluation.environments.ecom_bench import ECOM
from evaluation.environments.ecom_bench.reward import database_hash, normalised
from evaluation.environments.ecom_bench.source import DATA_FILES
from tests.evaluation.benchmarks.ecom_support import ecom_tasks, ecom_world  # noqa: F401


def gold(task: dict) -> dict:
    """The gold solution as a replay takes it: look-ups, then actions, and the required texts told."""
    return {"calls": task["gold_lookups"] + task["gold_actions"],
            "replies": tuple(output["value"] for output in task["required_outputs"])}


def by_id(tasks: list[dict], task_id: str) -> dict:
    return next(task for task in tasks if task["id"] == task_id)


def test_gold_replay_earns_reward_1_on_all_53_tasks(ecom_tasks):
    failed = {}
    for task in ecom_tasks:
        replay = ECOM.replay(task=task, **gold(task))
        if replay.reward.reward != 1.0 or not all(result.ok for result in replay.results):
            failed[task["id"]] = replay.reward.breakdown
    assert not failed and len(ecom_tasks) == 53


def test_doing_nothing_earns_0_where_the_task_asks_for_something(ecom_tasks):
    for task in ecom_tasks:
        nothing = ECOM.replay(task=task, calls=[])
        assert nothing.reward.reward == 0.0, task["id"]
        if task["gold_actions"]:
            assert nothing.reward.breakdown["actions"] == 0.0, task["id"]


def test_the_validator_passes_every_task(ecom_tasks):
    assert {task["id"]: ECOM.spec_errors(task)[1] for task in ecom_tasks} == {task["id"]: [] for task in ecom_tasks}


def test_each_component_fails_on_its_own(ecom_tasks):
    task = by_id(ecom_tasks, "0")
    solution = gold(task)
    skip_cancel = [call for call in solution["calls"] if call["arguments"].get("action") != "取消"]
    assert ECOM.replay(task=task, calls=skip_cancel).reward.breakdown == {
        "actions": 0.0, "searches": 1.0, "outputs": 1.0, "searches_missing": 0, "outputs_missing": 0}
    other_args = [{**c, "arguments": {**c["arguments"], "shop_id": " " + c["arguments"]["shop_id"]}}
                  if c["name"] == "get_installation_service_info_tool" else c for c in solution["calls"]]
    searched = ECOM.replay(task=task, calls=other_args).reward
    assert searched.breakdown["searches"] == 0.0 and searched.breakdown["actions"] == 1.0
    assert searched.missing_lookups == [task["gold_lookups"][1]] and searched.reward == 0.0
    told = by_id(ecom_tasks, next(t["id"] for t in ecom_tasks if len(t["required_outputs"]) == 2))
    half = ECOM.replay(task=told, calls=gold(told)["calls"], replies=(told["required_outputs"][0]["value"],)).reward
    assert half.breakdown["outputs"] == 0.0 and half.missing_outputs == told["required_outputs"][1:]


def test_outputs_are_read_across_the_replies_joined(ecom_tasks):
    told = next(t for t in ecom_tasks if any(len(o["value"]) > 1 for o in t["required_outputs"]))
    value = next(o["value"] for o in told["required_outputs"] if len(o["value"]) > 1)
    others = tuple(o["value"] for o in told["required_outputs"] if o["value"] != value)
    split = ECOM.replay(task=told, calls=gold(told)["calls"], replies=(*others, "……" + value[:1], value[1:] + "。"))
    assert split.reward.breakdown["outputs"] == 1.0


def test_a_failed_look_up_still_counts_as_made_as_in_the_benchmark(ecom_tasks):
    task = copy.deepcopy(by_id(ecom_tasks, "0"))
    absent = {"name": "get_logistics_info_tool", "arguments": {**task["gold_lookups"][0]["arguments"], "order_id": "9"}}
    task["gold_lookups"].append(absent)
    replay = ECOM.replay(task=task, **gold(task))
    assert not replay.results[len(task["gold_lookups"]) - 1].ok
    assert replay.reward.breakdown["searches"] == 1.0


def test_the_final_database_has_the_data_files_names_as_keys(ecom_tasks, tmp_path):
    task = by_id(ecom_tasks, "0")
    replay = ECOM.replay(task=task, **gold(task))
    assert set(replay.database) == set(DATA_FILES)
    dumped = tmp_path / "final.json"
    dumped.write_text(json.dumps(replay.database, ensure_ascii=False, sort_keys=True), encoding="utf-8")
    final = json.loads(dumped.read_text(encoding="utf-8"))
    assert final["orders"]["jd"]["5de650c946e7c3001814990f"]["cnjd喜哥2号"]["313271663680"]["订单状态"] == "已取消"
    assert final["register_cashback"] == {"jd": {"5de650c946e7c3001814990f": {"cnjd喜哥2号": {"314231443863": True}}}}
    assert database_hash(final) == replay.reward.state_hash == replay.reward.gold_state_hash


def test_bare_and_agent_names_replay_to_the_same_database(ecom_tasks):
    task = by_id(ecom_tasks, "3")
    bare = ECOM.replay(task=task, calls=task["gold_actions"])
    named = ECOM.replay(task=task, calls=[{**a, "name": a["name"] + "_tool"} for a in task["gold_actions"]])
    assert bare.database == named.database and "1234567890" in bare.database["orders"]["jd"][task["shop_id"]][
        task["user_id"]]


def test_a_replay_starts_from_a_fresh_database_each_time(ecom_tasks, ecom_world):
    task = by_id(ecom_tasks, "0")
    changed = ECOM.replay(task=task, calls=task["gold_actions"]).database
    assert changed != ecom_world.world.database
    assert ECOM.replay(task=task, calls=[]).database == ecom_world.world.database


def test_list_order_does_not_count_as_in_the_benchmark():
    assert normalised({"b": [3, 1, 2], "a": [{"y": 1}, {"x": 2}]}) == {"a": [{"x": 2}, {"y": 1}], "b": [1, 2, 3]}
    assert normalised(["b", 1]) == ["b", 1]  # text beside numbers keeps its order
    assert database_hash({"k": [2, 1]}) == database_hash({"k": [1, 2]})


@pytest.mark.parametrize("change, problem", [
    (lambda t: t.pop("world"), "world: Field required"),
    (lambda t: t.update(domain="clothing"), "domain: must be one of appliances"),
    (lambda t: t["gold_actions"].append({"name": "launch_rocket", "arguments": {}}),
     "gold_actions: unknown tool 'launch_rocket'"),
    (lambda t: t.update(world="0" * 64), "world: no benchmark database stored under"),
])
def test_the_validator_refuses_a_broken_spec(ecom_tasks, change, problem):
    task = copy.deepcopy(by_id(ecom_tasks, "0"))
    change(task)
    spec, problems = ECOM.spec_errors(task)
    assert spec is None and any(problem in p for p in problems), problems


def test_the_validator_names_a_gold_call_that_fails_and_a_task_nothing_solves(ecom_tasks):
    task = copy.deepcopy(by_id(ecom_tasks, "0"))
    task["gold_actions"][0]["arguments"]["order_id"] = "999"
    _, problems = ECOM.spec_errors(task)
    assert any(p.startswith("gold call manage_urgent fails on a fresh database: Error: 没有找到") for p in problems)
    empty = {**copy.deepcopy(by_id(ecom_tasks, "0")), "gold_actions": [], "gold_lookups": [], "required_outputs": []}
    assert ECOM.spec_errors(empty)[1] == ["an agent that does nothing would earn reward 1"]
