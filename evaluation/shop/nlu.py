"""Rule-based understanding for the offline backends.

`parse_customer` turns a customer's words into an intent and slots (what the scripted agent
reads); `classify_agent` tells the agenda customer what the agent asked for. Both read only the
text, so each offline backend also works opposite an LLM counterpart.
"""
import re
from dataclasses import dataclass, field

from evaluation.shop import catalogue as cat

# First match wins, so more specific wordings come before generic ones.
INTENT_KEYWORDS = (
    ("transfer", ("human agent", "real person", "speak to a human", "talk to a person")),
    ("cancel_order", ("cancel",)),
    ("exchange_item", ("exchange", "swap")),
    ("return_item", ("return",)),
    ("missing_item", ("missing",)),
    ("price_protection", ("price drop", "cheaper now", "price difference", "price protection", "now cheaper")),
    ("invoice", ("invoice",)),
    ("schedule_installation", ("install",)),
    ("schedule_repair", ("repair", "technician", "fault code", "error code")),
    ("warranty_info", ("warranty",)),
    ("change_address", ("new address", "change the address", "shipping address", "different address",
                        "ship it to")),
    ("size_advice", ("which size", "what size")),
    ("material_info", ("made of", "material", "fabric")),
    ("track_order", ("where is", "track", "delivery status", "arrive", "shipment")),
)
REASON_PHRASES = {
    "cancel_order": {"no_longer_needed": "I no longer need it", "ordered_by_mistake": "I ordered it by mistake",
                     "found_cheaper": "I found it cheaper elsewhere", "delivery_too_slow": "the delivery takes too long"},
    "return_item": {"damaged": "it arrived damaged", "wrong_size": "it doesn't fit",
                    "not_as_described": "it's not as described", "no_longer_needed": "I don't need it anymore"},
}
_REASON_CUES = (
    ("no longer need", "no_longer_needed"), ("don't need it anymore", "no_longer_needed"),
    ("by mistake", "ordered_by_mistake"), ("cheaper elsewhere", "found_cheaper"),
    ("takes too long", "delivery_too_slow"), ("damaged", "damaged"), ("doesn't fit", "wrong_size"),
    ("not as described", "not_as_described"),
)
ORDER_RE = re.compile(r"\bO\d{5}\b")
CUSTOMER_RE = re.compile(r"\bC\d{4}\b")
EMAIL_RE = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+\w")
PHONE_RE = re.compile(r"\b\d{3}-\d{3}-\d{4}\b")
PRODUCT_RE = re.compile(r"\"([^\"]{3,80})\"")
DATE_RE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
SIZE_RE = re.compile(r"\bsize (XS|S|M|L|XL)\b", re.IGNORECASE)
COLOUR_RE = re.compile(r"\b(" + "|".join(cat.COLOURS) + r")\b", re.IGNORECASE)
FAULT_RE = re.compile(r"\b([EF]\d{2})\b")
MEASURE_RE = re.compile(r"\b(chest|waist)\b\D{0,20}?(\d{2,3})\s?cm", re.IGNORECASE)
ADDRESS_RE = re.compile(r"\b(\d{1,4} [A-Z][A-Za-z ]+?),\s*([A-Z][A-Za-z ]+?)\s+(\d{5})\b")
COMPANY_RE = re.compile(r"company ([A-Z][\w&.' ]+?) \(tax id (TX-\d{6})\)", re.IGNORECASE)
AFFIRM_RE = re.compile(r"^\W*(yes|yeah|yep|sure|ok|okay|please do|go ahead|correct|that's right)\b", re.IGNORECASE)
DENY_RE = re.compile(r"^\W*(no|nope|don't|do not)\b", re.IGNORECASE)
NO_ORDER_ID_RE = re.compile(r"(don't|do not) (have|know) (the|my) order (number|id)", re.IGNORECASE)


@dataclass
class Parsed:
    intent: str | None
    slots: dict = field(default_factory=dict)
    affirm: bool = False
    deny: bool = False


def parse_customer(text: str) -> Parsed:
    lowered = text.lower()
    intent = next((kind for kind, words in INTENT_KEYWORDS if any(w in lowered for w in words)), None)
    slots = _identity_slots(text) | _request_slots(text, lowered)
    return Parsed(intent=intent, slots=slots, affirm=bool(AFFIRM_RE.match(text)), deny=bool(DENY_RE.match(text)))


