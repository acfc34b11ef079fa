"""The 16 tools of τ²-bench's retail domain, written for memweb from the benchmark's tool names,
argument schemas, documented behaviour and data model.

What a call changes, and the text of every refusal, follow the benchmark, so that a list of calls
leaves the same database here as in the benchmark's own harness (docs/BENCHMARKS.md names the few
places where its behaviour is surprising and is kept anyway). Every problem an agent can cause is
the tool's answer ("Error: ..."), never an exception.
"""
import ast
import json
import operator

from evaluation.environments.protocol import ToolResult
from evaluation.environments.tau2_retail.database import RetailState

CANCEL_REASONS = ("no longer needed", "ordered by mistake")
TRANSFER_TOOL = "transfer_to_human_agents"


class ToolRefused(Exception):
    """What the benchmark's tool would answer with "Error: <message>"."""


# ---- rows ---------------------------------------------------------------------------------------

def _order(state: RetailState, order_id: str) -> dict:
    order = state.read("orders", order_id)
    if order is None:
        raise ToolRefused("Order not found")
    return order


def _user(state: RetailState, user_id: str) -> dict:
    user = state.read("users", user_id)
    if user is None:
        raise ToolRefused("User not found")
    return user


def _product(state: RetailState, product_id: str) -> dict:
    product = state.read("products", product_id)
    if product is None:
        raise ToolRefused("Product not found")
    return product


def _variant(state: RetailState, product_id: str, item_id: str) -> dict:
    variant = _product(state, product_id)["variants"].get(item_id)
    if variant is None:
        raise ToolRefused("Variant not found")
    return variant


def _payment_method(state: RetailState, user_id: str, payment_method_id: str) -> dict:
    method = _user(state, user_id)["payment_methods"].get(payment_method_id)
    if method is None:
        raise ToolRefused("Payment method not found")
    return method


def _is_gift_card(method: dict) -> bool:
    return method.get("source") == "gift_card"


def _gift_card_add(state: RetailState, user_id: str, payment_method_id: str, amount: float) -> None:
    """Credit (or, with a negative amount, debit) a gift card; balances are kept to cents as the
    benchmark keeps them."""
    method = state.write("users", user_id)["payment_methods"][payment_method_id]
    method["balance"] = round(method["balance"] + amount, 2)


def _items_held(order: dict, item_ids: list[str], message) -> None:
    """Each item id (duplicates allowed) must be in the order at least as many times as it is listed."""
    held = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > held.count(item_id):
            raise ToolRefused(message(item_id))


def _price_difference(state: RetailState, order: dict, item_ids: list[str], new_item_ids: list[str], *,
                      same_item_refused: bool) -> tuple[float, dict | None]:
    """The sum of (new price - old price) over the pairs, in the benchmark's order of checks, and the
    variant of the last pair (the benchmark gives its price and options to every modified item)."""
    difference, variant = 0, None
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        if same_item_refused and item_id == new_item_id:
            raise ToolRefused("The new item id should be different from the old item id")
        item = next((item for item in order["items"] if item["item_id"] == item_id), None)
        if item is None:
            raise ToolRefused(f"Item {item_id} not found")
        variant = _variant(state, item["product_id"], new_item_id)
        if not variant["available"]:
            raise ToolRefused(f"New item {new_item_id} not found or available")
        difference += variant["price"] - item["price"]
    return difference, variant


# ---- the tools ----------------------------------------------------------------------------------

_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
               ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow}
_SIGNS = {ast.USub: operator.neg, ast.UAdd: operator.pos}
MAX_EXPONENT = 100  # a power beyond this is refused, so an expression cannot tie the worker up


