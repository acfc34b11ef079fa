"""The scripted agent policy (offline backend, labelled "scripted").

It reads the customer's words with the rule-based parser, uses the shop's tools like a careful
agent, and asks for confirmation before every change. At configured per-kind rates (drawn once
per episode from its seed) it makes the MemOrb paper's three errors:

- wrong tool: with no order number it searches the catalogue instead of listing the customer's
  orders, and so never finds the order;
- wrong arguments: it passes a plausible but wrong argument to the change it makes;
- result unused: it answers without the facts the tools returned.

It avoids an error kind as soon as a retrieved memory says how (see `errors.CUES`): this is what
makes the memory loop observable offline. A memory carrying bad advice (`errors.MISLEADING_CUES`)
makes it commit that kind even when not planned, so a harmful memory is observable too.
"""
import random

from evaluation.shop.env import ShopEnv
from evaluation.shop.errors import (
    RESULT_UNUSED,
    WRONG_ARGUMENTS,
    WRONG_TOOL,
    corrupt_arguments,
    kinds_cued,
    kinds_misled,
)
from evaluation.shop.nlu import REASON_PHRASES, parse_customer

ANYTHING_ELSE = "Is there anything else I can help you with?"
_IDENTIFY = (("customer_id", "get_customer"), ("email", "find_customer_by_email"), ("phone", "find_customer_by_phone"))
_PRODUCT_ONLY = ("size_advice", "material_info")


class StepRecallingEnv:
    """The episode's shop, which after each tool call asks the memory for the next decision."""

    def __init__(self, env: ShopEnv, after_call):
        self._env, self._after_call = env, after_call

    def use(self, name: str, **arguments):
        result = self._env.use(name, **arguments)
        self._after_call()
        return result

    def __getattr__(self, name: str):
        return getattr(self._env, name)


