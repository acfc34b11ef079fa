"""The three error kinds of the MemOrb paper: how a task can provoke them, how the scripted agent
commits them (wrong arguments), and how a finished episode is diagnosed.

Two diagnoses: `errors_observed` reads only what a reflector may see (the tool calls with their
results and the reward components) and is what memory learns from; `errors_diagnose` compares the
episode with the task's gold answer, for the evaluator's pages and the labelled "oracle" reflection
variant. The second names values only the answer key holds, so it must never reach memory by default."""
import json
import re
from datetime import date, timedelta

from evaluation.environments.protocol import ERROR_KINDS as ERROR_KINDS  # the shop makes all three
from evaluation.environments.protocol import RESULT_UNUSED, WRONG_ARGUMENTS, WRONG_TOOL
from evaluation.shop import catalogue as cat
from evaluation.shop.reward import mentions
from evaluation.shop.tools import TOOLS

# Advice written into the diagnosis, so that a reflection of the episode carries it; the scripted
# agent recognises the same phrases in retrieved memories and then avoids that error kind.
ADVICE = {
    WRONG_TOOL: "Without an order number, call list_customer_orders and pick the order holding the named product.",
    WRONG_ARGUMENTS: "Check each argument against the customer's words and the tool results before a change.",
    RESULT_UNUSED: "Quote the tool result in the reply (exact dates, amounts, ids, sizes).",
}
CUES = {
    WRONG_TOOL: ("list_customer_orders", "list the customer's orders", "customer's orders first", "wrong tool",
                 "wrong_tool"),
    WRONG_ARGUMENTS: ("check each argument", "wrong argument", "wrong_arguments", "correct argument",
                      "check them before calling"),
    RESULT_UNUSED: ("quote the tool result", "result_unused", "result not used", "was not used in the reply",
                    "state the facts"),
}


# A remembered call of a write tool with its arguments spelled out, e.g. "`cancel_order`(order_id=...":
# a worked example of the right arguments for that kind of change.
_WORKED_WRITE_RE = re.compile(r"`(" + "|".join(name for name, t in TOOLS.items() if t.writes) + r")`\(\w+=")


# Bad advice a memory can carry (a wrong lesson a reflector drew): the scripted agent follows it and
# commits that error kind whether or not it was planned, which is how a harmful memory shows up offline.
MISLEADING_CUES = {
    WRONG_TOOL: ("search the catalogue for the product first",),
    WRONG_ARGUMENTS: ("reuse the arguments of the last call",),
    RESULT_UNUSED: ("do not repeat tool output to the customer",),
}


def kinds_misled(text: str) -> set[str]:
    """The error kinds that a memory text's bad advice leads the agent into."""
    lowered = (text or "").lower()
    return {kind for kind, cues in MISLEADING_CUES.items() if any(cue in lowered for cue in cues)}


def kinds_cued(text: str) -> set[str]:
    """The error kinds that a memory text says how to avoid."""
    lowered = (text or "").lower()
    kinds = {kind for kind, cues in CUES.items() if any(cue in lowered for cue in cues)}
    if _WORKED_WRITE_RE.search(text or ""):
        kinds.add(WRONG_ARGUMENTS)
    return kinds


def task_error_kinds(task: dict, state: dict) -> list[str]:
    """Which error kinds a task gives an agent the chance to make (`state`: the task's fresh shop)."""
    kinds = []
    if any(g["name"] == "list_customer_orders" for g in task["gold_lookups"]):
        kinds.append(WRONG_TOOL)
    if any(corrupt_arguments(state, a) is not None for a in task["gold_actions"]):
        kinds.append(WRONG_ARGUMENTS)
    if task["required_outputs"]:
        kinds.append(RESULT_UNUSED)
    return kinds


# --- wrong arguments: a plausible mistake per write tool, or None when there is none ----------

def corrupt_arguments(state: dict, action: dict) -> dict | None:
    """The arguments a careless agent would pass instead of the right ones, on shop `state`."""
    corrupt = _CORRUPTIONS.get(action["name"])
    return corrupt(state, dict(action["arguments"])) if corrupt else None


def _other(values: tuple[str, ...], current: str) -> str:
    return values[(values.index(current) + 1) % len(values)] if current in values else values[0]


def _reason_swap(choices):
    def swap(_state, args):
        return {**args, "reason": _other(choices, args["reason"])}
    return swap


def _exchange(state, args):
    product = state["products"][args["new_sku"].rsplit("-", 2)[0]]
    item_sku = _item_sku(state, args)
    for variant in product["variants"]:
        if variant["sku"] not in (args["new_sku"], item_sku) and variant["stock"] >= 2:
            return {**args, "new_sku": variant["sku"]}
    return None


