"""The seeded shop generator: customers, products, orders, shipments and policies as plain JSON.

The same seed always gives the same shop. `shop_fresh(seed)` hands every episode its own deep
copy, so nothing an agent does can leak into another episode.
"""
import functools
import pickle
import random
from datetime import date, timedelta

from evaluation.shop import catalogue as cat

DEFAULT_SEED = 20250616
TODAY = date(2025, 6, 16)
SHOP_VERSION = 1


def shop_generate(seed: int = DEFAULT_SEED) -> dict:
    """Build a whole shop from `seed` (use `shop_fresh` to get a copy you may change)."""
    rng = random.Random(seed)
    products = _products(rng)
    customers = _customers(rng)
    state = {
        "meta": {"seed": seed, "today": TODAY.isoformat(), "currency": "USD", "version": SHOP_VERSION},
        "customers": customers,
        "products": products,
        "orders": {},
        "shipments": {},
        "invoices": {}, "refunds": {}, "returns": {}, "exchanges": {}, "appointments": {}, "transfers": [],
        "policies": [{"id": pid, "title": title, "text": text} for pid, title, text in cat.POLICIES],
    }
    for customer in customers.values():
        for _ in range(rng.randint(2, 5)):
            _add_order(rng, state, customer)
    return state


@functools.lru_cache(maxsize=4)
def _pickled(seed: int) -> bytes:
    return pickle.dumps(shop_generate(seed), protocol=pickle.HIGHEST_PROTOCOL)


def shop_fresh(seed: int = DEFAULT_SEED) -> dict:
    """A private deep copy of the shop for `seed`, generated once per process.
    Unpickling a cached blob is several times faster than copy.deepcopy of the state."""
    return pickle.loads(_pickled(seed))


def _iso(day: date) -> str:
    return day.isoformat()


def _days_ago(n: int) -> date:
    return TODAY - timedelta(days=n)


# --- customers ---------------------------------------------------------------

def _customers(rng: random.Random) -> dict:
    customers = {}
    for number in range(1001, 1091):
        first, last = rng.choice(cat.FIRST_NAMES), rng.choice(cat.LAST_NAMES)
        cid = f"C{number}"
        customers[cid] = {
            "id": cid,
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}{number % 100}@example.com",
            "phone": f"555-{rng.randint(200, 989)}-{number:04d}",
            "addresses": [_address(rng) for _ in range(rng.randint(1, 2))],
            "member_since": _iso(_days_ago(rng.randint(60, 2000))),
        }
    return customers


def _address(rng: random.Random) -> dict:
    city, prefix = rng.choice(cat.CITIES)
    return {
        "street": f"{rng.randint(1, 240)} {rng.choice(cat.STREETS)}",
        "city": city,
        "postcode": f"{prefix}{rng.randint(100, 999)}",
        "country": "US",
    }


# --- products ----------------------------------------------------------------

def _products(rng: random.Random) -> dict:
    products = {}
    for number, product in enumerate(_appliances(rng) + _clothing(rng), start=1):
        prefix = "AP" if product["domain"] == "appliances" else "CL"
        product["id"] = f"{prefix}-{1000 + number}"
        if product["domain"] == "clothing":
            product["variants"] = _variants(rng, product)
        products[product["id"]] = _with_price_change(rng, product)
    return products


def _appliances(rng: random.Random) -> list[dict]:
    items, lines = [], list(cat.APPLIANCE_LINES)
    rng.shuffle(lines)
    for index, (category, price, warranty, fee, faults) in enumerate(cat.APPLIANCE_CATEGORIES * 3):
        brand, code = cat.APPLIANCE_BRANDS[index % len(cat.APPLIANCE_BRANDS)]
        line, size = lines[index % len(lines)], rng.choice((3, 5, 7, 9))
        items.append({
            "domain": "appliances",
            "name": f"{brand} {line} {size}00 {category}",
            "category": category,
            "brand": brand,
            "model": f"{code}-{line[:3].upper()}{size}{index:02d}",
            "price": round(price * rng.uniform(0.8, 1.4), 0),
            "warranty_months": warranty + (12 if index >= 18 else 0),
            "installation": {"available": fee is not None, "fee": fee},
            "fault_codes": dict(faults),
        })
    return items


def _clothing(rng: random.Random) -> list[dict]:
    items, seen = [], set()
    while len(items) < 40:
        category, price, measure = rng.choice(cat.CLOTHING_CATEGORIES)
        brand = rng.choice(cat.CLOTHING_BRANDS)
        style, material, care = rng.choice(cat.CLOTHING_STYLES)
        name = f"{brand} {style} {category}"
        if name in seen:
            continue
        seen.add(name)
        items.append({
            "domain": "clothing", "name": name, "category": category, "brand": brand,
            "material": material, "care": care, "price": round(price * rng.uniform(0.85, 1.5), 0),
            "size_chart": _size_chart(measure, offset=rng.choice((0, 2))),
            "colours": sorted(rng.sample(cat.COLOURS, rng.randint(2, 4))),
        })
    return items


