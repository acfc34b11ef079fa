"""The 130 built-in tasks (53 household appliances, 77 clothing), generated from templates over
the seeded shop.

A template picks a customer and order that satisfy its preconditions, then writes the task: the
persona, the customer's ordered intents with the facts each one needs, what the customer knows
and does not know, the gold look-ups and actions, and the facts the agent must tell.
"""
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta

from evaluation.shop import catalogue as cat
from evaluation.shop.errors import task_error_kinds
from evaluation.shop.generator import DEFAULT_SEED, TODAY, shop_fresh
from evaluation.shop.tools import add_months, price_protection_amount

EMOTIONS = ("neutral", "frustrated", "angry", "anxious", "happy", "confused")
TRUST_LEVELS = ("low", "medium", "high")
IDENTIFIERS = ("email", "phone", "customer_id")
IDENTIFY_TOOL = {"email": "find_customer_by_email", "phone": "find_customer_by_phone", "customer_id": "get_customer"}
COMPANIES = ("Brightline Ltd", "Okafor & Sons", "Lakeside Dental", "Northwind Studio", "Pixel Forge Inc",
             "Greenleaf Cafe", "Atlas Logistics", "Harper Legal")


@dataclass
class Draft:
    """A task being written by a template."""

    domain: str
    template: str
    customer: dict
    identifier: str
    intents: list[dict] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    lookups: list[dict] = field(default_factory=list)
    actions: list[dict] = field(default_factory=list)
    outputs: list[dict] = field(default_factory=list)

    def lookup(self, name: str, **arguments) -> None:
        call = {"name": name, "arguments": arguments}
        if call not in self.lookups:
            self.lookups.append(call)

    def act(self, name: str, **arguments) -> None:
        self.actions.append({"name": name, "arguments": arguments})

    def output(self, label: str, value: str, *, derived: bool = False) -> None:
        self.outputs.append({"label": label, "value": value, "derived": derived})


@dataclass(frozen=True)
class Template:
    name: str
    domain: str
    count: int
    write: Callable  # (shop, rng, draft, order, item) -> bool (False: this candidate does not fit)
    candidates: Callable  # (shop) -> list[(order, item)]
    by_id: bool = True
    identify: bool = True


def money(amount: float) -> str:
    return f"{amount:.2f}"


# --- candidate pools ----------------------------------------------------------------------

def _orders(shop: dict, domain: str, *statuses: str) -> list[dict]:
    return [o for o in shop["orders"].values() if o["domain"] == domain and o["status"] in statuses]


def _age(day: str) -> int:
    return (TODAY - date.fromisoformat(day)).days


def _pairs(orders, keep=lambda order, item: True) -> list[tuple[dict, dict]]:
    return [(o, i) for o in orders for i in o["items"] if i["status"] == "ordered" and keep(o, i)]


def _unique_product(shop: dict, order: dict, item: dict) -> bool:
    """True when no other order of the customer holds this product, so naming it is unambiguous."""
    return not any(o["id"] != order["id"] and any(i["product_id"] == item["product_id"] for i in o["items"])
                   for o in shop["orders"].values() if o["customer_id"] == order["customer_id"])


def _pool(domain: str, *statuses: str, keep=lambda shop, order, item: True):
    return lambda shop: _pairs(_orders(shop, domain, *statuses), lambda o, i: keep(shop, o, i))


def _delivered_within(days: int, *, more_than: int = -1):
    return lambda shop, o, i: more_than < _age(o["delivered_on"]) <= days


# --- intent writers -------------------------------------------------------------------------

def _intent(draft: Draft, kind: str, order: dict | None, item: dict | None, *, by_id: bool, **slots) -> dict:
    intent = {"kind": kind, "slots": dict(slots)}
    if item is not None:
        intent["slots"]["product"] = item["name"]
    if order is not None:
        if by_id:
            intent["slots"]["order_id"] = order["id"]
        else:
            _need_order_list(draft)
    draft.intents.append(intent)
    return intent


