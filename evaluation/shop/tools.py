"""The shop's tools: OpenAI function-calling schemas and their implementations.

Every tool validates its arguments (types, existence, business rules) and answers either a JSON
result or an error message of the kind an agent would see. `tool_execute` never raises: an
agent's bad call is part of the episode, not a crash.
"""
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from evaluation.environments.protocol import ToolResult
from evaluation.shop import catalogue as cat

ORDER_ID_RE = re.compile(r"\bO\d{5}\b")
TAX_ID_RE = re.compile(r"^TX-\d{6}$")
POSTCODE_RE = re.compile(r"^\d{5}$")


class ToolError(Exception):
    """A refusal the agent sees as the tool's answer."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict
    handler: Callable[..., dict]
    writes: bool

    def schema(self) -> dict:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


TOOLS: dict[str, Tool] = {}


def _params(required: tuple[str, ...] = (), **properties) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def _str(description: str, **extra) -> dict:
    return {"type": "string", "description": description, **extra}


def tool(name: str, description: str, parameters: dict, *, writes: bool = False):
    def register(handler):
        TOOLS[name] = Tool(name, description, parameters, handler, writes)
        return handler
    return register


def tool_schemas() -> list[dict]:
    return [t.schema() for t in TOOLS.values()]


def write_tool_names() -> set[str]:
    return {name for name, t in TOOLS.items() if t.writes}


def tool_execute(state: dict, name: str, arguments) -> ToolResult:
    """Run one tool call on `state` (changed in place by write tools)."""
    found = TOOLS.get(name)
    if found is None:
        return _error(f"unknown tool {name!r}; available tools: {', '.join(TOOLS)}")
    try:
        args = arguments_check(found.parameters, arguments)
        data = found.handler(state, **args)
    except ToolError as exc:
        return _error(str(exc))
    return ToolResult(ok=True, content=json.dumps(data, ensure_ascii=False), data=data)


def _error(message: str) -> ToolResult:
    return ToolResult(ok=False, content=f"Error: {message}", data=None)


# --- argument checking against the JSON schema subset the tools use ---------------

_TYPES = {"string": str, "integer": int, "number": (int, float), "array": list, "object": dict, "boolean": bool}


def arguments_check(schema: dict, arguments) -> dict:
    if not isinstance(arguments, dict):
        raise ToolError(f"arguments must be a JSON object, got {type(arguments).__name__}")
    properties = schema["properties"]
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise ToolError(f"unknown argument(s) {', '.join(unknown)}; expected: {', '.join(properties)}")
    missing = [key for key in schema["required"] if _blank(arguments.get(key))]
    if missing:
        raise ToolError(f"missing required argument(s): {', '.join(missing)}")
    for key, value in arguments.items():
        if value is not None:
            _check_value(key, properties[key], value)
    return {key: value for key, value in arguments.items() if value is not None}


def _blank(value) -> bool:
    return value is None or isinstance(value, str) and not value.strip()


def _check_value(key: str, spec: dict, value) -> None:
    expected = _TYPES[spec["type"]]
    if isinstance(value, bool) and spec["type"] != "boolean" or not isinstance(value, expected):
        raise ToolError(f"argument {key} must be of type {spec['type']}, got {type(value).__name__}")
    if spec["type"] == "number" and not _finite(value):
        raise ToolError(f"argument {key} must be a finite number, got {value!r}"[:200])
    if "enum" in spec and value not in spec["enum"]:
        raise ToolError(f"argument {key} must be one of: {', '.join(spec['enum'])}; got {value!r}")
    if spec["type"] == "array":
        if not value:
            raise ToolError(f"argument {key} must not be empty")
        for element in value:
            if not isinstance(element, str):
                raise ToolError(f"argument {key} must be a list of strings")


def _finite(value) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


# --- look-ups -------------------------------------------------------------------

def _customer(state: dict, customer_id: str) -> dict:
    customer = state["customers"].get(customer_id.strip())
    if customer is None:
        raise ToolError(f"no customer with customer_id {customer_id!r}")
    return customer


def _order(state: dict, order_id: str) -> dict:
    order = state["orders"].get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"no order with order_id {order_id!r}")
    return order


def _product(state: dict, product_id: str) -> dict:
    product = state["products"].get(product_id.strip().upper())
    if product is None:
        raise ToolError(f"no product with product_id {product_id!r}")
    return product


def _item(order: dict, item_id: str) -> dict:
    for item in order["items"]:
        if item["item_id"] == item_id.strip():
            return item
    raise ToolError(f"order {order['id']} has no item {item_id!r}; its items: "
                    + ", ".join(i["item_id"] for i in order["items"]))


@tool("get_customer", "Look up a customer by customer ID (e.g. C1001).",
      _params(("customer_id",), customer_id=_str("Customer ID, e.g. C1001")))
def get_customer(state: dict, customer_id: str) -> dict:
    return _customer(state, customer_id)


@tool("find_customer_by_email", "Find a customer by email address.",
      _params(("email",), email=_str("The customer's email address")))
def find_customer_by_email(state: dict, email: str) -> dict:
    wanted = email.strip().lower()
    for customer in state["customers"].values():
        if customer["email"] == wanted:
            return customer
    raise ToolError(f"no customer with email {email!r}")


@tool("find_customer_by_phone", "Find a customer by phone number (format 555-123-4567).",
      _params(("phone",), phone=_str("The customer's phone number")))
def find_customer_by_phone(state: dict, phone: str) -> dict:
    digits = re.sub(r"\D", "", phone)
    for customer in state["customers"].values():
        if re.sub(r"\D", "", customer["phone"]) == digits:
            return customer
    raise ToolError(f"no customer with phone {phone!r}")


@tool("list_customer_orders", "List a customer's orders (newest first) with their status and product names. "
      "Use it when the customer does not know the order number.",
      _params(("customer_id",), customer_id=_str("Customer ID")))
def list_customer_orders(state: dict, customer_id: str) -> dict:
    customer = _customer(state, customer_id)
    orders = [o for o in state["orders"].values() if o["customer_id"] == customer["id"]]
    orders.sort(key=lambda o: (o["placed_on"], o["id"]), reverse=True)
    return {"customer_id": customer["id"], "orders": [
        {"order_id": o["id"], "placed_on": o["placed_on"], "status": o["status"], "total": o["total"],
         "products": [i["name"] for i in o["items"]]} for o in orders]}


@tool("get_order_details", "Full details of one order: items (item IDs, SKUs, prices), status, dates, "
      "payment, shipping address, refunds and warranty end dates.",
      _params(("order_id",), order_id=_str("Order ID, e.g. O10023")))
def get_order_details(state: dict, order_id: str) -> dict:
    order = _order(state, order_id)
    detail = json.loads(json.dumps(order))
    detail["refunded_total"] = refunded_total(state, order["id"])
    for item in detail["items"]:
        product = state["products"][item["product_id"]]
        if product["domain"] == "appliances" and order["delivered_on"]:
            item["warranty_until"] = add_months(order["delivered_on"], product["warranty_months"])
    return detail


@tool("get_product_details", "Product details: price, warranty, installation, fault codes (appliances); "
      "material, care, size chart, colours and variants with stock (clothing).",
      _params(("product_id",), product_id=_str("Product ID, e.g. AP-1004 or CL-1031")))
def get_product_details(state: dict, product_id: str) -> dict:
    return _product(state, product_id)


@tool("search_products", "Search the catalogue by words of the product name, brand or category.",
      _params(("query",), query=_str("Search words"),
              domain=_str("Optional domain filter", enum=["appliances", "clothing"])))
def search_products(state: dict, query: str, domain: str | None = None) -> dict:
    words = _words(query)
    scored = []
    for product in state["products"].values():
        if domain and product["domain"] != domain:
            continue
        overlap = len(words & _words(f"{product['name']} {product['category']}"))
        if overlap:
            scored.append((-overlap, product["id"], product))
    scored.sort(key=lambda row: row[:2])
    return {"results": [{"product_id": p["id"], "name": p["name"], "domain": p["domain"], "price": p["price"]}
                        for _, _, p in scored[:5]]}


@tool("track_shipment", "Carrier, status, estimated delivery date and tracking events of an order's shipment.",
      _params(("order_id",), order_id=_str("Order ID")))
def track_shipment(state: dict, order_id: str) -> dict:
    order = _order(state, order_id)
    if not order["tracking_id"]:
        raise ToolError(f"order {order['id']} has not shipped yet (status: {order['status']})")
    return state["shipments"][order["tracking_id"]]


@tool("search_policies", "Search the shop's policies and knowledge base (returns, exchanges, refunds, "
      "price protection, installation, repairs, invoices...).", _params(("query",), query=_str("Search words")))
def search_policies(state: dict, query: str) -> dict:
    words = _words(query)
    scored = [(-len(words & _words(f"{p['title']} {p['text']}")), p["id"], p) for p in state["policies"]]
    scored.sort(key=lambda row: row[:2])
    return {"results": [p for score, _, p in scored[:3] if score < 0]}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


# --- writes ---------------------------------------------------------------------

def _today(state: dict) -> date:
    return date.fromisoformat(state["meta"]["today"])


def _next_id(collection: dict, prefix: str, order_id: str) -> str:
    """Record ids depend only on the order and how many records it already has, so replaying
    the same actions in another order of orders gives the same ids."""
    count = sum(1 for record in collection.values() if record["order_id"] == order_id)
    return f"{prefix}-{order_id}-{count + 1}"


def refunded_total(state: dict, order_id: str) -> float:
    records = list(state["refunds"].values()) + list(state["returns"].values())
    return round(sum(r["amount"] for r in records if r["order_id"] == order_id), 2)


def add_months(day: str, months: int) -> str:
    start = date.fromisoformat(day)
    year, month = divmod(start.month - 1 + months, 12)
    return start.replace(year=start.year + year, month=month + 1, day=min(start.day, 28)).isoformat()


@tool("cancel_order", "Cancel an order that is still pending or processing.",
      _params(("order_id", "reason"), order_id=_str("Order ID"),
              reason=_str("Why the customer cancels", enum=list(cat.CANCEL_REASONS))), writes=True)
def cancel_order(state: dict, order_id: str, reason: str) -> dict:
    order = _order(state, order_id)
    if order["status"] not in ("pending", "processing"):
        raise ToolError(f"order {order['id']} is {order['status']}; only pending or processing orders can be cancelled")
    order["status"], order["cancelled_reason"] = "cancelled", reason
    return {"order_id": order["id"], "status": "cancelled", "refund_amount": order["total"],
            "refund_to": order["payment"]["method"]}


@tool("return_items", "Return delivered items within the return window; the items' price is refunded.",
      _params(("order_id", "item_ids", "reason"), order_id=_str("Order ID"),
              item_ids={"type": "array", "items": {"type": "string"}, "description": "Item IDs, e.g. O10023-1"},
              reason=_str("Why the items are returned", enum=list(cat.RETURN_REASONS))), writes=True)
def return_items(state: dict, order_id: str, item_ids: list[str], reason: str) -> dict:
    order = _order(state, order_id)
    _require_delivered_within(state, order, cat.RETURN_WINDOW_DAYS[order["domain"]], "returned")
    items = [_item(order, item_id) for item_id in dict.fromkeys(item_ids)]
    for item in items:
        _require_unchanged(item)
    for item in items:
        item["status"] = "returned"
    amount = round(sum(i["unit_price"] * i["quantity"] for i in items), 2)
    return_id = _next_id(state["returns"], "RET", order["id"])
    state["returns"][return_id] = {"order_id": order["id"], "item_ids": [i["item_id"] for i in items],
                                   "reason": reason, "amount": amount}
    return {"return_id": return_id, "refund_amount": amount, "refund_to": order["payment"]["method"]}


def _require_delivered_within(state: dict, order: dict, days: int, verb: str) -> None:
    if order["status"] != "delivered":
        raise ToolError(f"order {order['id']} is {order['status']}; only delivered orders can be {verb}")
    age = (_today(state) - date.fromisoformat(order["delivered_on"])).days
    if age > days:
        raise ToolError(f"order {order['id']} was delivered {age} days ago; {order['domain']} can only be "
                        f"{verb} within {days} days of delivery")


def _require_unchanged(item: dict) -> None:
    if item["status"] != "ordered":
        raise ToolError(f"item {item['item_id']} was already {item['status'].replace('_', ' ')}")


@tool("exchange_item", "Exchange a delivered clothing item for another size or colour (new SKU) of the same "
      "product, within 30 days of delivery, if in stock.",
      _params(("order_id", "item_id", "new_sku"), order_id=_str("Order ID"), item_id=_str("Item ID"),
              new_sku=_str("SKU of the wanted variant, e.g. CL-1031-NAV-M")), writes=True)
def exchange_item(state: dict, order_id: str, item_id: str, new_sku: str) -> dict:
    order = _order(state, order_id)
    if order["domain"] != "clothing":
        raise ToolError("only clothing can be exchanged; appliances are returned or repaired")
    _require_delivered_within(state, order, cat.EXCHANGE_WINDOW_DAYS, "exchanged")
    item = _item(order, item_id)
    _require_unchanged(item)
    variant = _variant(state["products"][item["product_id"]], new_sku.strip().upper())
    if variant["sku"] == item["sku"]:
        raise ToolError(f"new_sku {variant['sku']} is the variant the customer already has")
    if variant["stock"] < item["quantity"]:
        raise ToolError(f"variant {variant['sku']} is out of stock")
    variant["stock"] -= item["quantity"]
    item["status"] = "exchanged"
    exchange_id = _next_id(state["exchanges"], "EX", order["id"])
    state["exchanges"][exchange_id] = {"order_id": order["id"], "item_id": item["item_id"],
                                       "old_sku": item["sku"], "new_sku": variant["sku"]}
    return {"exchange_id": exchange_id, "new_sku": variant["sku"], "colour": variant["colour"],
            "size": variant["size"], "price_difference": 0.0}


def _variant(product: dict, sku: str) -> dict:
    for variant in product["variants"]:
        if variant["sku"] == sku:
            return variant
    raise ToolError(f"new_sku {sku!r} is not a variant of {product['name']} ({product['id']})")


@tool("issue_refund", "Refund money on an order (price protection, missing or damaged item, goodwill).",
      _params(("order_id", "amount", "reason"), order_id=_str("Order ID"),
              amount={"type": "number", "description": "Amount in USD"},
              reason=_str("Refund reason", enum=list(cat.REFUND_REASONS))), writes=True)
def issue_refund(state: dict, order_id: str, amount: float, reason: str) -> dict:
    order = _order(state, order_id)
    amount = round(float(amount), 2)
    if amount <= 0:
        raise ToolError("argument amount must be positive")
    if order["status"] == "cancelled":
        raise ToolError(f"order {order['id']} is cancelled; its payment was already refunded")
    remaining = round(order["total"] - refunded_total(state, order["id"]), 2)
    if amount > remaining:
        raise ToolError(f"amount {amount:.2f} exceeds what can still be refunded on {order['id']} ({remaining:.2f})")
    _check_refund_reason(state, order, amount, reason)
    refund_id = _next_id(state["refunds"], "RF", order["id"])
    state["refunds"][refund_id] = {"order_id": order["id"], "amount": amount, "reason": reason}
    return {"refund_id": refund_id, "amount": amount, "refund_to": order["payment"]["method"]}


def _check_refund_reason(state: dict, order: dict, amount: float, reason: str) -> None:
    if reason == "price_protection":
        age = (_today(state) - date.fromisoformat(order["placed_on"])).days
        if age > cat.PRICE_PROTECTION_DAYS:
            raise ToolError(f"order {order['id']} was placed {age} days ago; price protection lasts "
                            f"{cat.PRICE_PROTECTION_DAYS} days")
        eligible = price_protection_amount(state, order)
        if amount > eligible:
            raise ToolError(f"price protection for {order['id']} is at most {eligible:.2f}")
    elif reason in ("missing_item", "damaged_item") and order["status"] != "delivered":
        raise ToolError(f"order {order['id']} is {order['status']}; {reason} refunds need a delivered order")


def price_protection_amount(state: dict, order: dict) -> float:
    drops = (max(0.0, i["unit_price"] - state["products"][i["product_id"]]["price"]) * i["quantity"]
             for i in order["items"] if i["status"] == "ordered")
    return round(sum(drops), 2)


@tool("change_shipping_address", "Change the shipping address of a pending or processing order.",
      _params(("order_id", "street", "city", "postcode"), order_id=_str("Order ID"),
              street=_str("House number and street"), city=_str("City"), postcode=_str("5-digit postcode"),
              country=_str("Country code, default US")), writes=True)
def change_shipping_address(state: dict, order_id: str, street: str, city: str, postcode: str,
                            country: str = "US") -> dict:
    order = _order(state, order_id)
    if order["status"] not in ("pending", "processing"):
        raise ToolError(f"order {order['id']} is {order['status']}; the address can only change before shipping")
    if not POSTCODE_RE.match(postcode.strip()):
        raise ToolError(f"argument postcode must be 5 digits, got {postcode!r}")
    order["shipping_address"] = {"street": street.strip(), "city": city.strip(), "postcode": postcode.strip(),
                                 "country": country.strip().upper()}
    return {"order_id": order["id"], "shipping_address": order["shipping_address"]}


@tool("schedule_service", "Book a technician for an appliance: installation (order shipped or delivered, "
      "product installable) or repair (delivered, under warranty, with the fault code shown).",
      _params(("order_id", "item_id", "service_type", "date"), order_id=_str("Order ID"), item_id=_str("Item ID"),
              service_type=_str("Kind of visit", enum=["installation", "repair"]),
              date=_str("Visit date, YYYY-MM-DD, Monday to Saturday"),
              fault_code=_str("Fault code on the display (repairs)")), writes=True)
def schedule_service(state: dict, order_id: str, item_id: str, service_type: str, date: str,
                     fault_code: str | None = None) -> dict:
    order = _order(state, order_id)
    item = _item(order, item_id)
    product = state["products"][item["product_id"]]
    if product["domain"] != "appliances":
        raise ToolError("technician visits are only for appliances")
    visit = _visit_date(state, date, earliest=cat.INSTALLATION_LEAD_DAYS[0] if service_type == "installation" else 1)
    fee = (_check_installation if service_type == "installation" else _check_repair)(state, order, item, product,
                                                                                       fault_code)
    appointment_id = _next_id(state["appointments"], "SV", order["id"])
    state["appointments"][appointment_id] = {
        "order_id": order["id"], "item_id": item["item_id"], "service_type": service_type,
        "date": visit.isoformat(), "fault_code": fault_code.strip().upper() if fault_code else None, "fee": fee}
    return {"appointment_id": appointment_id, "service_type": service_type, "date": visit.isoformat(), "fee": fee}


def _visit_date(state: dict, raw: str, *, earliest: int) -> date:
    try:
        visit = date.fromisoformat(raw.strip())
    except ValueError:
        raise ToolError(f"argument date must be YYYY-MM-DD, got {raw!r}") from None
    today = _today(state)
    first, last = today + timedelta(days=earliest), today + timedelta(days=cat.INSTALLATION_LEAD_DAYS[1])
    if not first <= visit <= last:
        raise ToolError(f"date must be between {first.isoformat()} and {last.isoformat()}")
    if visit.weekday() == 6:
        raise ToolError(f"{visit.isoformat()} is a Sunday; technicians work Monday to Saturday")
    return visit


def _check_installation(state: dict, order: dict, item: dict, product: dict, fault_code) -> float:
    if not product["installation"]["available"]:
        raise ToolError(f"{product['name']} does not need professional installation")
    if order["status"] not in ("shipped", "delivered"):
        raise ToolError(f"order {order['id']} is {order['status']}; installation is booked once it has shipped")
    if any(a["item_id"] == item["item_id"] and a["service_type"] == "installation"
           for a in state["appointments"].values()):
        raise ToolError(f"an installation is already booked for item {item['item_id']}")
    return product["installation"]["fee"]


def _check_repair(state: dict, order: dict, item: dict, product: dict, fault_code) -> float:
    if order["status"] != "delivered":
        raise ToolError(f"order {order['id']} is {order['status']}; repairs are for delivered items")
    if not fault_code or fault_code.strip().upper() not in product["fault_codes"]:
        raise ToolError(f"fault_code {fault_code!r} is not a fault code of {product['name']}; known codes: "
                        + ", ".join(product["fault_codes"]))
    until = add_months(order["delivered_on"], product["warranty_months"])
    if until < state["meta"]["today"]:
        raise ToolError(f"the warranty of item {item['item_id']} ended on {until}; paid repairs go through a human agent")
    return 0.0


@tool("issue_invoice", "Issue the invoice of an order (one per order), personal or for a company.",
      _params(("order_id", "invoice_type"), order_id=_str("Order ID"),
              invoice_type=_str("Who the invoice is for", enum=["personal", "company"]),
              company_name=_str("Company name (company invoices)"),
              tax_id=_str("Company tax ID, format TX-123456 (company invoices)")), writes=True)
def issue_invoice(state: dict, order_id: str, invoice_type: str, company_name: str | None = None,
                  tax_id: str | None = None) -> dict:
    order = _order(state, order_id)
    if order["status"] == "cancelled":
        raise ToolError(f"order {order['id']} is cancelled; cancelled orders get no invoice")
    invoice_id = f"INV-{order['id']}"
    if invoice_id in state["invoices"]:
        raise ToolError(f"order {order['id']} already has invoice {invoice_id}")
    if invoice_type == "company":
        if not company_name or not tax_id:
            raise ToolError("company invoices need both company_name and tax_id")
        if not TAX_ID_RE.match(tax_id.strip().upper()):
            raise ToolError(f"argument tax_id must look like TX-123456, got {tax_id!r}")
    state["invoices"][invoice_id] = {
        "order_id": order["id"], "invoice_type": invoice_type, "amount": order["total"],
        "company_name": company_name.strip() if invoice_type == "company" else None,
        "tax_id": tax_id.strip().upper() if invoice_type == "company" else None}
    return {"invoice_id": invoice_id, "amount": order["total"], "invoice_type": invoice_type}


@tool("transfer_to_human", "Hand the conversation to a human agent, with a short summary of the request.",
      _params(("customer_id", "summary"), customer_id=_str("Customer ID"),
              summary=_str("What the customer needs")), writes=True)
def transfer_to_human(state: dict, customer_id: str, summary: str) -> dict:
    customer = _customer(state, customer_id)
    state["transfers"].append({"customer_id": customer["id"], "summary": summary})
    return {"status": "transferred", "ticket": f"HT-{len(state['transfers'])}"}