def _identity_slots(text: str) -> dict:
    slots = {}
    for key, pattern in (("email", EMAIL_RE), ("phone", PHONE_RE), ("customer_id", CUSTOMER_RE)):
        found = pattern.search(text)
        if found:
            slots[key] = found.group(0)
    return slots


def _request_slots(text: str, lowered: str) -> dict:
    slots = {}
    _put(slots, "order_id", ORDER_RE.search(text))
    _put(slots, "product", PRODUCT_RE.search(text), group=1)
    _put(slots, "date", DATE_RE.search(text))
    _put(slots, "fault_code", FAULT_RE.search(text), group=1)
    size, colour = SIZE_RE.search(text), COLOUR_RE.search(text)
    if size:
        slots["size"] = size.group(1).upper()
    if colour:
        slots["colour"] = colour.group(1).lower()
    measure = MEASURE_RE.search(text)
    if measure:
        slots["measurement"] = {f"{measure.group(1).lower()}_cm": int(measure.group(2))}
    address = ADDRESS_RE.search(text)
    if address:
        slots["address"] = {"street": address.group(1), "city": address.group(2), "postcode": address.group(3)}
    return slots | _invoice_and_reason_slots(text, lowered)


def _invoice_and_reason_slots(text: str, lowered: str) -> dict:
    slots = {}
    company = COMPANY_RE.search(text)
    if company:
        slots.update(invoice_type="company", company_name=company.group(1).strip(), tax_id=company.group(2).upper())
    elif "personal invoice" in lowered or "personal one" in lowered:
        slots["invoice_type"] = "personal"
    reason = next((code for cue, code in _REASON_CUES if cue in lowered), None)
    if reason:
        slots["reason"] = reason
    if NO_ORDER_ID_RE.search(text):
        slots["no_order_id"] = True
    return slots


def _put(slots: dict, key: str, match, group: int = 0) -> None:
    if match:
        slots[key] = match.group(group)


# --- what the agent asked (read by the agenda customer) ---------------------------------

_ASKS = (
    ("identity", ("email", "phone", "customer id", "identify", "verify your")),
    ("order_id", ("order number", "order id")),
    ("reason", ("why", "reason")),
    ("date", ("date", "when would", "which day")),
    ("address", ("address",)),
    ("fault_code", ("fault code", "error code", "code shown", "code on the display")),
    ("measurement", ("measurement", "chest", "waist", "measure")),
    ("size", ("size",)),
    ("colour", ("colour", "color")),
    ("company", ("company", "tax id")),
    ("product", ("which product", "which item", "what product", "product name")),
)
_CONFIRM = ("shall i", "should i", "would you like me to", "do you want me to", "may i proceed", "can i proceed",
            "do you confirm", "please confirm", "is that correct", "is this correct", "go ahead")
_REFUSAL = ("sorry", "unable", "can't", "cannot", "couldn't", "not able", "not possible", "unfortunately")
_TRANSFERRED = ("transferring you", "transferred you", "have transferred", "transfer you now",
                "connecting you to a human", "a human agent will")


@dataclass
class AgentAct:
    asks: list[str]  # slot names asked for, in the order of _ASKS
    confirm: bool
    refusal: bool
    transferred: bool


def classify_agent(text: str) -> AgentAct:
    lowered = (text or "").lower()
    # "email address" asks for identity, not for a shipping address. Sentences are split on their
    # end marks (linear time; a findall of r"[^.!?]*\?" is quadratic in a long reply).
    questions = [q.lower().replace("email address", "email") for q in re.split(r"(?<=[.!?])", text or "")
                 if q.endswith("?")]
    asks = [slot for slot, words in _ASKS if any(_has_word(q, w) for q in questions for w in words)]
    confirm = any(_has_word(q, w) for q in questions for w in _CONFIRM)
    return AgentAct(asks=[] if confirm else asks, confirm=confirm,
                    refusal=any(w in lowered for w in _REFUSAL),
                    transferred=any(w in lowered for w in _TRANSFERRED))


def _has_word(text: str, phrase: str) -> bool:
    return re.search(r"\b" + re.escape(phrase) + r"\b", text) is not None