def _need_order_list(draft: Draft) -> None:
    if "order_id" not in draft.unknown:
        draft.unknown.append("order_id")
    draft.lookup("list_customer_orders", customer_id=draft.customer["id"])


def write_track(shop, rng, draft, order, item, *, by_id=True) -> bool:
    _intent(draft, "track_order", order, item, by_id=by_id)
    draft.lookup("track_shipment", order_id=order["id"])
    shipment = shop["shipments"][order["tracking_id"]]
    draft.output("shipment status", shipment["status"])
    draft.output("estimated delivery date", shipment["eta"])
    return True


def write_cancel(shop, rng, draft, order, item, *, by_id=True) -> bool:
    reason = rng.choice(cat.CANCEL_REASONS)
    _intent(draft, "cancel_order", order, item, by_id=by_id, reason=reason)
    draft.act("cancel_order", order_id=order["id"], reason=reason)
    return True


def write_return(shop, rng, draft, order, item, *, by_id=True) -> bool:
    reason = rng.choice(cat.RETURN_REASONS)
    _intent(draft, "return_item", order, item, by_id=by_id, reason=reason)
    draft.lookup("get_order_details", order_id=order["id"])
    draft.act("return_items", order_id=order["id"], item_ids=[item["item_id"]], reason=reason)
    draft.output("refund amount", money(item["unit_price"] * item["quantity"]))
    return True


def write_return_late(shop, rng, draft, order, item, *, by_id=True) -> bool:
    reason = rng.choice(cat.RETURN_REASONS)
    _intent(draft, "return_item", order, item, by_id=by_id, reason=reason)
    _intent(draft, "transfer", None, None, by_id=by_id)
    draft.act("transfer_to_human", customer_id=draft.customer["id"], summary="return outside the return window")
    draft.output("return window", f"{cat.RETURN_WINDOW_DAYS[order['domain']]} days")
    return True


def write_warranty(shop, rng, draft, order, item, *, by_id=True) -> bool:
    product = shop["products"][item["product_id"]]
    _intent(draft, "warranty_info", order, item, by_id=by_id)
    draft.lookup("get_order_details", order_id=order["id"])
    draft.output("warranty end date", add_months(order["delivered_on"], product["warranty_months"]))
    return True


def _visit_day(rng: random.Random, earliest: int) -> str:
    day = TODAY + timedelta(days=rng.randint(earliest + 1, 21))
    return (day + timedelta(days=1) if day.weekday() == 6 else day).isoformat()


def write_install(shop, rng, draft, order, item, *, by_id=True) -> bool:
    product = shop["products"][item["product_id"]]
    if not product["installation"]["available"]:
        return False
    day = _visit_day(rng, cat.INSTALLATION_LEAD_DAYS[0])
    _intent(draft, "schedule_installation", order, item, by_id=by_id, date=day)
    draft.lookup("get_order_details", order_id=order["id"])
    draft.act("schedule_service", order_id=order["id"], item_id=item["item_id"], service_type="installation",
              date=day)
    draft.output("installation fee", money(product["installation"]["fee"]))
    return True


def write_repair(shop, rng, draft, order, item, *, by_id=True) -> bool:
    product = shop["products"][item["product_id"]]
    if add_months(order["delivered_on"], product["warranty_months"]) < TODAY.isoformat():
        return False
    code = rng.choice(sorted(product["fault_codes"]))
    day = _visit_day(rng, 1)
    _intent(draft, "schedule_repair", order, item, by_id=by_id, fault_code=code, date=day)
    draft.lookup("get_order_details", order_id=order["id"])
    draft.lookup("get_product_details", product_id=product["id"])
    draft.act("schedule_service", order_id=order["id"], item_id=item["item_id"], service_type="repair",
              date=day, fault_code=code)
    draft.output("fault code meaning", product["fault_codes"][code])
    return True


