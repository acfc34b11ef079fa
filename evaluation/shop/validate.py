"""Task validation: structure (TaskSpec) and solvability on the seeded shop.

Broken gold tasks are the most reported defect of the public benchmarks, so every task — built-in
or imported — must replay: its gold look-ups and actions succeed on a fresh shop, the actions
change the state, every required fact can be read from a tool, the gold solution earns success
and an agent that does nothing fails.
"""
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evaluation.shop.errors import ERROR_KINDS
from evaluation.shop.generator import DEFAULT_SEED, shop_fresh
from evaluation.shop.reward import gold_replay, mentions, reward_compute, state_fingerprint
from evaluation.shop.task_specs import EMOTIONS, IDENTIFY_TOOL, TRUST_LEVELS
from evaluation.shop.tools import TOOLS

INTENT_KINDS = ("track_order", "cancel_order", "return_item", "exchange_item", "warranty_info",
                "schedule_installation", "schedule_repair", "invoice", "price_protection", "change_address",
                "size_advice", "material_info", "missing_item", "transfer")
DOMAINS = ("appliances", "clothing")
SPLITS = ("train", "dev", "test")
DIFFICULTIES = ("easy", "medium", "hard")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Persona(_Strict):
    name: str = Field(min_length=1, max_length=100)
    emotion: Literal[EMOTIONS]
    patience: int = Field(ge=1, le=10)
    trust: Literal[TRUST_LEVELS]


class Intent(_Strict):
    kind: Literal[INTENT_KINDS]
    slots: dict = Field(default_factory=dict)


class Call(_Strict):
    name: str
    arguments: dict

    @field_validator("name")
    @classmethod
    def _known_tool(cls, name: str) -> str:
        if name not in TOOLS:
            raise ValueError(f"unknown tool {name!r}")
        return name


class Output(_Strict):
    label: str = Field(min_length=1, max_length=100)
    value: str = Field(min_length=1, max_length=200)
    # Derived facts are worked out from tool results (a size from a size chart), not read verbatim.
    derived: bool = False


class TaskSpec(_Strict):
    """One task as stored in the database and in JSONL files."""

    id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$")
    domain: Literal[DOMAINS]
    split: Literal[SPLITS]
    difficulty: Literal[DIFFICULTIES]
    template: str = Field(default="custom", max_length=100)
    shop_seed: int = DEFAULT_SEED
    customer_id: str
    persona: Persona
    intents: list[Intent] = Field(min_length=1)
    known: dict[str, str]
    unknown: list[str] = Field(default_factory=list)
    gold_lookups: list[Call] = Field(default_factory=list)
    gold_actions: list[Call] = Field(default_factory=list)
    required_outputs: list[Output] = Field(default_factory=list)
    error_kinds: list[Literal[ERROR_KINDS]] = Field(default_factory=list)
    instructions: str = ""


def spec_errors(raw: dict) -> tuple[dict | None, list[str]]:
    """(normalised task, problems): structure first, then solvability."""
    try:
        task = TaskSpec.model_validate(raw).model_dump()
    except ValidationError as exc:
        return None, [_pydantic_message(e) for e in exc.errors()]
    return task, task_problems(task)


def _pydantic_message(error: dict) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "task"
    return f"{where}: {error['msg']}"


def task_problems(task: dict) -> list[str]:
    """Why a structurally valid task cannot be solved as written (empty list: it can)."""
    state = shop_fresh(task["shop_seed"])
    problems = _identity_problems(task, state)
    if problems:
        return problems
    if not task["gold_lookups"] and not task["gold_actions"]:
        return ["the task has neither gold look-ups nor gold actions, so nothing can be checked"]
    replay = gold_replay(task)
    problems += [f"gold call fails on a fresh shop: {failure}" for failure in replay.failures]
    if task["gold_actions"] and state_fingerprint(replay.state) == state_fingerprint(state):
        problems.append("the gold actions do not change the shop's state")
    problems += _output_problems(task, state, replay)
    return problems or _scoring_problems(task, replay, state)


def _identity_problems(task: dict, state: dict) -> list[str]:
    customer = state["customers"].get(task["customer_id"])
    if customer is None:
        return [f"customer_id {task['customer_id']!r} is not in the shop (seed {task['shop_seed']})"]
    problems = []
    for key, value in task["known"].items():
        if key in IDENTIFY_TOOL and str(customer.get("id" if key == "customer_id" else key)) != value:
            problems.append(f"known.{key} {value!r} is not customer {customer['id']}'s {key}")
    identifies = any(c["name"] in IDENTIFY_TOOL.values() for c in task["gold_lookups"])
    if identifies and not set(task["known"]) & set(IDENTIFY_TOOL):
        problems.append("the gold look-ups identify the customer, but known holds no email, phone or customer_id")
    return problems


def _output_problems(task: dict, state: dict, replay) -> list[str]:
    """Each required fact must be readable from a gold call's result or the shop's policies."""
    readable = " ".join(r.content for r in replay.results) + json.dumps(state["policies"])
    return [f"required output {o['label']!r} ({o['value']!r}) appears in no gold tool result or policy"
            for o in task["required_outputs"] if not o["derived"] and not mentions(o["value"], readable)]


def _scoring_problems(task: dict, replay, fresh: dict) -> list[str]:
    calls = [{"name": c["name"], "arguments": c["arguments"], "ok": True}
             for c in task["gold_lookups"] + task["gold_actions"]]
    told = [" ".join(o["value"] for o in task["required_outputs"])]
    gold_hash = state_fingerprint(replay.state)
    solved = reward_compute(task=task, final_state=replay.state, calls=calls, replies=told, gold_state_hash=gold_hash)
    idle = reward_compute(task=task, final_state=fresh, calls=[], replies=[],
                          gold_state_hash=gold_hash)
    problems = []
    if not solved.success:
        problems.append(f"the gold solution does not earn success: {solved.breakdown}")
    if idle.success:
        problems.append("an agent that does nothing would succeed")
    return problems