def _arithmetic(node: ast.AST) -> float:
    """Numbers, + - * / // ** and parentheses, evaluated without eval()."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _SIGNS:
        return _SIGNS[type(node.op)](_arithmetic(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolRefused("Exponent too large")
        return _ARITHMETIC[type(node.op)](left, right)
    raise ToolRefused("Invalid expression")


def calculate(state: RetailState, expression: str) -> str:
    if not all(char in "0123456789+-*/(). " for char in expression):
        raise ToolRefused("Invalid characters in expression")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolRefused(f"Invalid expression: {exc.msg}") from None
    try:
        return str(round(float(_arithmetic(tree.body)), 2))
    except ZeroDivisionError:
        raise ToolRefused("division by zero") from None


def cancel_pending_order(state: RetailState, order_id: str, reason: str) -> dict:
    order = _order(state, order_id)
    if order["status"] != "pending":
        raise ToolRefused("Non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolRefused("Invalid reason")
    methods = [_payment_method(state, order["user_id"], p["payment_method_id"]) for p in order["payment_history"]]
    order = state.write("orders", order_id)
    refunds = [{"transaction_type": "refund", "amount": payment["amount"],
                "payment_method_id": payment["payment_method_id"]} for payment in order["payment_history"]]
    for refund, method in zip(refunds, methods):
        if _is_gift_card(method):  # a gift card is refunded at once; other methods in 5-7 business days
            _gift_card_add(state, order["user_id"], refund["payment_method_id"], refund["amount"])
    order["status"], order["cancel_reason"] = "cancelled", reason
    order["payment_history"].extend(refunds)
    return order


def exchange_delivered_order_items(state: RetailState, order_id: str, item_ids: list[str], new_item_ids: list[str],
                                   payment_method_id: str) -> dict:
    order = _order(state, order_id)
    if order["status"] != "delivered":
        raise ToolRefused("Non-delivered order cannot be exchanged")
    _items_held(order, item_ids, lambda item_id: f"Number of {item_id} not found.")
    if len(item_ids) != len(new_item_ids):
        raise ToolRefused("The number of items to be exchanged should match.")
    difference, _ = _price_difference(state, order, item_ids, new_item_ids, same_item_refused=False)
    difference = round(difference, 2)
    method = _payment_method(state, order["user_id"], payment_method_id)
    if _is_gift_card(method) and method["balance"] < difference:
        raise ToolRefused("Insufficient gift card balance to pay for the price difference")
    order = state.write("orders", order_id)
    order.update(status="exchange requested", exchange_items=sorted(item_ids), exchange_new_items=sorted(new_item_ids),
                 exchange_payment_method_id=payment_method_id, exchange_price_difference=difference)
    return order


def find_user_id_by_name_zip(state: RetailState, first_name: str, last_name: str, zip: str) -> str:  # noqa: A002
    for user in state.rows("users"):
        name = user["name"]
        if (name["first_name"].lower() == first_name.lower() and name["last_name"].lower() == last_name.lower()
                and user["address"]["zip"] == zip):
            return user["user_id"]
    raise ToolRefused("User not found")


def find_user_id_by_email(state: RetailState, email: str) -> str:
    for user in state.rows("users"):
        if user["email"].lower() == email.lower():
            return user["user_id"]
    raise ToolRefused("User not found")


def get_order_details(state: RetailState, order_id: str) -> dict:
    return _order(state, order_id)


def get_product_details(state: RetailState, product_id: str) -> dict:
    return _product(state, product_id)


def get_item_details(state: RetailState, item_id: str) -> dict:
    for product in state.rows("products"):
        if item_id in product["variants"]:
            return product["variants"][item_id]
    raise ToolRefused("Item not found")


def get_user_details(state: RetailState, user_id: str) -> dict:
    return _user(state, user_id)


def list_all_product_types(state: RetailState) -> str:
    return json.dumps({product["name"]: product["product_id"] for product in state.rows("products")}, sort_keys=True)


def _address(address1: str, address2: str, city: str, state: str, country: str, zip: str) -> dict:  # noqa: A002
    return {"address1": address1, "address2": address2, "city": city, "country": country, "state": state, "zip": zip}


def modify_pending_order_address(state: RetailState, order_id: str, address1: str, address2: str, city: str,
                                 state_: str, country: str, zip: str) -> dict:  # noqa: A002
    # "pending (item modified)" counts as pending here, as in the benchmark (not for cancelling or items).
    if "pending" not in _order(state, order_id)["status"]:
        raise ToolRefused("Non-pending order cannot be modified")
    order = state.write("orders", order_id)
    order["address"] = _address(address1, address2, city, state_, country, zip)
    return order


def modify_pending_order_items(state: RetailState, order_id: str, item_ids: list[str], new_item_ids: list[str],
                               payment_method_id: str) -> dict:
    order = _order(state, order_id)
    if order["status"] != "pending":
        raise ToolRefused("Non-pending order cannot be modified")
    _items_held(order, item_ids, lambda item_id: f"{item_id} not found")
    if len(item_ids) != len(new_item_ids):
        raise ToolRefused("The number of items to be exchanged should match")
    difference, last_variant = _price_difference(state, order, item_ids, new_item_ids, same_item_refused=True)
    method = _payment_method(state, order["user_id"], payment_method_id)
    if _is_gift_card(method) and method["balance"] < difference:
        raise ToolRefused("Insufficient gift card balance to pay for the new item")
    order = state.write("orders", order_id)
    order["payment_history"].append({"transaction_type": "payment" if difference > 0 else "refund",
                                     "amount": abs(difference), "payment_method_id": payment_method_id})
    if _is_gift_card(method):
        _gift_card_add(state, order["user_id"], payment_method_id, -difference)
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        item = next(item for item in order["items"] if item["item_id"] == item_id)
        # The benchmark gives every modified item the price and options of the last new item; kept,
        # so that final databases compare equal with the benchmark's own.
        item.update(item_id=new_item_id, price=last_variant["price"], options=dict(last_variant["options"]))
    order["status"] = "pending (item modified)"
    return order


def modify_pending_order_payment(state: RetailState, order_id: str, payment_method_id: str) -> dict:
    order = _order(state, order_id)
    if "pending" not in order["status"]:
        raise ToolRefused("Non-pending order cannot be modified")
    method = _payment_method(state, order["user_id"], payment_method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise ToolRefused("There should be exactly one payment for a pending order")
    old_method_id = history[0]["payment_method_id"]
    if old_method_id == payment_method_id:
        raise ToolRefused("The new payment method should be different from the current one")
    amount = history[0]["amount"]
    if _is_gift_card(method) and method["balance"] < amount:
        raise ToolRefused("Insufficient gift card balance to pay for the order")
    old_method = _payment_method(state, order["user_id"], old_method_id)
    order = state.write("orders", order_id)
    order["payment_history"].extend([
        {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
        {"transaction_type": "refund", "amount": amount, "payment_method_id": old_method_id}])
    if _is_gift_card(method):
        _gift_card_add(state, order["user_id"], payment_method_id, -amount)
    if _is_gift_card(old_method):
        _gift_card_add(state, order["user_id"], old_method_id, amount)
    return order


def modify_user_address(state: RetailState, user_id: str, address1: str, address2: str, city: str, state_: str,
                        country: str, zip: str) -> dict:  # noqa: A002
    _user(state, user_id)
    user = state.write("users", user_id)
    user["address"] = _address(address1, address2, city, state_, country, zip)
    return user


def return_delivered_order_items(state: RetailState, order_id: str, item_ids: list[str],
                                 payment_method_id: str) -> dict:
    order = _order(state, order_id)
    if order["status"] != "delivered":
        raise ToolRefused("Non-delivered order cannot be returned")
    method = _payment_method(state, order["user_id"], payment_method_id)
    if not _is_gift_card(method) and payment_method_id != order["payment_history"][0]["payment_method_id"]:
        raise ToolRefused("Payment method should be the original payment method")
    _items_held(order, item_ids, lambda item_id: "Some item not found")
    order = state.write("orders", order_id)
    order.update(status="return requested", return_items=sorted(item_ids), return_payment_method_id=payment_method_id)
    return order


def transfer_to_human_agents(state: RetailState, summary: str) -> str:
    return "Transfer successful"


# ---- schemas and dispatch -----------------------------------------------------------------------

_STRING, _STRINGS = {"type": "string"}, {"type": "array", "items": {"type": "string"}}
_ORDER_ID = ("order_id", _STRING, "The order id, such as '#W0000000' (it starts with '#').")
_PAYMENT = ("payment_method_id", _STRING, "A payment method id of the order's customer, such as 'gift_card_0000000' "
            "or 'credit_card_0000000' (see the user's or the order's details).")
_ADDRESS = (("address1", _STRING, "First line, such as '123 Main St'."),
            ("address2", _STRING, "Second line, such as 'Apt 1', or ''."), ("city", _STRING, "City."),
            ("state", _STRING, "State, such as 'CA'."), ("country", _STRING, "Country, such as 'USA'."),
            ("zip", _STRING, "Zip code, such as '12345'."))
_ITEMS = ("item_ids", _STRINGS, "Item ids in the order (an item can be listed more than once).")
_NEW_ITEMS = ("new_item_ids", _STRINGS, "For each item id at the same position, the item id it becomes: an available "
              "item of the same product.")

# name -> (function, description, [(argument, JSON type, description)]); "writes" tools change the database.
TOOLS: dict[str, tuple] = {
    "calculate": (calculate, "Evaluate an arithmetic expression (numbers, + - * /, parentheses); the result is "
                  "rounded to 2 decimals.", [("expression", _STRING, "Such as '2 + 2'.")]),
    "cancel_pending_order": (cancel_pending_order, "Cancel a pending order and refund its payments (at once to a "
                             "gift card, else in 5-7 business days). Explain it and get the user's explicit yes "
                             "first.", [_ORDER_ID, ("reason", _STRING, "'no longer needed' or 'ordered by mistake'.")]),
    "exchange_delivered_order_items": (exchange_delivered_order_items, "Exchange items of a delivered order for "
                                       "available items of the same products (once per order); the price "
                                       "difference is paid or refunded with the payment method. Get explicit "
                                       "confirmation first.", [_ORDER_ID, _ITEMS, _NEW_ITEMS, _PAYMENT]),
    "find_user_id_by_name_zip": (find_user_id_by_name_zip, "Find a user's id by first name, last name and zip code "
                                 "(use it when the user cannot be found by email).",
                                 [("first_name", _STRING, "Such as 'John'."), ("last_name", _STRING, "Such as 'Doe'."),
                                  ("zip", _STRING, "Such as '12345'.")]),
    "find_user_id_by_email": (find_user_id_by_email, "Find a user's id by email.",
                              [("email", _STRING, "Such as 'someone@example.com'.")]),
    "get_order_details": (get_order_details, "An order's status, items, address, fulfilments and payments.",
                          [_ORDER_ID]),
    "get_product_details": (get_product_details, "A product and all its items (variants) with options, price and "
                            "availability.", [("product_id", _STRING, "A product id (not an item id).")]),
    "get_item_details": (get_item_details, "One item (variant): options, price and availability.",
                         [("item_id", _STRING, "An item id (not a product id).")]),
    "get_user_details": (get_user_details, "A user's name, address, email, payment methods and order ids.",
                         [("user_id", _STRING, "Such as 'sara_doe_496'.")]),
    "list_all_product_types": (list_all_product_types, "Every product type's name and product id (50 in the store).",
                               []),
    "modify_pending_order_address": (modify_pending_order_address, "Change the shipping address of a pending order. "
                                     "Get explicit confirmation first.", [_ORDER_ID, *_ADDRESS]),
    "modify_pending_order_items": (modify_pending_order_items, "Change items of a pending order to available items of "
                                   "the same products; can be done once per order. The price difference is paid or "
                                   "refunded with the payment method. Get explicit confirmation first.",
                                   [_ORDER_ID, _ITEMS, _NEW_ITEMS, _PAYMENT]),
    "modify_pending_order_payment": (modify_pending_order_payment, "Pay a pending order with another payment method "
                                     "of its user. Get explicit confirmation first.", [_ORDER_ID, _PAYMENT]),
    "modify_user_address": (modify_user_address, "Change a user's default address. Get explicit confirmation first.",
                            [("user_id", _STRING, "Such as 'sara_doe_496'."), *_ADDRESS]),
    "return_delivered_order_items": (return_delivered_order_items, "Request the return of items of a delivered order; "
                                     "the refund goes to the original payment method or a gift card. Get explicit "
                                     "confirmation first.", [_ORDER_ID, _ITEMS, _PAYMENT]),
    "transfer_to_human_agents": (transfer_to_human_agents, "Transfer the user to a human agent with a summary; only "
                                 "when the user asks for one or the request cannot be handled under the policy.",
                                 [("summary", _STRING, "The user's issue.")]),
}
WRITE_TOOLS = frozenset({"cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_address",
                         "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address",
                         "return_delivered_order_items"})
# Python names of arguments that would shadow a name inside the tool ("state" is the database).
_PARAMETER = {"state": "state_"}


def tool_schemas() -> list[dict]:
    """The tools as OpenAI function schemas."""
    return [{"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {arg: {**kind, "description": text} for arg, kind, text in args},
                       "required": [arg for arg, _, _ in args], "additionalProperties": False}}}
        for name, (_, description, args) in TOOLS.items()]


def _argument_problem(name: str, arguments) -> str:
    """Why the arguments do not fit the tool's schema ("" when they do)."""
    if not isinstance(arguments, dict):
        return f"arguments of {name} must be an object"
    expected = {arg: kind for arg, kind, _ in TOOLS[name][2]}
    missing = [arg for arg in expected if arg not in arguments]
    unexpected = sorted(set(arguments) - set(expected))
    if missing or unexpected:
        return "; ".join(filter(None, (f"missing {', '.join(missing)}" if missing else "",
                                       f"unexpected {', '.join(unexpected)}" if unexpected else "")))
    for arg, kind in expected.items():
        value = arguments[arg]
        fits = isinstance(value, str) if kind is _STRING else \
            isinstance(value, list) and all(isinstance(item, str) for item in value)
        if not fits:
            return f"{arg} must be {'a string' if kind is _STRING else 'a list of strings'}"
    return ""


def tool_run(state: RetailState, name: str, arguments) -> ToolResult:
    """One call, as the benchmark answers it: the result as text, or "Error: ..."."""
    if name not in TOOLS:
        return ToolResult(ok=False, content=f"Error: Tool '{name}' not found.", data=None)
    problem = _argument_problem(name, arguments if arguments is not None else {})
    if problem:
        return ToolResult(ok=False, content=f"Error: {problem}", data=None)
    function = TOOLS[name][0]
    try:
        answer = function(state, **{_PARAMETER.get(arg, arg): value for arg, value in (arguments or {}).items()})
    except ToolRefused as refused:
        return ToolResult(ok=False, content=f"Error: {refused}", data=None)
    if isinstance(answer, str):
        return ToolResult(ok=True, content=answer, data={"result": answer})
    content = json.dumps(answer, ensure_ascii=False)
    return ToolResult(ok=True, content=content, data=json.loads(content))  # a copy: the agent may keep it
