"""Each of τ²-bench retail's 16 tools on the benchmark's own database: its success path and the
refusals an agent can cause, which are the benchmark's error text, returned and never raised."""
import json

import pytest

from evaluation.environments.tau2_retail import reward
from evaluation.environments.tau2_retail.tools import TOOLS, WRITE_TOOLS, tool_run, tool_schemas

PENDING, PENDING_USER = "#W8367380", "ava_nguyen_6646"  # 3 items, paid by credit_card_5683823
DELIVERED, DELIVERED_USER = "#W3113816", "emma_santos_9753"  # 5 items, paid by credit_card_5869505
PROCESSED = "#W7554560"
ADDRESS = {"address1": "1 Elm St", "address2": "", "city": "Austin", "state": "TX", "country": "USA", "zip": "73301"}

CASES = [
    # (tool, arguments, ok, what the answer contains)
    ("calculate", {"expression": "(534.84 - 528.12) * 2"}, True, "13.44"),
    ("calculate", {"expression": "2 + x"}, False, "Error: Invalid characters in expression"),
    ("calculate", {"expression": "1 / 0"}, False, "Error: division by zero"),
    ("cancel_pending_order", {"order_id": PENDING, "reason": "ordered by mistake"}, True, '"status": "cancelled"'),
    ("cancel_pending_order", {"order_id": PENDING, "reason": "too expensive"}, False, "Error: Invalid reason"),
    ("cancel_pending_order", {"order_id": DELIVERED, "reason": "no longer needed"}, False,
     "Error: Non-pending order cannot be cancelled"),
    ("cancel_pending_order", {"order_id": "W8367380", "reason": "no longer needed"}, False, "Error: Order not found"),
    ("exchange_delivered_order_items", {"order_id": DELIVERED, "item_ids": ["2206116040"],
                                        "new_item_ids": ["7811981098"], "payment_method_id": "credit_card_5869505"},
     True, '"exchange_price_difference": 3.95'),
    ("exchange_delivered_order_items", {"order_id": PENDING, "item_ids": ["2444431651"], "new_item_ids": ["3333391894"],
                                        "payment_method_id": "credit_card_5683823"}, False,
     "Error: Non-delivered order cannot be exchanged"),
    ("exchange_delivered_order_items", {"order_id": DELIVERED, "item_ids": ["2206116040", "2206116040"],
                                        "new_item_ids": ["7811981098", "7811981098"],
                                        "payment_method_id": "credit_card_5869505"}, False,
     "Error: Number of 2206116040 not found."),
    ("exchange_delivered_order_items", {"order_id": DELIVERED, "item_ids": ["2206116040"],
                                        "new_item_ids": ["1676105083"], "payment_method_id": "credit_card_5869505"},
     False, "Error: New item 1676105083 not found or available"),
    ("exchange_delivered_order_items", {"order_id": DELIVERED, "item_ids": ["4274709903"],
                                        "new_item_ids": ["2206116040"], "payment_method_id": "credit_card_5869505"},
     False, "Error: Variant not found"),
    ("find_user_id_by_name_zip", {"first_name": "yusuf", "last_name": "ROSSI", "zip": "19122"}, True,
     "yusuf_rossi_9620"),
    ("find_user_id_by_name_zip", {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19123"}, False,
     "Error: User not found"),
    ("find_user_id_by_email", {"email": "Yusuf.Rossi7301@example.com"}, True, "yusuf_rossi_9620"),
    ("find_user_id_by_email", {"email": "nobody@example.com"}, False, "Error: User not found"),
    ("get_order_details", {"order_id": PENDING}, True, '"user_id": "ava_nguyen_6646"'),
    ("get_order_details", {"order_id": "#W0000000"}, False, "Error: Order not found"),
    ("get_product_details", {"product_id": "7233192239"}, True, '"3333391894"'),
    ("get_product_details", {"product_id": "2444431651"}, False, "Error: Product not found"),
    ("get_item_details", {"item_id": "3333391894"}, True, '"price": 534.14'),
    ("get_item_details", {"item_id": "7233192239"}, False, "Error: Item not found"),
    ("get_user_details", {"user_id": PENDING_USER}, True, '"gift_card_1994993"'),
    ("get_user_details", {"user_id": "ava_nguyen"}, False, "Error: User not found"),
    ("list_all_product_types", {}, True, '"T-Shirt": "9523456873"'),
    ("list_all_product_types", {"category": "all"}, False, "Error: unexpected category"),
    ("modify_pending_order_address", {"order_id": PENDING, **ADDRESS}, True, '"city": "Austin"'),
    ("modify_pending_order_address", {"order_id": PROCESSED, **ADDRESS}, False,
     "Error: Non-pending order cannot be modified"),
    ("modify_pending_order_items", {"order_id": PENDING, "item_ids": ["2444431651"], "new_item_ids": ["3333391894"],
                                    "payment_method_id": "gift_card_1994993"}, True,
     '"status": "pending (item modified)"'),
    ("modify_pending_order_items", {"order_id": PENDING, "item_ids": ["2444431651"], "new_item_ids": ["2444431651"],
                                    "payment_method_id": "credit_card_5683823"}, False,
     "Error: The new item id should be different from the old item id"),
    ("modify_pending_order_items", {"order_id": PENDING, "item_ids": ["2444431651"],
                                    "new_item_ids": ["3333391894", "4422467033"],
                                    "payment_method_id": "credit_card_5683823"}, False,
     "Error: The number of items to be exchanged should match"),
    ("modify_pending_order_items", {"order_id": PENDING, "item_ids": ["2444431651"], "new_item_ids": ["8068777068"],
                                    "payment_method_id": "paypal_0000000"}, False, "Error: Payment method not found"),
    ("modify_pending_order_payment", {"order_id": "#W3502364", "payment_method_id": "paypal_7007375"}, True,
     '"amount": 489.62, "payment_method_id": "paypal_7007375"'),
    ("modify_pending_order_payment", {"order_id": PENDING, "payment_method_id": "gift_card_1994993"}, False,
     "Error: Insufficient gift card balance to pay for the order"),
    ("modify_pending_order_payment", {"order_id": PENDING, "payment_method_id": "credit_card_5683823"}, False,
     "Error: The new payment method should be different from the current one"),
    ("modify_user_address", {"user_id": PENDING_USER, **ADDRESS}, True, '"zip": "73301"'),
    ("modify_user_address", {"user_id": "no_such_user_1", **ADDRESS}, False, "Error: User not found"),
    ("return_delivered_order_items", {"order_id": DELIVERED, "item_ids": ["4274709903", "2206116040"],
                                      "payment_method_id": "gift_card_6023546"}, True,
     '"return_items": ["2206116040", "4274709903"]'),
    ("return_delivered_order_items", {"order_id": DELIVERED, "item_ids": ["2206116040"],
                                      "payment_method_id": "credit_card_0000000"}, False,
     "Error: Payment method not found"),
    ("return_delivered_order_items", {"order_id": DELIVERED, "item_ids": ["3333391894"],
                                      "payment_method_id": "credit_card_5869505"}, False, "Error: Some item not found"),
    ("transfer_to_human_agents", {"summary": "wants a refund in cash"}, True, "Transfer successful"),
    ("transfer_to_human_agents", {}, False, "Error: missing summary"),
    ("get_order_details", {"order_id": 8367380}, False, "Error: order_id must be a string"),
    ("no_such_tool", {}, False, "Error: Tool 'no_such_tool' not found."),
]


@pytest.mark.parametrize(("tool", "arguments", "ok", "answer"), CASES,
                         ids=[f"{case[0]}-{'ok' if case[2] else 'error'}-{n}" for n, case in enumerate(CASES)])
def test_tool_answers(tau2_world, tool, arguments, ok, answer):
    state = reward.state_fresh(tau2_world)
    result = tool_run(state, tool, arguments)
    assert (result.ok, answer in result.content) == (ok, True), result.content
    if not ok:  # a refusal changes nothing
        assert state.changes() == {}


def test_every_tool_has_a_success_and_an_error_case():
    assert len(TOOLS) == 16
    for name in TOOLS:
        assert {ok for tool, _, ok, _ in CASES if tool == name} == {True, False}, name


def test_schemas_name_every_tool_with_required_arguments():
    schemas = {schema["function"]["name"]: schema["function"]["parameters"] for schema in tool_schemas()}
    assert set(schemas) == set(TOOLS)
    assert schemas["exchange_delivered_order_items"]["properties"]["item_ids"]["type"] == "array"
    assert schemas["modify_user_address"]["required"] == ["user_id", "address1", "address2", "city", "state",
                                                          "country", "zip"]


def test_cancel_refunds_a_gift_card_at_once(tau2_world):
    state = reward.state_fresh(tau2_world)
    order = state.read("orders", "#W2611340")  # paid 536.65 with gift_card_1725971
    balance = state.read("users", order["user_id"])["payment_methods"]["gift_card_1725971"]["balance"]
    assert tool_run(state, "cancel_pending_order", {"order_id": "#W2611340", "reason": "no longer needed"}).ok is False
    # a processed order cannot be cancelled; a pending one paid by gift card is refunded at once
    pending = next(o for o in state.base["orders"].values() if o["status"] == "pending"
                   and o["payment_history"][0]["payment_method_id"].startswith("gift_card"))
    card = pending["payment_history"][0]["payment_method_id"]
    before = state.read("users", pending["user_id"])["payment_methods"][card]["balance"]
    assert tool_run(state, "cancel_pending_order", {"order_id": pending["order_id"], "reason": "no longer needed"}).ok
    after = state.read("users", pending["user_id"])["payment_methods"][card]["balance"]
    assert after == round(before + pending["payment_history"][0]["amount"], 2)
    assert state.base["users"][order["user_id"]]["payment_methods"]["gift_card_1725971"]["balance"] == balance


def test_modifying_items_pays_the_difference_and_keeps_the_benchmarks_last_variant_rule(tau2_world):
    state = reward.state_fresh(tau2_world)
    result = tool_run(state, "modify_pending_order_items", {
        "order_id": PENDING, "item_ids": ["2444431651"], "new_item_ids": ["3333391894"],
        "payment_method_id": "gift_card_1994993"})
    order = json.loads(result.content)
    assert order["payment_history"][-1]["transaction_type"] == "refund"
    assert order["items"][0]["price"] == 534.14
    assert state.read("users", PENDING_USER)["payment_methods"]["gift_card_1994993"]["balance"] == round(78.0 + 0.7, 2)
    assert tool_run(state, "modify_pending_order_items", {  # only once: the order is no longer "pending"
        "order_id": PENDING, "item_ids": ["1689914594"], "new_item_ids": ["2444431651"],
        "payment_method_id": "credit_card_5683823"}).content == "Error: Non-pending order cannot be modified"
    assert set(WRITE_TOOLS) < set(TOOLS)
