"""ECom-Bench's offline players and the diagnosis a reflection may read.

Neither player is an LLM, and the agent reads the answer key: its label says so wherever an
episode's players are shown.

- GoldReplayAgent makes the task's gold look-ups and gold actions in its first turn and tells the
  required texts, except where it makes one of the MemOrb error kinds, each planned per episode
  from its seed at the configured rate: `wrong_tool` (its first look-up goes to another tool),
  `wrong_arguments` (its first change gets a plausible wrong argument), `result_unused` (its reply
  leaves the required texts out). A retrieved memory that says how to avoid a kind (the advice of
  `errors_observed`) stops it making that kind: this is what makes the memory loop run offline.
- FactCustomer states the task's intents in order, one per turn, in the customer's words from the
  task's instruction, then ends the conversation.
"""
import random

from evaluation.environments.benchmark import GOLD_REPLAY_AGENT
from evaluation.environments.ecom_bench.tools import TOOLS, WEEKDAYS, call_changes, tool_named
from evaluation.environments.protocol import RESULT_UNUSED, STOP, WRONG_ARGUMENTS, WRONG_TOOL

# memweb tells scripted players from LLM ones by these prefixes ("scripted" agents, "agenda" customers).
GOLD_REPLAY_LABEL = GOLD_REPLAY_AGENT
CUSTOMER_LABEL = "agenda:states-task-facts"
ANYTHING_ELSE = "小主，还有什么可以帮您？"

# What the diagnosis advises for each kind; the agent recognises the same words in a memory.
ADVICE = {
    WRONG_TOOL: "Look up what the customer asks about with the tool made for it (gifts: get_gift_info_tool, "
                "installation: get_installation_service_info_tool, shipping: get_logistics_info_tool), passing the "
                "ids exactly as the customer gave them.",
    WRONG_ARGUMENTS: "Check each argument of a change (order id, product id, action, amount, day) against the "
                     "customer's words and the tool results before calling it.",
    RESULT_UNUSED: "Quote the tool results the customer asked about in the reply, word for word.",
}
CUES = {
    WRONG_TOOL: ("the tool made for it", "wrong_tool", "wrong tool"),
    WRONG_ARGUMENTS: ("check each argument", "wrong_arguments", "wrong argument"),
    RESULT_UNUSED: ("quote the tool results", "result_unused", "result not used"),
}
# Read tools an agent that picks the wrong tool reaches for instead, in this order of preference.
_WRONG_TOOL_CHOICES = ("get_product_info", "get_user_orders_info", "get_discount_info", "get_user_info")


def kinds_cued(text: str) -> set[str]:
    """The error kinds that a memory text says how to avoid."""
    lowered = (text or "").lower()
    return {kind for kind, cues in CUES.items() if any(cue in lowered for cue in cues)}


def errors_observed(*, calls: list[dict], breakdown: dict, invented_ids: list[str]) -> list[dict]:
    """Error records from the failed reward components and the calls alone (never the answer key)."""
    writes = [call["name"] for call in calls if call_changes(call)]
    reads = [call["name"] for call in calls if tool_named(call["name"]) and not call_changes(call)]
    errors = []
    if breakdown.get("searches") == 0:
        errors.append({"kind": WRONG_TOOL, "tool": reads[-1] if reads else "reply",
                       "detail": "A look-up the request needed was not made. " + ADVICE[WRONG_TOOL]})
    if breakdown.get("actions") == 0:
        made = (f"The changes made ({', '.join(writes)}) did not leave the shop's records as the customer asked."
                if writes else "The customer asked for a change and none was made.")
        errors.append({"kind": WRONG_ARGUMENTS, "tool": writes[-1] if writes else "reply",
                       "detail": f"{made} {ADVICE[WRONG_ARGUMENTS]}"})
    if breakdown.get("outputs") == 0:
        errors.append({"kind": RESULT_UNUSED, "tool": reads[-1] if reads else "reply",
                       "detail": "The reply left out facts the customer asked for. " + ADVICE[RESULT_UNUSED]})
    return errors


# --- wrong tool, wrong arguments -------------------------------------------------------------

def wrong_tool_call(lookup: dict) -> dict | None:
    """Another read tool called with the look-up's own arguments, where one takes them."""
    arguments = lookup["arguments"]
    if "product_ids" in arguments and arguments["product_ids"]:
        arguments = {**arguments, "product_id": arguments["product_ids"][0]}
    meant = tool_named(lookup["name"])
    for name in _WRONG_TOOL_CHOICES:
        tool = TOOLS[name]
        needed = [param.name for param in tool.params if param.required]
        if tool is not meant and all(key in arguments for key in needed):
            return {"name": tool.agent_name, "arguments": {key: arguments[key] for key in needed}}
    return None


