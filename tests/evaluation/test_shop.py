"""The seeded shop, its tools and the 130 generated tasks."""
import json

import pytest

from evaluation.shop.generator import DEFAULT_SEED, shop_fresh, shop_generate
from evaluation.shop.tools import TOOLS, tool_execute, tool_schemas, write_tool_names
from tests.evaluation.conftest import task_by_template


def test_it_generates_the_same_shop_for_the_same_seed_and_another_for_another_seed():
    first, again, other = shop_generate(7), shop_generate(7), shop_generate(8)
    assert json.dumps(first, sort_keys=True) == json.dumps(again, sort_keys=True)
    assert json.dumps(first, sort_keys=True) != json.dumps(other, sort_keys=True)


def test_it_fills_both_domains_with_what_their_tasks_need():
    shop = shop_fresh()
    products = shop["products"].values()
    appliances = [p for p in products if p["domain"] == "appliances"]
    clothing = [p for p in products if p["domain"] == "clothing"]
    assert appliances and all(p["fault_codes"] and p["warranty_months"] and "installation" in p for p in appliances)
    assert clothing and all(p["size_chart"]["ranges"] and p["variants"] and p["material"] for p in clothing)
    shipped = [o for o in shop["orders"].values() if o["tracking_id"]]
    assert shipped and all(shop["shipments"][o["tracking_id"]]["events"] for o in shipped)
    assert {p["id"] for p in shop["policies"]} >= {"POL-RETURNS", "POL-EXCHANGE", "POL-PRICE", "POL-INSTALL"}


def test_it_gives_every_episode_its_own_copy_of_the_shop():
    state = shop_fresh()
    order_id = next(o["id"] for o in state["orders"].values() if o["status"] == "processing")
    assert tool_execute(state, "cancel_order", {"order_id": order_id, "reason": "ordered_by_mistake"}).ok
    assert shop_fresh()["orders"][order_id]["status"] == "processing"


def test_it_declares_openai_function_schemas_for_about_fifteen_tools():
    schemas = tool_schemas()
    assert 14 <= len(schemas) <= 18
    for schema in schemas:
        function = schema["function"]
        assert schema["type"] == "function" and function["description"]
        assert function["parameters"]["type"] == "object"
        assert set(function["parameters"]["required"]) <= set(function["parameters"]["properties"])
    assert {"cancel_order", "return_items", "exchange_item", "issue_refund", "change_shipping_address",
            "schedule_service", "issue_invoice", "transfer_to_human"} == write_tool_names()


@pytest.mark.parametrize("arguments, message", [
    (None, "must be a JSON object"),
    ("O10001", "must be a JSON object"),
    ({}, "missing required argument(s): order_id"),
    ({"order_id": 10001}, "argument order_id must be of type string"),
    ({"order_id": "O10001", "colour": "red"}, "unknown argument(s) colour"),
    ({"order_id": "O99999"}, "no order with order_id 'O99999'"),
])
def test_it_answers_bad_arguments_with_an_error_message_and_never_raises(arguments, message):
    result = tool_execute(shop_fresh(), "get_order_details", arguments)
    assert not result.ok and result.data is None
    assert result.content.startswith("Error: ") and message in result.content


def test_it_names_the_available_tools_when_asked_for_an_unknown_one():
    result = tool_execute(shop_fresh(), "delete_customer", {"customer_id": "C1001"})
    assert not result.ok and "unknown tool 'delete_customer'" in result.content and "cancel_order" in result.content


def _order(state, **wanted):
    return next(o for o in state["orders"].values() if all(o[k] == v for k, v in wanted.items()))


