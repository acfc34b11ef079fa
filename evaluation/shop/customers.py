"""The agenda-based simulated customer (Schatzmann et al., 2007), the offline user simulator.

The customer keeps an agenda — the task's intents, in order — and works through it: it states
one intent at a time, answers the agent's questions only from the facts the task gives it, says
so when it does not know something, loses patience with refusals and questions it cannot answer,
and ends with the stop token when its agenda is empty or its patience runs out. A reply that is
empty or has nothing to do with the request is never taken as the request handled: the customer
asks again in other words, more impatient each time, until its patience is spent. All phrasing
choices come from a generator seeded per episode, so the same seed gives the same dialogue.
"""
import random
import re

from evaluation.environments.protocol import STOP
from evaluation.shop.nlu import INTENT_KEYWORDS, REASON_PHRASES, classify_agent

_GREETINGS = {
    "neutral": ("Hello.", "Hi."), "happy": ("Hi there!", "Hello, hope you're well!"),
    "frustrated": ("Hi. I've been trying to sort this out for a while.", "Hello, this is getting frustrating."),
    "angry": ("I'm really annoyed.", "This is not good enough."),
    "anxious": ("Hi, I'm a bit worried.", "Hello, I hope you can help me quickly."),
    "confused": ("Hi, I'm not sure how this works.", "Hello, I'm a bit confused."),
}
_IRRITATION = {
    "neutral": "Hmm.", "happy": "Oh, okay.", "frustrated": "This is taking too long.",
    "angry": "This is unacceptable.", "anxious": "I'm getting worried now.", "confused": "I don't understand.",
}
# Said before the request again when the agent's reply ignored it; one step more impatient each time.
_PRESSING = ("Sorry, did you see my question?", "I'm still waiting for an answer.",
             "This is the third time I'm asking.", "Please, just answer my question.")
# Words of any shop request, from the intents' names ("insta" for installation) and keywords: a
# reply holding none of them, no digit and none of the request's values ignored the request. Any
# shop topic counts, so a vague but relevant reply ("the refund is on its way") is not pressed.
_SHOP_WORDS = (*{word[:5] for kind, _ in INTENT_KEYWORDS for word in kind.split("_") if len(word) > 3},
               *(word for _, words in INTENT_KEYWORDS for word in words),
               "refund", "deliver", "ship", "book", "appointment", "account", "product")
_IDENTITY_WORDS = {"email": "email", "phone": "phone number", "customer_id": "customer ID"}


class AgendaCustomer:
    label = "agenda"
    tokens_in = tokens_out = 0

    def __init__(self, *, task: dict, seed: int):
        self.rng = random.Random(f"{seed}:{task['id']}:customer")
        self.persona = task["persona"]
        self.known = task["known"]
        self.agenda = [dict(intent) for intent in task["intents"]]
        self.current = self.agenda.pop(0)
        self.patience = self.persona["patience"]
        self.ignored = 0

    # --- speaking ---------------------------------------------------------------------

    def opening(self) -> str:
        parts = [self.rng.choice(_GREETINGS[self.persona["emotion"]]), render_intent(self.current, self.rng)]
        volunteers = {"high": True, "medium": self.rng.random() < 0.5, "low": False}[self.persona["trust"]]
        if volunteers and self.current["kind"] not in ("size_advice", "material_info"):
            parts.append(self._identity())
        return " ".join(parts)

    def respond(self, agent_text: str) -> str:
        act = classify_agent(agent_text)
        if act.transferred:
            return f"Thank you. {STOP}"
        if act.confirm:
            return "Yes, please go ahead."
        if act.asks:
            return self._answer(act.asks)
        if act.refusal:
            self.patience -= 1
        elif not self._about_request(agent_text):
            return self._press()
        if self.patience <= 0:
            return self._give_up()
        return self._next_intent(satisfied=not act.refusal)

    def _next_intent(self, *, satisfied: bool) -> str:
        if not self.agenda:
            return f"Thank you, that's all I needed. {STOP}" if satisfied else f"Never mind then. Goodbye. {STOP}"
        self.current = self.agenda.pop(0)
        return "Also, " + _lower_first(render_intent(self.current, self.rng))

    def _about_request(self, agent_text: str) -> bool:
        """Whether the reply has anything to do with the request: a fact (any digit: a date, an
        amount, an id), one of the request's own values, or a shop word."""
        text = agent_text.lower()
        if re.search(r"\d", text):
            return True
        values = [value.lower() for value in self.current["slots"].values() if isinstance(value, str)]
        return any(word in text for word in (*_SHOP_WORDS, *values))

    def _press(self) -> str:
        """Ask again, in other words and more impatiently; out of patience, leave."""
        self.patience -= 1
        if self.patience <= 0:
            return self._give_up()
        self.ignored += 1
        lead = _PRESSING[min(self.ignored, len(_PRESSING)) - 1]
        return f"{lead} {render_intent(self.current, self.rng)}"

    def _give_up(self) -> str:
        return f"{_IRRITATION[self.persona['emotion']]} I've had enough, goodbye. {STOP}"

    def _answer(self, asks: list[str]) -> str:
        answers = [self._answer_one(slot) for slot in asks]
        if self.patience <= 0:
            return self._give_up()
        return " ".join(answers)

    def _answer_one(self, slot: str) -> str:
        slots = self.current["slots"]
        if slot == "identity":
            return self._identity()
        if slot == "order_id" and "order_id" not in slots:
            self.patience -= 1
            product = f' It\'s the "{slots["product"]}".' if "product" in slots else ""
            return "I don't have the order number, sorry." + product
        answer = _slot_answer(slot, slots, self.current["kind"])
        if answer is None:
            self.patience -= 1
            return f"{_IRRITATION[self.persona['emotion']]} I'm not sure what you mean."
        return answer

    def _identity(self) -> str:
        key, value = next(iter(self.known.items()))
        return f"My {_IDENTITY_WORDS.get(key, key.replace('_', ' '))} is {value}."