def write_warranty_repair(shop, rng, draft, order, item, *, by_id=True) -> bool:
    return write_warranty(shop, rng, draft, order, item, by_id=by_id) and \
        write_repair(shop, rng, draft, order, item, by_id=by_id)


def write_invoice(shop, rng, draft, order, item, *, by_id=True, company=False) -> bool:
    if company:
        name, tax_id = rng.choice(COMPANIES), f"TX-{rng.randint(100000, 999999)}"
        _intent(draft, "invoice", order, None, by_id=True, invoice_type="company", company_name=name, tax_id=tax_id)
        draft.act("issue_invoice", order_id=order["id"], invoice_type="company", company_name=name, tax_id=tax_id)
    else:
        _intent(draft, "invoice", order, None, by_id=True, invoice_type="personal")
        draft.act("issue_invoice", order_id=order["id"], invoice_type="personal")
    draft.output("invoice number", f"INV-{order['id']}")
    return True


def write_price_protection(shop, rng, draft, order, item, *, by_id=True) -> bool:
    product = shop["products"][item["product_id"]]
    drop = round((item["unit_price"] - product["price"]) * item["quantity"], 2)
    if drop <= 0 or _age(order["placed_on"]) > cat.PRICE_PROTECTION_DAYS:
        return False
    _intent(draft, "price_protection", order, item, by_id=by_id)
    draft.lookup("get_order_details", order_id=order["id"])
    draft.lookup("get_product_details", product_id=product["id"])
    draft.act("issue_refund", order_id=order["id"], amount=drop, reason="price_protection")
    draft.output("refund amount", money(drop))
    return price_protection_amount(shop, order) >= drop


def write_address(shop, rng, draft, order, item, *, by_id=True) -> bool:
    city, prefix = rng.choice(cat.CITIES)
    address = {"street": f"{rng.randint(1, 240)} {rng.choice(cat.STREETS)}", "city": city,
               "postcode": f"{prefix}{rng.randint(100, 999)}"}
    if address["street"] == order["shipping_address"]["street"]:
        return False
    _intent(draft, "change_address", order, item, by_id=by_id, address=address)
    draft.act("change_shipping_address", order_id=order["id"], **address)
    return True


def write_exchange(shop, rng, draft, order, item, *, by_id=True, change="size") -> bool:
    product = shop["products"][item["product_id"]]
    wanted = _exchange_target(product, item, change)
    in_stock = [v for v in product["variants"] if v["stock"] >= 2 and v["sku"] != item["sku"]]
    if wanted is None or len(in_stock) < 2:
        return False  # no target, or no second variant a careless agent could pick by mistake
    slot = {"size": wanted["size"]} if change == "size" else {"colour": wanted["colour"]}
    _intent(draft, "exchange_item", order, item, by_id=by_id, **slot)
    draft.lookup("get_order_details", order_id=order["id"])
    draft.lookup("get_product_details", product_id=product["id"])
    draft.act("exchange_item", order_id=order["id"], item_id=item["item_id"], new_sku=wanted["sku"])
    return True


def _exchange_target(product: dict, item: dict, change: str) -> dict | None:
    for variant in product["variants"]:
        same_other = variant["colour"] == item["colour"] if change == "size" else variant["size"] == item["size"]
        if same_other and variant["sku"] != item["sku"] and variant["stock"] >= item["quantity"] + 1:
            return variant
    return None


def write_missing(shop, rng, draft, order, item, *, by_id=True) -> bool:
    if len(order["items"]) < 2:
        return False
    amount = round(item["unit_price"] * item["quantity"], 2)
    _intent(draft, "missing_item", order, item, by_id=by_id)
    draft.lookup("get_order_details", order_id=order["id"])
    draft.act("issue_refund", order_id=order["id"], amount=amount, reason="missing_item")
    draft.output("refund amount", money(amount))
    return True