def test_it_enforces_business_rules_in_write_tools():
    state = shop_fresh()
    shipped = _order(state, status="shipped")
    refused = tool_execute(state, "cancel_order", {"order_id": shipped["id"], "reason": "no_longer_needed"})
    assert not refused.ok and "only pending or processing orders can be cancelled" in refused.content
    bad_reason = tool_execute(state, "cancel_order", {"order_id": shipped["id"], "reason": "bored"})
    assert "argument reason must be one of" in bad_reason.content
    delivered = _order(state, status="delivered", domain="clothing")
    too_much = tool_execute(state, "issue_refund", {"order_id": delivered["id"], "amount": delivered["total"] + 1,
                                                    "reason": "goodwill"})
    assert not too_much.ok and "exceeds what can still be refunded" in too_much.content
    appliance = next(o for o in state["orders"].values() if o["domain"] == "appliances" and o["status"] == "shipped")
    sunday = tool_execute(state, "schedule_service", {"order_id": appliance["id"], "item_id": appliance["items"][0]["item_id"],
                                                      "service_type": "installation", "date": "2025-06-22"})
    assert not sunday.ok and "Sunday" in sunday.content


def test_it_refuses_a_return_outside_the_window_and_says_the_window(shop_tasks):
    task = task_by_template(shop_tasks, "return_outside_window", "clothing")
    order_id = task["intents"][0]["slots"]["order_id"]
    state = shop_fresh()
    item = state["orders"][order_id]["items"][0]["item_id"]
    result = tool_execute(state, "return_items", {"order_id": order_id, "item_ids": [item], "reason": "damaged"})
    assert not result.ok and "within 30 days of delivery" in result.content
    assert state["orders"][order_id]["items"][0]["status"] == "ordered"


def test_it_generates_130_tasks_53_appliances_77_clothing(shop_tasks):
    assert len(shop_tasks) == 130 and len({t["id"] for t in shop_tasks}) == 130
    assert sum(t["domain"] == "appliances" for t in shop_tasks) == 53
    assert sum(t["domain"] == "clothing" for t in shop_tasks) == 77
    assert {t["split"] for t in shop_tasks} == {"train", "test"}
    assert {t["difficulty"] for t in shop_tasks} == {"easy", "medium", "hard"}
    for kind in ("wrong_tool", "wrong_arguments", "result_unused"):
        assert sum(kind in t["error_kinds"] for t in shop_tasks) >= 30


def test_it_makes_wrong_tool_tasks_where_the_customer_names_a_product_but_has_no_order_number(shop_tasks):
    for task in (t for t in shop_tasks if "wrong_tool" in t["error_kinds"]):
        assert "order_id" in task["unknown"]
        assert any(g["name"] == "list_customer_orders" for g in task["gold_lookups"])
        assert all("order_id" not in i["slots"] for i in task["intents"] if i["kind"] != "transfer")
        assert any("product" in i["slots"] for i in task["intents"])


def test_it_generates_the_same_tasks_every_time(shop_tasks):
    from evaluation.models import ErrorKind
    from evaluation.shop.errors import ERROR_KINDS
    from evaluation.shop.task_specs import tasks_generate

    assert tuple(ErrorKind.values) == ERROR_KINDS
    assert tasks_generate() == shop_tasks
    assert all(t["shop_seed"] == DEFAULT_SEED for t in shop_tasks)
    assert set(TOOLS) >= {c["name"] for t in shop_tasks for c in t["gold_lookups"] + t["gold_actions"]}


def test_no_tool_raises_whatever_arguments_a_model_sends():
    import random

    rng = random.Random(3)
    state = shop_fresh()
    order = next(o for o in state["orders"].values() if o["status"] == "delivered")
    values = [None, "", "   ", "O10001", order["id"], order["items"][0]["item_id"], "C1001", "2025-06-20",
              "2025-13-45", "not a date", -5, 0, 3.5, 10 ** 400, float("nan"), float("inf"), True, [], ["x"],
              [order["items"][0]["item_id"]], {}, {"a": 1}, "TX-123456", "installation", "repair", "goodwill"]
    for _ in range(2000):
        name = rng.choice(list(TOOLS))
        keys = list(TOOLS[name].parameters["properties"]) + ["extra"]
        arguments = {key: rng.choice(values) for key in rng.sample(keys, rng.randint(0, len(keys)))}
        result = tool_execute(state, name, arguments)
        assert result.ok or result.content.startswith("Error: ")
    json.dumps(state, allow_nan=False)  # the shop never stored NaN or infinity