def _slot_answer(slot: str, slots: dict, kind: str) -> str | None:
    if slot == "product" and "product" in slots:
        return f'It\'s the "{slots["product"]}".'
    if slot == "order_id":
        return f"It's order {slots['order_id']}."
    if slot == "reason" and "reason" in slots:
        return _reason(kind, slots["reason"]).capitalize() + "."
    if slot == "date" and "date" in slots:
        return f"{slots['date']} would be good."
    if slot == "address" and "address" in slots:
        return f"The new address is {_address(slots['address'])}."
    if slot == "fault_code" and "fault_code" in slots:
        return f"The display shows {slots['fault_code']}."
    if slot == "measurement" and "measurement" in slots:
        return _measurement(slots["measurement"]) + "."
    if slot in ("size", "colour") and kind == "exchange_item":
        return f"Size {slots['size']}, same colour." if "size" in slots else f"In {slots['colour']}, same size."
    if slot == "company" and "company_name" in slots:
        return f"Company {slots['company_name']} (tax ID {slots['tax_id']})."
    return None


def _lower_first(text: str) -> str:
    first = text.split(" ", 1)[0]
    return text if first == "I" or first.startswith("I'") else text[:1].lower() + text[1:]


def _reason(kind: str, code: str) -> str:
    return REASON_PHRASES.get(kind, REASON_PHRASES["return_item"]).get(code, code.replace("_", " "))


def _address(address: dict) -> str:
    return f"{address['street']}, {address['city']} {address['postcode']}"


def _measurement(measurement: dict) -> str:
    key, value = next(iter(measurement.items()))
    return f"My {key.replace('_cm', '')} is {value} cm"


def _ref(slots: dict) -> str:
    product = f'the "{slots["product"]}"' if "product" in slots else "my order"
    if "order_id" in slots:
        return f"{product} from order {slots['order_id']}"
    return f"{product} I ordered"


_VARIANTS = {
    "track_order": ("Where is {ref}? I'd like to know when it will arrive.",
                    "Can you track {ref} for me? I'm still waiting for it."),
    "cancel_order": ("I want to cancel {ref} because {reason}.", "Please cancel {ref}; {reason}."),
    "return_item": ("I'd like to return {ref} because {reason}.", "Can I return {ref}? {Reason}."),
    "exchange_item": ("I'd like to exchange {ref} {wish}", "Could I swap {ref}? I'd like it {wish}"),
    "warranty_info": ("How long is the warranty on {ref}? Until when am I covered?",
                      "Until when does the warranty of {ref} run?"),
    "schedule_installation": ("Can you book the installation of {ref} on {date}?",
                              "I need someone to install {ref}. Is {date} possible?"),
    "schedule_repair": ("{Ref} shows fault code {fault_code}. Can a technician repair it on {date}?",
                        "I need a repair: {ref} shows error code {fault_code}. Could someone come on {date}?"),
    "invoice": ("{invoice}",),
    "price_protection": ("I bought {ref} and it's now cheaper. Can I get the price difference back?",
                         "I saw a price drop on {ref}. Do I get the price difference?"),
    "change_address": ("Please ship {ref} to my new address: {address}.",
                       "I moved. Could you send {ref} to a different address: {address}?"),
    "size_advice": ("Which size of {product} should I take? {measurement}.",),
    "material_info": ("What is {product} made of?", "Could you tell me the material of {product}?"),
    "missing_item": ("{Ref} was missing from my delivery. I'd like a refund for it.",),
    "transfer": ("Then I'd like to speak to a human agent, please.",),
}


def render_intent(intent: dict, rng: random.Random) -> str:
    """The customer's words for one intent; every variant keeps each slot in a form the scripted
    agent's parser reads (quoted product names, ISO dates, 'size M', ...)."""
    return rng.choice(_VARIANTS[intent["kind"]]).format_map(_words(intent))


def _words(intent: dict) -> dict:
    slots, kind = intent["slots"], intent["kind"]
    ref = _ref(slots)
    words = {**slots, "ref": ref, "Ref": ref[0].upper() + ref[1:],
             "product": f'the "{slots["product"]}"' if "product" in slots else "it"}
    if "reason" in slots:
        words["reason"] = _reason(kind, slots["reason"])
        words["Reason"] = words["reason"].capitalize()
    if "address" in slots:
        words["address"] = _address(slots["address"])
    if "measurement" in slots:
        words["measurement"] = _measurement(slots["measurement"])
    if kind == "exchange_item":
        words["wish"] = _exchange_wish(slots)
    if kind == "invoice":
        words["invoice"] = _invoice_wish(slots)
    return words


def _exchange_wish(slots: dict) -> str:
    if "size" in slots:
        return f"for size {slots['size']}, same colour."
    return f"in {slots.get('colour')}, same size."


def _invoice_wish(slots: dict) -> str:
    if slots.get("invoice_type") == "company":
        return (f"I need a company invoice for order {slots['order_id']}: company {slots['company_name']} "
                f"(tax ID {slots['tax_id']}).")
    return f"Could I get a personal invoice for order {slots['order_id']}?"
