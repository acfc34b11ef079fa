"""The offline players of τ²-bench retail (no LLM): a customer who states the task's facts, and an
agent that replays the task's gold calls, making the MemOrb error kinds at the configured rates so
the memory loop has something to learn. The agent reads the answer key: its label says so wherever
its results are shown, and it is never an LLM result.
"""
import random

from evaluation.environments.benchmark import GOLD_REPLAY_AGENT
from evaluation.environments.protocol import RESULT_UNUSED, STOP, WRONG_ARGUMENTS, WRONG_TOOL
from evaluation.environments.tau2_retail.reward import gold_replies, kinds_cued
from evaluation.environments.tau2_retail.tools import CANCEL_REASONS, WRITE_TOOLS

# Episodes store these; "scripted: " and "agenda: " mark them offline wherever episodes are shown.
GOLD_AGENT_LABEL = GOLD_REPLAY_AGENT
FACTS_CUSTOMER_LABEL = "agenda: scripted customer stating the task's facts"


def _wrong_arguments(call: dict, env) -> dict | None:
    """The same write call with one argument wrong, or None when no argument can be made wrong."""
    arguments = dict(call["arguments"])
    if "reason" in arguments:
        arguments["reason"] = next(reason for reason in CANCEL_REASONS if reason != arguments["reason"])
    elif len(arguments.get("item_ids", ())) > 1:
        arguments["item_ids"] = arguments["item_ids"][:-1]
        if "new_item_ids" in arguments:
            arguments["new_item_ids"] = arguments["new_item_ids"][:-1]
    elif arguments.get("zip"):
        arguments["zip"] = arguments["zip"][:-1] + str((int(arguments["zip"][-1]) + 1) % 10)
    elif arguments.get("item_ids") and (item := _other_item(arguments, env)):
        arguments["item_ids"] = [item]
    elif "payment_method_id" in arguments and (method := _other_payment_method(arguments, env)):
        arguments["payment_method_id"] = method
    else:
        return None
    return {"name": call["name"], "arguments": arguments}


def _order_seen(arguments: dict, env) -> dict | None:
    """The order the call is about, looked up with the tools as an agent would."""
    order = env.use("get_order_details", order_id=arguments["order_id"]) if "order_id" in arguments else None
    return order.data if order is not None and order.ok else None


def _other_item(arguments: dict, env) -> str | None:
    """Another item of the same order: the wrong one to change."""
    order = _order_seen(arguments, env)
    items = [item["item_id"] for item in order["items"]] if order else []
    return next((item for item in items if item not in arguments["item_ids"]), None)


def _other_payment_method(arguments: dict, env) -> str | None:
    """Another payment method of the order's user."""
    order = _order_seen(arguments, env)
    user = env.use("get_user_details", user_id=order["user_id"]) if order else None
    methods = sorted(user.data["payment_methods"]) if user is not None and user.ok else []
    return next((method for method in methods if method != arguments["payment_method_id"]), None)


class GoldReplayAgent:
    """Replays the gold calls in one turn, then tells the customer what the gold solution tells.
    An error kind it planned is avoided when a retrieved memory carries its advice (reward.CUES)."""
    label = GOLD_AGENT_LABEL
    tokens_in = tokens_out = 0

    def __init__(self, *, seed: int, key: str, error_rates: dict[str, float] | None = None):
        rng = random.Random(f"{seed}:{key}:tau2-gold-agent")
        rates = error_rates or {}
        self.planned = {kind: rng.random() < rates.get(kind, 0.0) for kind in (WRONG_TOOL, WRONG_ARGUMENTS,
                                                                             RESULT_UNUSED)}
        self.avoided: set[str] = set()
        self.committed: set[str] = set()
        self.task: dict | None = None
        self.done = False

    def brief(self, task: dict) -> None:
        """The environment hands the agent the task it replays (the answer key) before the episode."""
        self.task = task

    def _makes(self, kind: str) -> bool:
        return self.planned[kind] and kind not in self.avoided

    def respond(self, *, text: str, memory: str, env, recall=None) -> str:
        self.avoided |= kinds_cued(memory)
        if self.task is None:
            raise RuntimeError("the gold-replay agent plays τ²-bench retail tasks only (it was not briefed)")
        if self.done:
            return "Is there anything else I can help you with?"
        self.done = True
        self._replay(env)
        if self._makes(RESULT_UNUSED) and self.task["required_outputs"]:
            self.committed.add(RESULT_UNUSED)
            return "Your request has been handled."
        return " ".join(["Your request has been handled.", *gold_replies(self.task)])

    def _replay(self, env) -> None:
        first_write = True
        for call in self.task["gold_calls"]:
            if call["name"] in WRITE_TOOLS and first_write:
                first_write = False
                call = self._with_error(call, env)
                if call is None:
                    continue
            env.use(call["name"], **call["arguments"])

    def _with_error(self, call: dict, env) -> dict | None:
        """The first write call as the planned error makes it (None: the change is left out)."""
        if self._makes(WRONG_TOOL):
            self.committed.add(WRONG_TOOL)
            order_id = call["arguments"].get("order_id")
            return {"name": "get_order_details", "arguments": {"order_id": order_id}} if order_id else None
        if self._makes(WRONG_ARGUMENTS):
            wrong = _wrong_arguments(call, env)
            if wrong is not None:
                self.committed.add(WRONG_ARGUMENTS)
                return wrong
        return call


class FactsCustomer:
    """States why it calls and what it knows, answers once more with what it knows, then ends."""
    label = FACTS_CUSTOMER_LABEL
    tokens_in = tokens_out = 0

    def __init__(self, *, task: dict, seed: int):
        instructions = task["user_scenario"]["instructions"]
        self.reason, self.known = instructions.get("reason_for_call", ""), instructions.get("known_info", "")
        self.rng = random.Random(f"{seed}:{task['id']}:tau2-customer")
        self.answers = 0

    def opening(self) -> str:
        return f"{self.rng.choice(('Hello.', 'Hi!'))} {self.reason} {self.known}".strip()

    def respond(self, agent_text: str) -> str:
        self.answers += 1
        if self.answers == 1 and agent_text.rstrip().endswith("?"):
            return self.known or f"That is all I know. {STOP}"
        return f"Thank you, that is all. {STOP}"