def _size_chart(measure: str, *, offset: int) -> dict:
    start = cat.SIZE_CHART_START[measure] + offset
    ranges = {}
    for index, size in enumerate(cat.SIZES):
        low = start + index * cat.SIZE_STEP_CM
        ranges[size] = [low, low + cat.SIZE_STEP_CM - 1]
    return {"measurement": measure, "ranges": ranges}


def _variants(rng: random.Random, product: dict) -> list[dict]:
    return [
        {"sku": f"{product['id']}-{colour[:3].upper()}-{size}", "colour": colour, "size": size,
         "stock": rng.choice((0, 2, 3, 5, 8, 12))}
        for colour in product["colours"] for size in cat.SIZES
    ]


def _with_price_change(rng: random.Random, product: dict) -> dict:
    """About a third of products dropped in price a few days ago (for price protection)."""
    product["previous_price"], product["price_changed_on"] = None, None
    if rng.random() < 0.35:
        product["previous_price"] = round(product["price"] * rng.uniform(1.08, 1.25), 0)
        product["price_changed_on"] = _iso(_days_ago(rng.randint(1, 3)))
    return product


def price_on(product: dict, day: str) -> float:
    """What the product cost on `day` (ISO date)."""
    if product["price_changed_on"] and day < product["price_changed_on"]:
        return product["previous_price"]
    return product["price"]


# --- orders and shipments ------------------------------------------------------

# (status, weight, days since the order was placed)
_ORDER_AGES = (
    ("pending", 10, (0, 1)), ("processing", 15, (1, 3)), ("shipped", 20, (3, 7)),
    ("delivered", 45, (8, 50)), ("delivered_old", 5, (300, 700)), ("cancelled", 5, (5, 40)),
)


def _add_order(rng: random.Random, state: dict, customer: dict) -> None:
    number = 10001 + len(state["orders"])
    oid = f"O{number}"
    status, _, (low, high) = rng.choices(_ORDER_AGES, weights=[age[1] for age in _ORDER_AGES])[0]
    placed = _days_ago(rng.randint(low, high))
    domain = "clothing" if rng.random() < 0.58 else "appliances"
    items = _order_items(rng, state["products"], oid, domain, _iso(placed))
    order = {
        "id": oid, "customer_id": customer["id"], "domain": domain,
        "status": "delivered" if status == "delivered_old" else status,
        "placed_on": _iso(placed), "delivered_on": None, "cancelled_reason": None,
        "items": items,
        "total": round(sum(i["unit_price"] * i["quantity"] for i in items), 2),
        "payment": {"method": rng.choice(cat.PAYMENT_METHODS), "last4": f"{rng.randint(0, 9999):04d}"},
        "shipping_address": dict(customer["addresses"][0]),
        "tracking_id": None,
    }
    if status == "cancelled":
        order["cancelled_reason"] = rng.choice(cat.CANCEL_REASONS)
    if order["status"] in ("shipped", "delivered"):
        _ship(rng, state, order, placed)
    state["orders"][oid] = order


def _order_items(rng: random.Random, products: dict, oid: str, domain: str, placed: str) -> list[dict]:
    pool = [p for p in products.values() if p["domain"] == domain]
    count = rng.choice((1, 1, 2)) if domain == "appliances" else rng.choice((1, 2, 2, 3))
    items = []
    for index, product in enumerate(rng.sample(pool, count), start=1):
        item = {
            "item_id": f"{oid}-{index}", "product_id": product["id"], "name": product["name"],
            "sku": product["id"], "quantity": 1 if domain == "appliances" else rng.choice((1, 1, 2)),
            "unit_price": price_on(product, placed), "status": "ordered",
        }
        if domain == "clothing":
            variant = rng.choice(product["variants"])
            item.update(sku=variant["sku"], colour=variant["colour"], size=variant["size"])
        items.append(item)
    return items


def _ship(rng: random.Random, state: dict, order: dict, placed: date) -> None:
    tracking_id = f"TRK{rng.randint(10_000_000, 99_999_999)}"
    shipped = placed + timedelta(days=rng.randint(1, 2))
    carrier = rng.choice(cat.CARRIERS)
    events = [{"date": _iso(shipped), "location": cat.HUBS[0], "description": "picked up by carrier"}]
    if order["status"] == "delivered":
        delivered = min(placed + timedelta(days=rng.randint(3, 6)), _days_ago(1))
        order["delivered_on"] = _iso(delivered)
        events.append({"date": _iso(delivered), "location": order["shipping_address"]["city"],
                       "description": "delivered"})
        shipment = {"status": "delivered", "eta": _iso(delivered)}
    else:
        hub = rng.choice(cat.HUBS[1:])
        events.append({"date": _iso(min(shipped + timedelta(days=1), TODAY)), "location": hub,
                       "description": "arrived at " + hub.lower()})
        status = "out for delivery" if hub == cat.HUBS[3] else "in transit"
        shipment = {"status": status, "eta": _iso(TODAY + timedelta(days=rng.randint(1, 4)))}
    order["tracking_id"] = tracking_id
    state["shipments"][tracking_id] = {
        "tracking_id": tracking_id, "order_id": order["id"], "carrier": carrier, **shipment, "events": events,
    }