def _other_order(state: dict, arguments: dict) -> str:
    """Another order of the same customer, or the id with its last digit changed."""
    orders = state.get("orders", {}).get(arguments.get("platform"), {}).get(arguments.get("shop_id"), {})
    others = sorted(set(orders.get(arguments.get("user_id"), {})) - {arguments["order_id"]})
    if others:
        return others[0]
    last = arguments["order_id"][-1:]
    return arguments["order_id"][:-1] + ("1" if last != "1" else "2")


def arguments_corrupted(state: dict, action: dict) -> dict | None:
    """The arguments a careless agent passes instead of the gold action's, or None when it has none to get wrong."""
    arguments = dict(action["arguments"])
    if "amount" in arguments:
        return {**arguments, "amount": round(float(arguments["amount"]) + 10, 2)}
    if arguments.get("service_time") in WEEKDAYS:
        return {**arguments, "service_time": WEEKDAYS[(WEEKDAYS.index(arguments["service_time"]) + 1) % 7]}
    if arguments.get("product_info_list"):
        first, *rest = arguments["product_info_list"]
        return {**arguments, "product_info_list": [{**first, "quantity": int(first["quantity"]) + 1}, *rest]}
    if "order_id" in arguments:
        return {**arguments, "order_id": _other_order(state, arguments)}
    return None


# --- the players -----------------------------------------------------------------------------

class GoldReplayAgent:
    """The offline agent (see the module's docstring). `gold_receive(task)` hands it the answer key;
    the environment's `play` does so before the episode starts."""
    label = GOLD_REPLAY_LABEL
    tokens_in = tokens_out = 0

    def __init__(self, *, seed: int, key: str, error_rates: dict[str, float] | None = None):
        rng = random.Random(f"{seed}:{key}:gold-replay")
        rates = error_rates or {}
        self.planned = {kind: rng.random() < rates.get(kind, 0.0) for kind in (WRONG_TOOL, WRONG_ARGUMENTS,
                                                                             RESULT_UNUSED)}
        self.avoided: set[str] = set()
        self.committed: set[str] = set()
        self.task: dict | None = None
        self.done = False

    def gold_receive(self, task: dict) -> None:
        self.task = task

    def errs(self, kind: str) -> bool:
        if self.planned[kind] and kind not in self.avoided:
            self.committed.add(kind)
            return True
        return False

    def respond(self, *, text: str, memory: str, env, recall=None) -> str:
        if self.task is None:
            raise RuntimeError("the gold-replay agent plays only through the ECom-Bench environment's play(), "
                               "which hands it the task")
        self.avoided |= kinds_cued(memory)
        if self.done:
            return ANYTHING_ELSE
        self.done = True
        lookups, actions = self._lookups(), self._actions(env.state)
        results = [env.use(call["name"], **call["arguments"]) for call in lookups + actions]
        return self._reply(lookups + actions, results)

    def _lookups(self) -> list[dict]:
        lookups = list(self.task["gold_lookups"])
        wrong = wrong_tool_call(lookups[0]) if lookups else None
        if wrong is not None and self.errs(WRONG_TOOL):
            lookups[0] = wrong
        return lookups

    def _actions(self, state: dict) -> list[dict]:
        actions = [{"name": tool_named(a["name"]).agent_name, "arguments": a["arguments"]}
                   for a in self.task["gold_actions"]]
        for index, action in enumerate(actions):
            corrupted = arguments_corrupted(state, action)
            if corrupted is not None:
                if self.errs(WRONG_ARGUMENTS):
                    actions[index] = {**action, "arguments": corrupted}
                break
        return actions

    def _reply(self, calls: list[dict], results: list) -> str:
        done = "；".join(f"{call['name']}：{'已完成' if result.ok else '未成功'}" for call, result in zip(calls, results))
        reply = f"小主，已为您处理：{done}。" if calls else "小主，您好。"
        outputs = [output["value"] for output in self.task["required_outputs"]]
        if outputs and not self.errs(RESULT_UNUSED):
            reply += f"您关心的信息：{'、'.join(outputs)}。"
        return reply + ANYTHING_ELSE


def in_customer_words(intent_text: str) -> str:
    """An intent of the instruction ("你购买了…") as the customer says it ("我购买了…")."""
    return intent_text.replace("你", "我")


class FactCustomer:
    """The offline customer (see the module's docstring)."""
    label = CUSTOMER_LABEL
    tokens_in = tokens_out = 0

    def __init__(self, *, task: dict, seed: int):
        self.rng = random.Random(f"{seed}:{task['id']}:customer")
        self.agenda = [in_customer_words(intent["slots"]["text"]) for intent in task["intents"]]

    def opening(self) -> str:
        greeting = self.rng.choice(("你好。", "在吗？", "客服你好。"))
        return f"{greeting}{self.agenda.pop(0)}" if self.agenda else f"{greeting}\n{STOP}"

    def respond(self, agent_text: str) -> str:
        return self.agenda.pop(0) if self.agenda else f"好的，谢谢，再见。\n{STOP}"
