"""τ²-bench retail's reward, and the diagnosis a reflection may read.

The database component is the benchmark's: the database after the agent's calls must equal the
database after the task's gold calls replayed on a fresh copy (compared by canonical hash). The
communicate component checks that every string of the task's `communicate_info` appears in one of
the agent's replies (case folded, commas removed, as the benchmark compares). Natural-language
assertions need an LLM judge; offline they are reported as not judged and never count as passed.
"""
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evaluation.environments import benchmark
from evaluation.environments.protocol import RESULT_UNUSED, WRONG_ARGUMENTS, WRONG_TOOL, RewardResult, ToolResult
from evaluation.environments.tau2_retail.database import RetailState
from evaluation.environments.tau2_retail.tools import WRITE_TOOLS, tool_run

REWARD_VERSION = 1
COMPONENTS = ("db", "communicate", "nl_assertions")  # nl_assertions only where a judge scored them

# Who judges a task's natural-language assertions: set by the Django side to the scorer LLM role.
# It takes the assertions and the agent's replies and answers one verdict per assertion, or None
# when no judge is reachable (no endpoint configured): the assertions are then "not judged".
AssertionJudge = Callable[[list[str], list[str]], list[bool] | None]
_judge: AssertionJudge | None = None


def assertion_judge_set(judge: AssertionJudge | None) -> None:
    global _judge
    _judge = judge
_SOURCES = ("reward.py", "tools.py", "database.py")


def reward_source_hash() -> str:
    folder = Path(__file__).parent
    return hashlib.sha256(b"".join((folder / name).read_bytes() for name in _SOURCES)).hexdigest()


def state_fresh(world: str) -> RetailState:
    """A database for one episode or replay, starting as the world's initial one."""
    return RetailState(benchmark.world(world).database, world)


def calls_apply(state: RetailState, calls: list[dict]) -> list[ToolResult]:
    return [tool_run(state, call.get("name", ""), call.get("arguments")) for call in calls]


@dataclass
class GoldReplay:
    state: RetailState
    results: list[ToolResult]


def gold_replay(task: dict) -> GoldReplay:
    """The task's gold calls on a fresh database (the benchmark ignores a gold call that fails; so do we)."""
    state = state_fresh(task["world"])
    return GoldReplay(state, calls_apply(state, task["gold_calls"]))


def gold_replies(task: dict) -> list[str]:
    """What the gold solution tells the customer: the task's communicate_info (the answer key)."""
    return [output["value"] for output in task["required_outputs"]]


def tells(value: str, text: str) -> bool:
    """The benchmark's test of whether a reply communicates `value`."""
    return value.lower() in text.lower().replace(",", "")


def score(task: dict, state: RetailState, replies: list[str], *, judged: bool = False) -> RewardResult:
    """The benchmark's reward. With `judged` (a played or re-graded episode, never the validator's or
    env_replay's replays), the task's natural-language assertions go to the judge when there is one;
    unjudged assertions are counted, never passed."""
    gold_hash, got_hash = gold_replay(task).state.state_hash(), state.state_hash()
    missing = [output for output in task["required_outputs"]
               if not any(tells(output["value"], reply) for reply in replies)]
    components = {"db": got_hash == gold_hash, "communicate": not missing}
    assertions = task.get("nl_assertions") or []
    verdicts = _judge(assertions, replies) if judged and assertions and _judge is not None else None
    if verdicts is not None:
        components["nl_assertions"] = all(verdicts)
    success = all(components.values())
    breakdown = {name: float(passed) for name, passed in components.items()}
    breakdown["nl_assertions_not_judged"] = len(assertions) if verdicts is None else 0
    return RewardResult(success=success, reward=1.0 if success else 0.0, breakdown=breakdown, missing_lookups=[],
                        missing_outputs=missing, invented_ids=[], state_hash=got_hash, gold_state_hash=gold_hash)


def changes_database(task: dict) -> bool:
    """Whether the gold calls leave a database other than the initial one."""
    return bool(gold_replay(task).state.changes())


# Advice written into the diagnosis, so that a reflection of the episode carries it; the offline
# gold-replay agent recognises the same phrases in a retrieved memory and then avoids that error kind.
ADVICE = {
    WRONG_TOOL: "Make the change the customer asked for with the write tool that does it (cancel, modify, return "
                "or exchange), after looking the order up; a look-up alone changes nothing.",
    WRONG_ARGUMENTS: "Check each argument of a write call (order id, item ids, payment method, reason, address) "
                     "against the tool results and the customer's words before calling.",
    RESULT_UNUSED: "State the facts the tools returned (amounts, counts, ids) in the reply to the customer.",
}
CUES = {
    WRONG_TOOL: ("write tool that does it", "a look-up alone changes nothing", "wrong tool", "wrong_tool"),
    WRONG_ARGUMENTS: ("check each argument", "wrong argument", "wrong_arguments"),
    RESULT_UNUSED: ("state the facts", "result_unused", "result not used"),
}


def kinds_cued(memory: str) -> set[str]:
    said = (memory or "").lower()
    return {kind for kind, cues in CUES.items() if any(cue in said for cue in cues)}


def errors_observed(*, calls: list[dict], breakdown: dict) -> list[dict]:
    """Error records from the calls and the reward's components only (never the gold answer)."""
    errors = []
    writes = [call for call in calls if call["name"] in WRITE_TOOLS]
    if breakdown.get("db") == 0:
        failed = [call for call in writes if not call.get("ok")]
        if not any(call.get("ok") for call in writes):
            detail = "The database was not changed as the request needed. " + (
                f"{failed[-1]['name']} answered: {failed[-1]['content']}. " if failed else "") + ADVICE[WRONG_TOOL]
            errors.append({"kind": WRONG_TOOL, "tool": failed[-1]["name"] if failed else
                           (calls[-1]["name"] if calls else "reply"), "detail": detail})
        else:
            tool = next(call["name"] for call in reversed(writes) if call.get("ok"))
            errors.append({"kind": WRONG_ARGUMENTS, "tool": tool,
                           "detail": f"The change made with {tool} is not the one the request needed. "
                                     + ADVICE[WRONG_ARGUMENTS]})
    if breakdown.get("communicate") == 0:
        errors.append({"kind": RESULT_UNUSED, "tool": calls[-1]["name"] if calls else "reply",
                       "detail": "A fact the customer needed was not told. " + ADVICE[RESULT_UNUSED]})
    return errors