class ScriptedAgent:
    label = "scripted"
    tokens_in = tokens_out = 0

    def __init__(self, *, seed: int, key: str, error_rates: dict[str, float] | None = None):
        rng = random.Random(f"{seed}:{key}:agent")
        rates = error_rates or {}
        self.planned = {kind: rng.random() < rates.get(kind, 0.0) for kind in (WRONG_TOOL, WRONG_ARGUMENTS,
                                                                             RESULT_UNUSED)}
        self.avoided: set[str] = set()
        self.misled: set[str] = set()
        self.committed: set[str] = set()
        self.customer: dict | None = None
        self.goal: str | None = None
        self.slots: dict = {}
        self.pending: tuple[str, dict] | None = None
        self.searched = False

    def errs(self, kind: str) -> bool:
        """Whether the agent makes this error now: misled by a memory (bad advice wins over good), or
        planned for the episode and not yet remembered."""
        if kind in self.misled or (self.planned[kind] and kind not in self.avoided):
            self.committed.add(kind)
            return True
        return False

    # --- one turn -------------------------------------------------------------------------

    def respond(self, *, text: str, memory: str, env: ShopEnv, recall=None) -> str:
        """`recall()`, when given, is asked after each tool call for the memory block of the next
        decision (a per-step memory such as DMRM); its cues count from then on."""
        self._remember(memory)
        if recall is not None:
            env = StepRecallingEnv(env, lambda: self._remember(recall()))
        return self._answer(text, env)

    def _remember(self, memory: str) -> None:
        self.avoided |= kinds_cued(memory)
        self.misled |= kinds_misled(memory)

    def _answer(self, text: str, env: ShopEnv) -> str:
        parsed = parse_customer(text)
        if self.pending and parsed.affirm:
            return self._execute_pending(env)
        if self.pending:
            self.pending = None
            if parsed.deny:
                return f"All right, I won't change anything. {ANYTHING_ELSE}"
        self._update_goal(parsed)
        identity = {k: v for k, v in parsed.slots.items() if k in dict(_IDENTIFY)}
        if self.customer is None and identity:
            failure = self._identify(env, identity)
            if failure:
                return failure
        if self.goal is None:
            greeting = f"Thank you, {self.customer['name']}. " if self.customer and identity else "Hello! "
            return greeting + "How can I help you today?"
        if self.customer is None and self.goal not in _PRODUCT_ONLY:
            return "I can help with that. First, could you give me your email, phone number or customer ID?"
        return HANDLERS[self.goal](self, env)

    def _update_goal(self, parsed) -> None:
        if parsed.intent and parsed.intent != self.goal:
            self.goal, self.slots, self.searched = parsed.intent, {}, False
        self.slots.update({k: v for k, v in parsed.slots.items() if k not in dict(_IDENTIFY)})

    def _identify(self, env: ShopEnv, identity: dict) -> str | None:
        for key, tool in _IDENTIFY:
            if key in identity:
                result = env.use(tool, **{key: identity[key]})
                if result.ok:
                    self.customer = result.data
                    return None
        return "I couldn't find an account with that. Could you check your email, phone number or customer ID?"

    def propose(self, env: ShopEnv, name: str, arguments: dict, summary) -> str:
        if self.errs(WRONG_ARGUMENTS):
            arguments = corrupt_arguments(env.state, {"name": name, "arguments": arguments}) or arguments
        self.pending = (name, arguments)
        return f"To confirm, I'll {summary(arguments)}. Shall I proceed?"

    def _execute_pending(self, env: ShopEnv) -> str:
        name, arguments = self.pending
        self.pending, goal = None, self.goal
        self.goal = None
        result = env.use(name, **arguments)
        if not result.ok:
            if self.errs(RESULT_UNUSED):
                return f"I'm sorry, I can't do that. {ANYTHING_ELSE}"
            return f"I'm sorry, I can't do that: {result.content.removeprefix('Error: ')}. {ANYTHING_ELSE}"
        return DONE_MESSAGES[name](self, result.data, goal) + " " + ANYTHING_ELSE

    # --- finding things -------------------------------------------------------------------

    def order(self, env: ShopEnv) -> dict | str:
        """The order the customer means (its details), or what to say when it cannot be found."""
        if "order_id" in self.slots:
            return self._order_by_id(env, self.slots["order_id"])
        product = self.slots.get("product")
        if not product:
            return "Could you give me the order number, or tell me which product it is about?"
        if self.errs(WRONG_TOOL):
            return self._search_instead(env, product)
        listing = env.use("list_customer_orders", customer_id=self.customer["id"])
        for summary in listing.data["orders"] if listing.ok else []:
            if any(name.lower() == product.lower() for name in summary["products"]):
                return self._order_by_id(env, summary["order_id"])
        return f'I couldn\'t find an order with the "{product}" on your account. Could you give me the order number?'

    def _search_instead(self, env: ShopEnv, product: str) -> str:
        if self.searched or self.slots.get("no_order_id"):
            return "I'm sorry, I can't find your order without the order number."
        self.searched = True
        env.use("search_products", query=product)
        return f'I found the "{product}" in our catalogue. Could you give me the order number so I can find your order?'

    def _order_by_id(self, env: ShopEnv, order_id: str) -> dict | str:
        result = env.use("get_order_details", order_id=order_id)
        if not result.ok:
            return f"I couldn't find order {order_id}. Could you check the order number?"
        if result.data["customer_id"] != self.customer["id"]:
            return f"Order {order_id} is not on your account. Could you check the order number?"
        return result.data

    def item(self, order: dict) -> dict | str:
        product = (self.slots.get("product") or "").lower()
        matches = [i for i in order["items"] if i["name"].lower() == product] or \
            (order["items"] if len(order["items"]) == 1 else [])
        if not matches:
            return f"Which item of order {order['id']} is it about?"
        return matches[0]

    def order_and_item(self, env: ShopEnv) -> tuple[dict, dict] | str:
        order = self.order(env)
        if isinstance(order, str):
            return order
        item = self.item(order)
        return item if isinstance(item, str) else (order, item)

    def product(self, env: ShopEnv, product_id: str | None = None) -> dict | str:
        if product_id is None:
            name = self.slots.get("product")
            if not name:
                return "Which product are you asking about?"
            found = env.use("search_products", query=name)
            exact = [p for p in found.data["results"] if p["name"].lower() == name.lower()] if found.ok else []
            if not exact:
                return f'I couldn\'t find "{name}" in our catalogue. Could you check the product name?'
            product_id = exact[0]["product_id"]
        result = env.use("get_product_details", product_id=product_id)
        return result.data if result.ok else "I couldn't open that product's details, sorry."

    def facts(self, told: str, vague: str) -> str:
        """The reply with the tools' facts, or a vague one when the agent ignores its results."""
        return vague if self.errs(RESULT_UNUSED) else told