def write_size_advice(shop, rng, draft, order, item, *, by_id=True) -> bool:
    product = shop["products"][item["product_id"]]
    size = rng.choice(cat.SIZES[1:4])
    low, high = product["size_chart"]["ranges"][size]
    measure = product["size_chart"]["measurement"]
    _intent(draft, "size_advice", None, item, by_id=by_id, measurement={measure: rng.randint(low, high)})
    draft.lookup("get_product_details", product_id=product["id"])
    draft.output("recommended size", f"size {size}", derived=True)
    return True


def write_material(shop, rng, draft, order, item, *, by_id=True) -> bool:
    product = shop["products"][item["product_id"]]
    _intent(draft, "material_info", None, item, by_id=by_id)
    draft.lookup("get_product_details", product_id=product["id"])
    draft.output("material", product["material"])
    return True


def write_exchange_then_track(shop, rng, draft, order, item, *, by_id=True) -> bool:
    shipped = [o for o in _orders(shop, "clothing", "shipped") if o["customer_id"] == order["customer_id"]]
    if not shipped or not write_exchange(shop, rng, draft, order, item, by_id=by_id):
        return False
    return write_track(shop, rng, draft, shipped[0], shipped[0]["items"][0], by_id=True)


def _with(writer, **options):
    return lambda shop, rng, draft, order, item, by_id=True: writer(shop, rng, draft, order, item, by_id=by_id,
                                                                    **options)


# --- the catalogue of templates (53 appliances + 77 clothing) ------------------------------

_RECENT_APPLIANCE = _pool("appliances", "pending", "processing", "shipped", "delivered",
                          keep=lambda s, o, i: _age(o["placed_on"]) <= cat.PRICE_PROTECTION_DAYS)
_RETURNABLE = {d: _pool(d, "delivered", keep=_delivered_within(cat.RETURN_WINDOW_DAYS[d])) for d in cat.RETURN_WINDOW_DAYS}
_LATE = {d: _pool(d, "delivered", keep=_delivered_within(75, more_than=cat.RETURN_WINDOW_DAYS[d]))
         for d in cat.RETURN_WINDOW_DAYS}
_EXCHANGEABLE = _pool("clothing", "delivered", keep=_delivered_within(cat.EXCHANGE_WINDOW_DAYS))


def _products_pool(domain: str):
    return lambda shop: [(None, {"product_id": p["id"], "name": p["name"], "item_id": None})
                         for p in shop["products"].values() if p["domain"] == domain]