def _item_sku(state, args) -> str:
    for item in state["orders"][args["order_id"]]["items"]:
        if item["item_id"] == args["item_id"]:
            return item["sku"]
    return ""


def _refund(state, args):
    order = state["orders"][args["order_id"]]
    if args["reason"] == "missing_item":
        return {**args, "amount": order["total"]}
    return {**args, "amount": round(args["amount"] + 10.0, 2)}


def _address(state, args):
    return {**args, **{k: state["orders"][args["order_id"]]["shipping_address"][k] for k in ("street", "city",
                                                                                              "postcode")}}


def _service(_state, args):
    later = date.fromisoformat(args["date"]) + timedelta(days=1)
    if later.weekday() == 6:
        later += timedelta(days=1)
    return {**args, "date": later.isoformat()}


def _invoice(_state, args):
    if args.get("invoice_type") != "company":
        return None
    return {"order_id": args["order_id"], "invoice_type": "personal"}


_CORRUPTIONS = {
    "cancel_order": _reason_swap(cat.CANCEL_REASONS),
    "return_items": _reason_swap(cat.RETURN_REASONS),
    "exchange_item": _exchange,
    "issue_refund": _refund,
    "change_shipping_address": _address,
    "schedule_service": _service,
    "issue_invoice": _invoice,
}


# --- diagnosis from what the episode shows (no answer key) ---------------------------------

def errors_observed(*, calls: list[dict], breakdown: dict, invented_ids: list[str]) -> list[dict]:
    """Error records {kind, tool, detail} from the agent's tool calls (name, arguments, ok, content)
    and the reward's components alone: which component failed says what kind of thing went wrong,
    the calls say where. Nothing of the gold answer (its ids, arguments, facts, look-ups) is read, so
    a detail holds only values the agent itself used or a tool returned."""
    errors = _lookups_failed(calls) if breakdown.get("lookups") == 0 else []
    if breakdown.get("state") == 0 and not errors:
        errors.append(_state_failed(calls))
    if breakdown.get("outputs") == 0:
        errors.append(_outputs_failed(calls))
    return errors + [_invented(oid, calls) for oid in invented_ids]


def _lookups_failed(calls: list[dict]) -> list[dict]:
    if not any(c["name"] == "list_customer_orders" for c in calls):
        instead = "search_products" if any(c["name"] == "search_products" for c in calls) else _last_tool(calls)
        return [{"kind": WRONG_TOOL, "tool": instead, "detail": "A look-up the request needed was not made (lookups "
                 "component unmet) and the customer's orders were never listed. " + ADVICE[WRONG_TOOL]}]
    return [{"kind": WRONG_TOOL, "tool": _last_tool(calls), "detail": "A look-up the request needed was not made "
             "(lookups component unmet): look the customer and the order up before answering or acting."}]


def _state_failed(calls: list[dict]) -> dict:
    writes = [c for c in calls if TOOLS.get(c["name"]) is not None and TOOLS[c["name"]].writes]
    if not writes:
        return {"kind": WRONG_TOOL, "tool": _last_tool(calls), "detail": "No tool changed the shop, though the "
                "request needed a change (state component unmet)."}
    last = writes[-1]
    if not last.get("ok"):
        detail = f"{last['name']} failed: {(last.get('content') or '')[:200]}. "
    else:
        detail = f"{last['name']} changed the shop, but not as the request needed (state component unmet). "
    return {"kind": WRONG_ARGUMENTS, "tool": last["name"], "detail": detail + ADVICE[WRONG_ARGUMENTS]}


def _outputs_failed(calls: list[dict]) -> dict:
    lookups = [c["name"] for c in calls if c.get("ok") and TOOLS.get(c["name"]) is not None
               and not TOOLS[c["name"]].writes]
    return {"kind": RESULT_UNUSED, "tool": (lookups or ["reply"])[-1], "detail": "A fact the customer asked for was "
            "never told (outputs component unmet). " + ADVICE[RESULT_UNUSED]}


# --- diagnosis against the gold answer (evaluator's view, oracle reflection) -----------------