# --- intent handlers: each returns the agent's reply ---------------------------------------------

def handle_track(agent: ScriptedAgent, env: ShopEnv) -> str:
    order = agent.order(env)
    if isinstance(order, str):
        return order
    result = env.use("track_shipment", order_id=order["id"])
    agent.goal = None
    if not result.ok:
        return f"Order {order['id']} has not shipped yet; it is {order['status']}. {ANYTHING_ELSE}"
    s, last = result.data, result.data["events"][-1]
    return agent.facts(
        f"Your order {order['id']} is {s['status']} with {s['carrier']} (tracking {s['tracking_id']}); estimated "
        f"delivery {s['eta']}. Latest update: {last['description']} on {last['date']}. {ANYTHING_ELSE}",
        f"I've checked your order {order['id']}: it's on its way. {ANYTHING_ELSE}")


def handle_cancel(agent: ScriptedAgent, env: ShopEnv) -> str:
    order = agent.order(env)
    if isinstance(order, str):
        return order
    if "reason" not in agent.slots:
        return "May I ask why you want to cancel the order?"
    return agent.propose(env, "cancel_order", {"order_id": order["id"], "reason": agent.slots["reason"]},
                          lambda a: f"cancel order {a['order_id']} with the reason '{_reason_text('cancel_order', a)}'")


def handle_return(agent: ScriptedAgent, env: ShopEnv) -> str:
    found = agent.order_and_item(env)
    if isinstance(found, str):
        return found
    order, item = found
    if "reason" not in agent.slots:
        return "May I ask why you want to return it?"
    arguments = {"order_id": order["id"], "item_ids": [item["item_id"]], "reason": agent.slots["reason"]}
    return agent.propose(env, "return_items", arguments,
                          lambda a: f"return the {item['name']} ({', '.join(a['item_ids'])}) from order "
                                    f"{a['order_id']} with the reason '{_reason_text('return_item', a)}'")


def _reason_text(kind: str, arguments: dict) -> str:
    return REASON_PHRASES[kind].get(arguments["reason"], arguments["reason"].replace("_", " "))


def handle_exchange(agent: ScriptedAgent, env: ShopEnv) -> str:
    found = agent.order_and_item(env)
    if isinstance(found, str):
        return found
    order, item = found
    if "size" not in agent.slots and "colour" not in agent.slots:
        return "Which size or colour would you like instead?"
    product = agent.product(env, item["product_id"])
    if isinstance(product, str):
        return product
    size, colour = agent.slots.get("size", item["size"]), agent.slots.get("colour", item["colour"])
    wanted = next((v for v in product["variants"] if v["size"] == size and v["colour"] == colour), None)
    if wanted is None or wanted["stock"] < item["quantity"]:
        agent.goal = None
        return f"I'm sorry, the {product['name']} in {colour}, size {size} is not available. {ANYTHING_ELSE}"
    arguments = {"order_id": order["id"], "item_id": item["item_id"], "new_sku": wanted["sku"]}
    return agent.propose(env, "exchange_item", arguments,
                          lambda a: f"exchange your {item['name']} ({item['colour']}, size {item['size']}) from "
                                    f"order {a['order_id']} for SKU {a['new_sku']}")


def handle_warranty(agent: ScriptedAgent, env: ShopEnv) -> str:
    found = agent.order_and_item(env)
    if isinstance(found, str):
        return found
    order, item = found
    agent.goal = None
    if "warranty_until" not in item:
        return f"The warranty starts when the {item['name']} is delivered. {ANYTHING_ELSE}"
    return agent.facts(f"The warranty of your {item['name']} runs until {item['warranty_until']}. {ANYTHING_ELSE}",
                       f"Your {item['name']} comes with the manufacturer's warranty. {ANYTHING_ELSE}")


