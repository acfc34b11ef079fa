"""The library's state, its tools and its reward."""
import copy
import hashlib
import json
from dataclasses import dataclass

from evaluation.environments import RewardResult, ToolResult

BOOKS = {
    "B1": {"id": "B1", "title": "Dune", "author": "Frank Herbert", "copies_available": 0},
    "B2": {"id": "B2", "title": "Emma", "author": "Jane Austen", "copies_available": 2},
    "B3": {"id": "B3", "title": "Ulysses", "author": "James Joyce", "copies_available": 1},
    "B4": {"id": "B4", "title": "Beloved", "author": "Toni Morrison", "copies_available": 0},
}
MEMBERS = {
    "M1": {"id": "M1", "name": "Ada Brook", "email": "ada@example.org"},
    "M2": {"id": "M2", "name": "Ben Cole", "email": "ben@example.org"},
}
POLICIES = ("A hold can be placed on a book with no copy on the shelf; it is kept for 7 days once the book is back.",
            "Identify the member by email before placing a hold.")


def library_fresh() -> dict:
    """The library as every episode starts it: no holds yet."""
    return {"books": copy.deepcopy(BOOKS), "members": copy.deepcopy(MEMBERS), "holds": []}


def _schema(name: str, description: str, **properties) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {key: {"type": "string", "description": text}
                                         for key, text in properties.items()},
        "required": list(properties), "additionalProperties": False}}}


TOOL_SCHEMAS = [
    _schema("find_member", "Find a library member by email.", email="the member's email"),
    _schema("search_books", "Books whose title contains the query, with the copies on the shelf.",
            query="words of the title"),
    _schema("place_hold", "Place a hold for a member on a book.", member_id="e.g. M1", book_id="e.g. B1"),
]


class _Refused(Exception):
    pass


def _find_member(state: dict, email: str) -> dict:
    found = [m for m in state["members"].values() if m["email"] == email.strip().lower()]
    if not found:
        raise _Refused(f"no member with email {email!r}")
    return found[0]


def _search_books(state: dict, query: str) -> dict:
    return {"books": [b for b in state["books"].values() if query.strip().lower() in b["title"].lower()]}


def _place_hold(state: dict, member_id: str, book_id: str) -> dict:
    if member_id not in state["members"] or book_id not in state["books"]:
        raise _Refused(f"unknown member {member_id!r} or book {book_id!r}")
    if state["books"][book_id]["copies_available"]:
        raise _Refused("a copy is on the shelf: no hold is needed")
    hold = {"id": f"H{len(state['holds']) + 1}", "member_id": member_id, "book_id": book_id}
    state["holds"].append(hold)
    return hold


_TOOLS = {"find_member": _find_member, "search_books": _search_books, "place_hold": _place_hold}


def tool_run(state: dict, name: str, arguments) -> ToolResult:
    """One call; a refusal or a bad call is the tool's answer, never an exception."""
    tool = _TOOLS.get(name)
    if tool is None:
        return ToolResult(ok=False, content=f"Error: unknown tool {name!r}", data=None)
    try:
        data = tool(state, **(arguments or {}))
    except (_Refused, TypeError) as exc:
        return ToolResult(ok=False, content=f"Error: {exc}", data=None)
    return ToolResult(ok=True, content=json.dumps(data), data=data)


def state_hash(state: dict) -> str:
    """What a write can change: the holds."""
    return hashlib.sha256(json.dumps(sorted((h["member_id"], h["book_id"]) for h in state["holds"])).encode()).hexdigest()


@dataclass
class GoldReplay:
    state: dict
    failures: list[str]
    results: list[ToolResult]


def gold_replay(task: dict) -> GoldReplay:
    state, failures, results = library_fresh(), [], []
    for call in task["gold_lookups"] + task["gold_actions"]:
        result = tool_run(state, call["name"], call["arguments"])
        results.append(result)
        if not result.ok:
            failures.append(f"{call['name']}: {result.content}")
    return GoldReplay(state, failures, results)


def tells(value: str, text: str) -> bool:
    return " ".join(value.lower().split()) in " ".join(text.lower().split())


def reward_compute(*, task: dict, final_state: dict, calls: list[dict], replies: list[str]) -> RewardResult:
    """Success when the holds are the gold's, every gold look-up was made and every fact told."""
    gold_hash, got_hash = state_hash(gold_replay(task).state), state_hash(final_state)
    missing_lookups = [g for g in task["gold_lookups"]
                       if not any(c["name"] == g["name"] and c.get("ok") for c in calls)]
    told = "\n".join(replies)
    missing_outputs = [o for o in task["required_outputs"] if not tells(o["value"], told)]
    components = {"state": got_hash == gold_hash, "lookups": not missing_lookups, "outputs": not missing_outputs}
    success = all(components.values())
    return RewardResult(success=success, reward=1.0 if success else 0.0,
                        breakdown={name: float(passed) for name, passed in components.items()},
                        missing_lookups=missing_lookups, missing_outputs=missing_outputs, invented_ids=[],
                        state_hash=got_hash, gold_state_hash=gold_hash)


def errors_observed(*, calls: list[dict], breakdown: dict, invented_ids: list[str]) -> list[dict]:
    """From the failed components and the calls alone (no gold answer)."""
    errors = []
    if breakdown.get("lookups") == 0:
        errors.append({"kind": "wrong_tool", "tool": calls[-1]["name"] if calls else "reply",
                       "detail": "A look-up the request needed was not made: search the catalogue first."})
    if breakdown.get("state") == 0:
        holds = [c for c in calls if c["name"] == "place_hold"]
        errors.append({"kind": "wrong_arguments", "tool": "place_hold",
                       "detail": "The hold was not placed on the book asked for: check the book id in the search "
                                 "result." if holds else "No hold was placed."})
    if breakdown.get("outputs") == 0:
        errors.append({"kind": "result_unused", "tool": "search_books",
                       "detail": "Tell the member what the search found."})
    return errors