TEMPLATES = (
    Template("track_order", "appliances", 5, write_track, _pool("appliances", "shipped")),
    Template("track_order_no_id", "appliances", 5, write_track, _pool("appliances", "shipped"), by_id=False),
    Template("cancel_order", "appliances", 4, write_cancel, _pool("appliances", "pending", "processing")),
    Template("cancel_order_no_id", "appliances", 4, write_cancel, _pool("appliances", "pending", "processing"),
             by_id=False),
    Template("warranty_info", "appliances", 4, write_warranty, _pool("appliances", "delivered")),
    Template("schedule_installation", "appliances", 5, write_install, _pool("appliances", "shipped", "delivered")),
    Template("schedule_repair_no_id", "appliances", 5, write_repair, _pool("appliances", "delivered"), by_id=False),
    Template("company_invoice", "appliances", 4, _with(write_invoice, company=True),
             _pool("appliances", "processing", "shipped", "delivered")),
    Template("price_protection", "appliances", 4, write_price_protection, _RECENT_APPLIANCE),
    Template("change_address", "appliances", 4, write_address, _pool("appliances", "pending", "processing")),
    Template("return_item", "appliances", 3, write_return, _RETURNABLE["appliances"]),
    Template("return_outside_window", "appliances", 3, write_return_late, _LATE["appliances"]),
    Template("warranty_then_repair_no_id", "appliances", 3, write_warranty_repair, _pool("appliances", "delivered"),
             by_id=False),
    Template("track_order", "clothing", 5, write_track, _pool("clothing", "shipped")),
    Template("track_order_no_id", "clothing", 6, write_track, _pool("clothing", "shipped"), by_id=False),
    Template("cancel_order", "clothing", 5, write_cancel, _pool("clothing", "pending", "processing")),
    Template("cancel_order_no_id", "clothing", 5, write_cancel, _pool("clothing", "pending", "processing"),
             by_id=False),
    Template("exchange_size", "clothing", 7, write_exchange, _EXCHANGEABLE),
    Template("exchange_colour_no_id", "clothing", 6, _with(write_exchange, change="colour"), _EXCHANGEABLE,
             by_id=False),
    Template("size_advice", "clothing", 6, write_size_advice, _products_pool("clothing"), identify=False),
    Template("material_info", "clothing", 5, write_material, _products_pool("clothing"), identify=False),
    Template("return_item", "clothing", 6, write_return, _RETURNABLE["clothing"]),
    Template("return_item_no_id", "clothing", 5, write_return, _RETURNABLE["clothing"], by_id=False),
    Template("change_address", "clothing", 5, write_address, _pool("clothing", "pending", "processing")),
    Template("personal_invoice", "clothing", 4, write_invoice, _pool("clothing", "processing", "shipped", "delivered")),
    Template("missing_item", "clothing", 5, write_missing, _pool("clothing", "delivered",
                                                                 keep=_delivered_within(cat.RETURN_WINDOW_DAYS["clothing"]))),
    Template("return_outside_window", "clothing", 3, write_return_late, _LATE["clothing"]),
    Template("exchange_then_track", "clothing", 4, write_exchange_then_track, _EXCHANGEABLE),
)


# --- assembling tasks -----------------------------------------------------------------------

def tasks_generate(seed: int = DEFAULT_SEED) -> list[dict]:
    """The built-in task set over the shop of `seed`: 53 appliance and 77 clothing tasks."""
    shop = shop_fresh(seed)
    rng = random.Random(seed + 1)
    tasks, numbers = [], {"appliances": 0, "clothing": 0}
    for template in TEMPLATES:
        for draft in _drafts(shop, rng, template):
            numbers[template.domain] += 1
            tasks.append(_finish(shop, rng, draft, seed, numbers[template.domain]))
    return tasks


def _drafts(shop: dict, rng: random.Random, template: Template) -> list[Draft]:
    pairs = template.candidates(shop)
    rng.shuffle(pairs)
    drafts, used_orders = [], set()
    for order, item in pairs:
        if len(drafts) == template.count:
            break
        draft = _draft_for(shop, rng, template, order, item, used_orders)
        if draft is not None:
            drafts.append(draft)
            used_orders.add(order["id"] if order else item["product_id"])
    if len(drafts) < template.count:
        raise RuntimeError(f"template {template.name}/{template.domain}: only {len(drafts)} of {template.count} fit")
    return drafts


def _draft_for(shop, rng, template: Template, order, item, used: set) -> Draft | None:
    key = order["id"] if order else item["product_id"]
    if key in used or (order and not template.by_id and not _unique_product(shop, order, item)):
        return None
    customer = shop["customers"][order["customer_id"]] if order else rng.choice(list(shop["customers"].values()))
    draft = Draft(domain=template.domain, template=template.name, customer=customer,
                  identifier=rng.choice(IDENTIFIERS))
    if template.identify:
        value = customer[draft.identifier] if draft.identifier != "customer_id" else customer["id"]
        draft.lookup(IDENTIFY_TOOL[draft.identifier], **{draft.identifier: value})
    ok = template.write(shop, rng, draft, order, item, by_id=template.by_id)
    return draft if ok else None


