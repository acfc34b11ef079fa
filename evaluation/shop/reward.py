"""τ-bench style reward: replay the task's gold actions on a fresh shop and compare final states,
check the gold look-ups were made and the required facts were told to the customer, and fail any
episode that mentions an order id the shop does not have."""
import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from evaluation.environments.protocol import RewardResult
from evaluation.shop.generator import shop_fresh
from evaluation.shop.tools import ORDER_ID_RE, tool_execute

_RECORDS = ("invoices", "refunds", "returns", "exchanges", "appointments")

# Bump it with every change to this module that changes what an episode earns: runs scored with an
# older version are marked stale (evaluation.runs) until they are re-graded.
REWARD_VERSION = 1


@functools.cache
def reward_source_hash() -> str:
    """SHA-256 of this module's source, pinned by runs beside REWARD_VERSION. It names the exact code;
    since any edit (a comment too) changes it, staleness follows REWARD_VERSION only."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def state_fingerprint(state: dict) -> str:
    """SHA-256 of everything a write tool can change: order status, reason, address and item
    statuses, the records writes create, stock and transfers (free-text summaries left out).
    Reading only these fields keeps scoring cheap; the rest of the shop is never written."""
    orders = [(o["id"], o["status"], o["cancelled_reason"], o["shipping_address"],
               [i["status"] for i in o["items"]]) for o in state["orders"].values()]
    records = {key: state[key] for key in _RECORDS}
    stock = [v["stock"] for p in state["products"].values() for v in p.get("variants", ())]
    transfers = sorted(t["customer_id"] for t in state["transfers"])
    relevant = json.dumps([orders, records, stock, transfers], sort_keys=True)
    return hashlib.sha256(relevant.encode()).hexdigest()


@dataclass
class GoldReplay:
    state: dict
    results: list  # ToolResult per gold look-up and action, in order
    failures: list[str] = field(default_factory=list)


def gold_replay(task: dict) -> GoldReplay:
    """Run the gold look-ups then the gold actions on a fresh copy of the task's shop."""
    state = shop_fresh(task["shop_seed"])
    replay = GoldReplay(state=state, results=[])
    for call in task["gold_lookups"] + task["gold_actions"]:
        result = tool_execute(state, call["name"], call["arguments"])
        replay.results.append(result)
        if not result.ok:
            replay.failures.append(f"{call['name']}: {result.content}")
    return replay


def reward_compute(*, task: dict, final_state: dict, calls: list[dict], replies: list[str],
                   gold_state_hash: str | None = None) -> RewardResult:
    """Score an episode. `calls`: dicts with name, arguments, ok; `replies`: the agent's messages."""
    state_hash = state_fingerprint(final_state)
    gold_hash = gold_state_hash or state_fingerprint(gold_replay(task).state)
    missing_lookups = [g for g in task["gold_lookups"] if not any(_call_matches(g, c) for c in calls)]
    told = "\n".join(replies)
    missing_outputs = [o for o in task["required_outputs"] if not mentions(o["value"], told)]
    invented = invented_order_ids(final_state, calls, replies)
    components = {"state": state_hash == gold_hash, "grounded": not invented}
    if task["gold_lookups"]:
        components["lookups"] = not missing_lookups
    if task["required_outputs"]:
        components["outputs"] = not missing_outputs
    breakdown = {name: 1.0 if passed else 0.0 for name, passed in components.items()}
    breakdown["lookups_made"] = float(len(task["gold_lookups"]) - len(missing_lookups))
    breakdown["outputs_told"] = float(len(task["required_outputs"]) - len(missing_outputs))
    success = all(components.values())
    return RewardResult(success=success, reward=1.0 if success else 0.0, breakdown=breakdown,
                        missing_lookups=missing_lookups, missing_outputs=missing_outputs,
                        invented_ids=invented, state_hash=state_hash, gold_state_hash=gold_hash)


def _call_matches(gold: dict, call: dict) -> bool:
    if call["name"] != gold["name"] or not call.get("ok"):
        return False
    arguments = call.get("arguments") or {}
    return all(_same(arguments.get(key), value) for key, value in gold["arguments"].items())


def _same(got, want) -> bool:
    if isinstance(want, str) and isinstance(got, str):
        return got.strip().lower() == want.strip().lower()
    return got == want


_NUMBER_RE = re.compile(r"^\d+(?:\.\d+)?$")
_NUMBERS_IN_TEXT_RE = re.compile(r"(?<![\d.-])\d+(?:\.\d+)?(?![\d-])")


def mentions(value: str, text: str) -> bool:
    """Whether `text` tells `value`: amounts compare as numbers ("79.00" is told by "$79"),
    everything else as normalised text."""
    value, text = normalise_text(value), normalise_text(text)
    if _NUMBER_RE.match(value):
        return any(abs(float(found) - float(value)) < 0.005 for found in _NUMBERS_IN_TEXT_RE.findall(text))
    return value in text


def normalise_text(text: str) -> str:
    """Lower case, no currency signs or thousands separators, single spaces."""
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text.lower()).replace("$", "").replace("usd ", "")
    return re.sub(r"\s+", " ", text)


def invented_order_ids(state: dict, calls: list[dict], replies: list[str]) -> list[str]:
    """Order ids the agent used or stated that do not exist in the shop: hallucinations."""
    texts = list(replies) + [json.dumps(c.get("arguments") or {}) for c in calls]
    mentioned = {match.upper() for text in texts for match in ORDER_ID_RE.findall(text or "")}
    return sorted(oid for oid in mentioned if oid not in state["orders"])
