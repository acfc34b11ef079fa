"""ECom-Bench's reward, as its envs/story/env.py defines it, computed by memweb's own code.

Three pass/fail components, and the reward is their product:
- actions: the final database after the agent's calls equals the database after replaying the
  task's gold actions on a fresh copy (both normalised the benchmark's way, then hashed: equal
  hashes exactly when the benchmark's would be equal, though the hash itself is memweb's);
- searches: every gold look-up is among the agent's calls, compared by name and arguments exactly
  as sent (a failed call counts, as in the benchmark);
- outputs: every required string appears in the agent's replies, joined.
The benchmark also reports a response-time score outside the product; memweb does not.
"""
import functools
import hashlib
import json

from evaluation.environments.benchmark import world, world_fresh
from evaluation.environments.content import canonical_json
from evaluation.environments.ecom_bench.tools import tool_run
from evaluation.environments.protocol import RewardResult, ToolResult

COMPONENTS = ("actions", "searches", "outputs")


def normalised(value):
    """The benchmark's normal form: dict keys sorted, and lists of scalars or of dicts sorted, so
    that two databases differing only in list order compare equal."""
    if isinstance(value, dict):
        return {key: normalised(value[key]) for key in sorted(value)}
    if not isinstance(value, list):
        return value
    items = [normalised(item) for item in value]
    try:
        if all(isinstance(item, str | int | float) for item in items):
            return sorted(items)
        if all(isinstance(item, dict) for item in items):
            return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    except TypeError:  # scalars of unorderable kinds (text beside numbers) keep their order
        pass
    return items


def _file_hash(content) -> str:
    text = json.dumps(normalised(content), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=64)
def _initial_file_hashes(world_key: str) -> dict[str, str]:
    return {name: _file_hash(content) for name, content in world(world_key).database.items()}


def database_hash(database: dict, *, world_key: str | None = None) -> str:
    """The hash of the normalised database, one data file at a time. With `world_key`, a file still
    equal to the initial one takes its hash from a cache (most files are never written: hashing the
    product catalogue again on every episode would cost more than the episode)."""
    initial = world(world_key).database if world_key else {}
    cached = _initial_file_hashes(world_key) if world_key else {}
    files = {name: cached[name] if name in cached and content == initial[name] else _file_hash(content)
             for name, content in database.items()}
    return hashlib.sha256(canonical_json(files).encode()).hexdigest()


def calls_apply(database: dict, calls: list[dict]) -> list[ToolResult]:
    """Run `calls` ([{name, arguments}]) in order on `database` (changed in place)."""
    return [tool_run(database, call["name"], call.get("arguments")) for call in calls]


@functools.lru_cache(maxsize=256)
def _gold_hash(world_key: str, gold_actions: str) -> str:
    database = world_fresh(world_key)
    calls_apply(database, json.loads(gold_actions))
    return database_hash(database, world_key=world_key)


def gold_database_hash(task: dict) -> str:
    """The hash of the task's fresh database after its gold actions, computed once per distinct pair."""
    return _gold_hash(task["world"], canonical_json(task["gold_actions"]))


def call_key(call: dict) -> str:
    """A call as the searches component compares it: its name and its arguments as sent."""
    return canonical_json({"name": call["name"], "arguments": call.get("arguments") or {}})


def tells(value: str, text: str) -> bool:
    """The outputs component's test: the required string appears verbatim."""
    return value in text


def reward_compute(*, task: dict, database: dict, calls: list[dict], replies: list[str] | tuple[str, ...]
                   ) -> RewardResult:
    """Score an episode: `database` is its final database, `calls` every tool call it made
    ([{name, arguments, ...}]), `replies` the agent's messages to the customer."""
    got_hash, gold_hash = database_hash(database, world_key=task["world"]), gold_database_hash(task)
    made = {call_key(call) for call in calls}
    missing_lookups = [lookup for lookup in task["gold_lookups"] if call_key(lookup) not in made]
    told = "".join(replies)
    missing_outputs = [output for output in task["required_outputs"] if not tells(output["value"], told)]
    passed = {"actions": got_hash == gold_hash, "searches": not missing_lookups, "outputs": not missing_outputs}
    reward = float(all(passed.values()))
    return RewardResult(
        success=reward == 1.0, reward=reward,
        breakdown={**{name: float(ok) for name, ok in passed.items()},
                   "searches_missing": len(missing_lookups), "outputs_missing": len(missing_outputs)},
        missing_lookups=missing_lookups, missing_outputs=missing_outputs, invented_ids=[],
        state_hash=got_hash, gold_state_hash=gold_hash)