def handle_installation(agent: ScriptedAgent, env: ShopEnv) -> str:
    found = agent.order_and_item(env)
    if isinstance(found, str):
        return found
    order, item = found
    if "date" not in agent.slots:
        return "Which date would you like for the installation (YYYY-MM-DD)?"
    arguments = {"order_id": order["id"], "item_id": item["item_id"], "service_type": "installation",
                 "date": agent.slots["date"]}
    return agent.propose(env, "schedule_service", arguments,
                          lambda a: f"book the installation of your {item['name']} on {a['date']}")


def handle_repair(agent: ScriptedAgent, env: ShopEnv) -> str:
    found = agent.order_and_item(env)
    if isinstance(found, str):
        return found
    order, item = found
    if "fault_code" not in agent.slots:
        return "Which fault code is shown on the display?"
    product = agent.product(env, item["product_id"])
    if isinstance(product, str):
        return product
    if "date" not in agent.slots:
        return "Which date would suit you for the technician's visit (YYYY-MM-DD)?"
    code = agent.slots["fault_code"]
    meaning = product["fault_codes"].get(code, "an unknown fault")
    agent.slots["meaning"] = meaning
    arguments = {"order_id": order["id"], "item_id": item["item_id"], "service_type": "repair",
                 "date": agent.slots["date"], "fault_code": code}
    diagnosis = agent.facts(f"fault code {code} means {meaning}; ", "")
    return agent.propose(env, "schedule_service", arguments,
                          lambda a: f"book a repair of your {item['name']} on {a['date']} ({diagnosis}"
                                    f"free under warranty)")


def handle_invoice(agent: ScriptedAgent, env: ShopEnv) -> str:
    order = agent.order(env)
    if isinstance(order, str):
        return order
    arguments = {"order_id": order["id"], "invoice_type": agent.slots.get("invoice_type", "personal")}
    if arguments["invoice_type"] == "company":
        arguments.update(company_name=agent.slots["company_name"], tax_id=agent.slots["tax_id"])
    return agent.propose(env, "issue_invoice", arguments,
                          lambda a: f"issue a {a['invoice_type']} invoice for order {a['order_id']}"
                                    + (f" to {a['company_name']} ({a['tax_id']})" if a.get("company_name") else ""))


def handle_price_protection(agent: ScriptedAgent, env: ShopEnv) -> str:
    found = agent.order_and_item(env)
    if isinstance(found, str):
        return found
    order, item = found
    product = agent.product(env, item["product_id"])
    if isinstance(product, str):
        return product
    drop = round((item["unit_price"] - product["price"]) * item["quantity"], 2)
    if drop <= 0:
        agent.goal = None
        return f"The {item['name']} costs {product['price']:.2f} USD now, the same as you paid. {ANYTHING_ELSE}"
    arguments = {"order_id": order["id"], "amount": drop, "reason": "price_protection"}
    return agent.propose(env, "issue_refund", arguments,
                          lambda a: f"refund the price difference {_amount(agent, a)}on order {a['order_id']}")


def handle_address(agent: ScriptedAgent, env: ShopEnv) -> str:
    order = agent.order(env)
    if isinstance(order, str):
        return order
    if "address" not in agent.slots:
        return "What is the new address (street, city and postcode)?"
    arguments = {"order_id": order["id"], **agent.slots["address"]}
    return agent.propose(env, "change_shipping_address", arguments,
                          lambda a: f"ship order {a['order_id']} to {a['street']}, {a['city']} {a['postcode']}")


def handle_missing(agent: ScriptedAgent, env: ShopEnv) -> str:
    found = agent.order_and_item(env)
    if isinstance(found, str):
        return found
    order, item = found
    amount = round(item["unit_price"] * item["quantity"], 2)
    return agent.propose(env, "issue_refund", {"order_id": order["id"], "amount": amount, "reason": "missing_item"},
                          lambda a: f"refund {_amount(agent, a)}on order {a['order_id']} for the missing "
                                    f"{item['name']}")


def _amount(agent: ScriptedAgent, arguments: dict) -> str:
    return agent.facts(f"of {arguments['amount']:.2f} USD ", "")