def errors_diagnose(*, task: dict, calls: list[dict], reward) -> list[dict]:
    """Error records {kind, tool, detail} for the shared trajectory. As in the Orbs trajectory
    schema, `tool` is the tool that was misused (the wrong one called, the one given wrong
    arguments, the one whose result went unused) and `detail` says what to do instead. Only root
    causes are reported: a look-up that was skipped because the order was never found is not."""
    errors = _lookup_errors(reward.missing_lookups, calls)
    errors += _action_errors(task, calls, stuck=bool(errors))
    errors += [_spurious(c) for c in calls if _is_spurious_write(task, c)]
    errors += _unused_errors(task, calls, reward.missing_outputs, stuck=bool(errors))
    errors += [_invented(oid, calls) for oid in reward.invented_ids]
    return errors


def _unused_errors(task: dict, calls: list[dict], missing: list[dict], *, stuck: bool) -> list[dict]:
    """A fact counts as unused when a tool the agent called returned it, or — for facts worked out
    from results (a size from a chart) — when nothing else went wrong first."""
    errors = []
    for output in missing:
        told_by = [c["name"] for c in calls if c.get("ok") and mentions(output["value"], c.get("content", ""))]
        if told_by or not stuck:
            tool = (told_by or [g["name"] for g in task["gold_lookups"] + task["gold_actions"]] or ["reply"])[-1]
            errors.append(_unused(output, tool))
    return errors


def _lookup_errors(missing: list[dict], calls: list[dict]) -> list[dict]:
    if any(g["name"] == "list_customer_orders" for g in missing):
        instead = "search_products" if any(c["name"] == "search_products" for c in calls) else "reply"
        return [{"kind": WRONG_TOOL, "tool": instead, "detail": "list_customer_orders was never called. "
                 + ADVICE[WRONG_TOOL]}]
    return [{"kind": WRONG_TOOL, "tool": _last_tool(calls),
             "detail": f"{g['name']} was never called, though the request needed its result; call {g['name']} "
                       "before answering or acting."} for g in missing]


def _last_tool(calls: list[dict]) -> str:
    return calls[-1]["name"] if calls else "reply"


def _invented(order_id: str, calls: list[dict]) -> dict:
    users = [c["name"] for c in calls if order_id in json.dumps(c.get("arguments") or {})]
    return {"kind": WRONG_ARGUMENTS, "tool": users[0] if users else "reply",
            "detail": f"order id {order_id} does not exist in the shop; never invent ids. " + ADVICE[WRONG_TOOL]}


def _action_errors(task: dict, calls: list[dict], *, stuck: bool) -> list[dict]:
    errors = []
    for gold in task["gold_actions"]:
        same_name = [c for c in calls if c["name"] == gold["name"]]
        if any(c.get("ok") and _args_equal(c.get("arguments") or {}, gold["arguments"], gold["name"])
               for c in same_name):
            continue
        if same_name:
            errors.append(_wrong_arguments(gold, same_name[-1]))
        elif not stuck:
            errors.append({"kind": WRONG_TOOL, "tool": _last_tool(calls),
                           "detail": f"{gold['name']} was never called, though the request needed it."})
    return errors


def _args_equal(got: dict, want: dict, name: str) -> bool:
    if name == "transfer_to_human":
        return got.get("customer_id") == want.get("customer_id")
    return all(_norm(got.get(k)) == _norm(v) for k, v in want.items())


def _norm(value):
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, float | int) and not isinstance(value, bool):
        return round(float(value), 2)
    return value


def _wrong_arguments(gold: dict, call: dict) -> dict:
    got = call.get("arguments") or {}
    wrong = [k for k, v in gold["arguments"].items() if _norm(got.get(k)) != _norm(v)]
    if not call.get("ok"):
        detail = f"{gold['name']} failed: {call.get('content', '')[:200]}. "
    else:
        parts = [f"{k}={got.get(k)!r} where the request needed {k}={gold['arguments'][k]!r}" for k in wrong]
        detail = f"{gold['name']} was called with " + "; ".join(parts) + ". "
    return {"kind": WRONG_ARGUMENTS, "tool": gold["name"], "detail": detail + ADVICE[WRONG_ARGUMENTS]}


def _is_spurious_write(task: dict, call: dict) -> bool:
    gold_names = {g["name"] for g in task["gold_actions"]}
    return call.get("ok") and TOOLS.get(call["name"]) is not None and TOOLS[call["name"]].writes \
        and call["name"] not in gold_names


def _spurious(call: dict) -> dict:
    return {"kind": WRONG_TOOL, "tool": call["name"],
            "detail": f"{call['name']} changed the shop although the request did not need it."}


def _unused(output: dict, tool: str) -> dict:
    return {"kind": RESULT_UNUSED, "tool": tool,
            "detail": f"The {output['label']} ({output['value']}) was never told. " + ADVICE[RESULT_UNUSED]}