def _finish(shop: dict, rng: random.Random, draft: Draft, seed: int, number: int) -> dict:
    customer = draft.customer
    known = {draft.identifier: customer["id"] if draft.identifier == "customer_id" else customer[draft.identifier]}
    task = {
        "id": f"shop-{'app' if draft.domain == 'appliances' else 'clo'}-{number:03d}",
        "domain": draft.domain,
        "template": draft.template,
        "shop_seed": seed,
        "customer_id": customer["id"],
        "persona": {"name": customer["name"], "emotion": rng.choice(EMOTIONS), "patience": rng.randint(2, 5),
                    "trust": rng.choice(TRUST_LEVELS)},
        "intents": draft.intents,
        "known": known,
        "unknown": draft.unknown,
        "gold_lookups": draft.lookups,
        "gold_actions": draft.actions,
        "required_outputs": draft.outputs,
    }
    task["error_kinds"] = task_error_kinds(task, shop)
    task["difficulty"] = _difficulty(task)
    task["split"] = "train" if rng.random() < 0.4 else "test"
    task["instructions"] = task_instructions(task)
    return task


def _difficulty(task: dict) -> str:
    if len(task["intents"]) > 1 or len(task["error_kinds"]) == 3:
        return "hard"
    if "order_id" in task["unknown"] or len(task["error_kinds"]) > 1:
        return "medium"
    return "easy"


_INTENT_GOALS = {
    "track_order": "find out where your order of the {product} is and when it will arrive",
    "cancel_order": "cancel your order of the {product} (reason: {reason})",
    "return_item": "return the {product} (reason: {reason})",
    "exchange_item": "exchange the {product} for {change}",
    "warranty_info": "find out until when the warranty of your {product} runs",
    "schedule_installation": "book the installation of your {product} on {date}",
    "schedule_repair": "get a technician to repair your {product}, which shows fault code {fault_code}, on {date}",
    "invoice": "get a {invoice_type} invoice for your order",
    "price_protection": "get the price difference refunded, because the {product} you bought is now cheaper",
    "change_address": "have your order of the {product} shipped to a new address: {address}",
    "size_advice": "find out which size of the {product} to buy (your {measurement})",
    "material_info": "find out what the {product} is made of",
    "missing_item": "get a refund for the {product}, which was missing from your delivery",
    "transfer": "be transferred to a human agent if the assistant cannot help",
}


def task_instructions(task: dict) -> str:
    """The scenario in words, for an LLM customer (the agenda customer reads the structure)."""
    goals = [_goal_text(intent) for intent in task["intents"]]
    known = "; ".join(f"{key.replace('_', ' ')}: {value}" for key, value in task["known"].items())
    lines = [f"You are {task['persona']['name']}, a customer of an online shop, talking to its assistant.",
             "Your requests, one at a time and in this order: " + " Then ".join(f"({n}) {g}."
                                                                               for n, g in enumerate(goals, 1)),
             f"You can identify yourself with: {known}."]
    if "order_id" in task["unknown"]:
        lines.append("You do not know your order number; you only know the product's name.")
    return " ".join(lines)


def _goal_text(intent: dict) -> str:
    slots = dict(intent["slots"])
    slots["product"] = f'"{slots["product"]}"' if "product" in slots else "items"
    if intent["kind"] == "exchange_item":
        slots["change"] = f"size {slots['size']}" if "size" in slots else f"the colour {slots.get('colour')}"
    if "address" in slots:
        a = slots["address"]
        slots["address"] = f"{a['street']}, {a['city']} {a['postcode']}"
    if "measurement" in slots:
        slots["measurement"] = ", ".join(f"{k.replace('_cm', '')} {v} cm" for k, v in slots["measurement"].items())
    text = _INTENT_GOALS[intent["kind"]].format_map(_Default(slots))
    return text + (f" (order {slots['order_id']})" if "order_id" in slots else "")


class _Default(dict):
    def __missing__(self, key):
        return "?"