def handle_size(agent: ScriptedAgent, env: ShopEnv) -> str:
    product = agent.product(env)
    if isinstance(product, str):
        return product
    chart = product["size_chart"]
    measure = chart["measurement"]
    value = agent.slots.get("measurement", {}).get(measure)
    if value is None:
        return f"Could you tell me your {measure.replace('_cm', '')} measurement in cm?"
    size = next((s for s, (low, high) in chart["ranges"].items() if low <= value <= high), None)
    agent.goal = None
    if size is None:
        return f"I'm sorry, {value} cm is outside the {product['name']}'s size chart. {ANYTHING_ELSE}"
    return agent.facts(f"For the {product['name']} I recommend size {size} ({measure.replace('_cm', '')} {value} cm). "
                       f"{ANYTHING_ELSE}", f"Our size chart will help you choose; the sizes run true. {ANYTHING_ELSE}")


def handle_material(agent: ScriptedAgent, env: ShopEnv) -> str:
    product = agent.product(env)
    if isinstance(product, str):
        return product
    agent.goal = None
    return agent.facts(f"The {product['name']} is made of {product['material']}; care: {product['care']}. "
                       f"{ANYTHING_ELSE}", f"The {product['name']} is made of quality fabric. {ANYTHING_ELSE}")


def handle_transfer(agent: ScriptedAgent, env: ShopEnv) -> str:
    agent.goal = None
    result = env.use("transfer_to_human", customer_id=agent.customer["id"],
                     summary="customer asked for a human agent")
    if not result.ok:
        return f"I'm sorry, I couldn't reach a human agent right now. {ANYTHING_ELSE}"
    return "I'm transferring you to a human agent now."


HANDLERS = {
    "track_order": handle_track, "cancel_order": handle_cancel, "return_item": handle_return,
    "exchange_item": handle_exchange, "warranty_info": handle_warranty, "schedule_installation": handle_installation,
    "schedule_repair": handle_repair, "invoice": handle_invoice, "price_protection": handle_price_protection,
    "change_address": handle_address, "missing_item": handle_missing, "size_advice": handle_size,
    "material_info": handle_material, "transfer": handle_transfer,
}


def _done_cancel(agent, data, goal):
    return f"Order {data['order_id']} is cancelled; {data['refund_amount']:.2f} USD goes back to your {data['refund_to']}."


def _done_return(agent, data, goal):
    return agent.facts(f"Return {data['return_id']} is registered; {data['refund_amount']:.2f} USD will be refunded "
                       f"to your {data['refund_to']}.", "Your return is registered.")


def _done_exchange(agent, data, goal):
    return f"Exchange {data['exchange_id']} is registered: you'll receive the {data['colour']} one in size {data['size']}."


def _done_service(agent, data, goal):
    if data["service_type"] == "repair":
        meaning = agent.slots.get("meaning", "")
        return agent.facts(f"The repair is booked for {data['date']} (appointment {data['appointment_id']}); the fault "
                           f"means {meaning}, and the repair is free under warranty.", "The repair is booked.")
    return agent.facts(f"The installation is booked for {data['date']} (appointment {data['appointment_id']}); the "
                       f"installation fee is {data['fee']:.2f} USD.", "The installation is booked.")


def _done_invoice(agent, data, goal):
    return agent.facts(f"Invoice {data['invoice_id']} for {data['amount']:.2f} USD has been issued.",
                       "Your invoice has been issued.")


def _done_refund(agent, data, goal):
    return agent.facts(f"Refund {data['refund_id']} of {data['amount']:.2f} USD goes back to your {data['refund_to']}.",
                       "The refund is on its way.")


def _done_address(agent, data, goal):
    a = data["shipping_address"]
    return f"Order {data['order_id']} will be shipped to {a['street']}, {a['city']} {a['postcode']}."


DONE_MESSAGES = {
    "cancel_order": _done_cancel, "return_items": _done_return, "exchange_item": _done_exchange,
    "schedule_service": _done_service, "issue_invoice": _done_invoice, "issue_refund": _done_refund,
    "change_shipping_address": _done_address,
}
