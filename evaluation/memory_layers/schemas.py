"""The memory-layer contract: what memweb and any memory service, in any language, say to each other
over HTTP, so that memweb can evaluate a memory it did not build and another harness can evaluate a
memweb bank (docs/MEMORY_LAYERS.md, "The HTTP contract"). docs/memory-layer-contract.openapi.json is
written from these models: `python -m evaluation.memory_layers.schemas > docs/memory-layer-contract.openapi.json`
(this module needs pydantic only, no Django).

Five calls, relative to a service's base URL, each with `Authorization: Bearer <key>`:
GET describe; POST retrieve, learn, reset, snapshot. Every request names the contract version it
speaks and the namespace it works in (a run's own memory on the service). Unknown fields are
ignored by both sides, so a minor version may add optional ones; a new major version is a new
contract.
"""
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CONTRACT = "memweb-memory-layer"
CONTRACT_VERSION = "1.0"
CALLS = ("describe", "retrieve", "learn", "reset", "snapshot")
MAX_BUDGET_TOKENS = 8000  # orbs.budget.MAX_PROMPT_TOKEN_BUDGET: no bank serves more
MAX_ITEMS = 50
MAX_TEXT_CHARS = 20_000
MAX_MESSAGES = 500


class ContractModel(BaseModel):
    # Both sides ignore what they do not know: a service on a later minor version still answers.
    model_config = ConfigDict(extra="ignore")


class LayerToolCall(ContractModel):
    name: str = Field(min_length=1, max_length=200)
    arguments: dict = Field(default_factory=dict)


class LayerMessage(ContractModel):
    role: Literal["user", "assistant", "tool", "system"]
    content: str = Field(default="", max_length=MAX_TEXT_CHARS)
    tool_name: str = Field(default="", max_length=200, description="A tool message: the tool that answered")
    tool_calls: list[LayerToolCall] = Field(default_factory=list, description="An assistant message: the tools it called")


class LayerSituation(ContractModel):
    """Where the agent is when it asks: the customer's latest words and the task around them."""

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description="The customer's latest message")
    domain: str = Field(default="", max_length=64)
    task_id: str = Field(default="", max_length=200)
    turn: int = Field(default=1, ge=1, description="The customer turn, from 1")
    step: int = Field(default=0, ge=0, description="The decision step inside the turn; 0 before its first")


class LayerBudget(ContractModel):
    tokens: int = Field(ge=1, le=MAX_BUDGET_TOKENS, description="The prompt block's size at most, in tokens")
    items: int = Field(ge=1, le=MAX_ITEMS, description="Items served at most (memweb's k)")


_NAMESPACE_EXAMPLE = {"contract_version": CONTRACT_VERSION, "namespace": "harness-run-7"}
_DIALOGUE_EXAMPLE = [{"role": "user", "content": "Hi, I'd like to return the blue sneakers from order W2378156."},
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"name": "get_order_details", "arguments": {"order_id": "W2378156"}}]},
                     {"role": "tool", "tool_name": "get_order_details", "content": "{\"status\": \"delivered\"}"}]


class LayerNamespaceIn(ContractModel):
    model_config = ConfigDict(json_schema_extra={"examples": [_NAMESPACE_EXAMPLE]})

    contract_version: str = Field(default=CONTRACT_VERSION, max_length=20)
    namespace: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$",
                           description="The caller's memory on the service: what one run learns, apart from others")


class LayerRetrieveIn(LayerNamespaceIn):
    model_config = ConfigDict(json_schema_extra={"examples": [_NAMESPACE_EXAMPLE | {
        "situation": {"text": "It still hasn't been refunded.", "domain": "retail", "task_id": "shop-ret-004",
                      "turn": 2},
        "dialogue": _DIALOGUE_EXAMPLE, "customer_key": "cust-5f1e", "budget": {"tokens": 1200, "items": 5}}]})

    situation: LayerSituation
    dialogue: list[LayerMessage] = Field(default_factory=list, max_length=MAX_MESSAGES,
                                    description="The episode so far, before the situation's message")
    customer_key: str = Field(default="", max_length=200, description="Who the customer is (a stable pseudonym)")
    budget: LayerBudget


class LayerItem(ContractModel):
    id: str = Field(max_length=200, description="The service's own id of what it served")
    text: str = Field(max_length=MAX_TEXT_CHARS)
    score: float | None = None


class LayerRetrieveOut(ContractModel):
    prompt_block: str = Field(max_length=4 * MAX_BUDGET_TOKENS * 2,
                              description="What the agent's prompt gets; empty when nothing fits")
    items: list[LayerItem] = Field(default_factory=list, max_length=MAX_ITEMS,
                              description="The items the block came from, best first")


class LayerFeedback(ContractModel):
    """The simulated user's verdict on the episode, when the run gathers feedback."""

    critique: str = Field(default="", max_length=MAX_TEXT_CHARS)
    satisfaction: float | None = Field(default=None, ge=0, le=10)
    action: str = Field(default="", max_length=64)


class LayerStep(ContractModel):
    """One decision of the agent: a tool it called and what came back."""

    turn: int = Field(ge=1)
    tool: str = Field(max_length=200)
    arguments: dict = Field(default_factory=dict)
    ok: bool = True
    result: str = Field(default="", max_length=MAX_TEXT_CHARS)


class LayerEpisode(ContractModel):
    """A finished episode: only what the episode showed, never the task's answer key."""

    episode_ref: str = Field(min_length=1, max_length=200, description="The caller's id: learning it twice is once")
    task_id: str = Field(default="", max_length=200)
    domain: str = Field(default="", max_length=64)
    customer_key: str = Field(default="", max_length=200)
    dialogue: list[LayerMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    success: bool
    reward: float = Field(allow_inf_nan=False)
    reward_components: dict[str, float | bool] = Field(default_factory=dict)
    feedback: LayerFeedback | None = None
    steps: list[LayerStep] | None = Field(default=None, max_length=MAX_MESSAGES,
                                     description="Optional: each tool call with its result, in order")


class LayerLearnIn(LayerNamespaceIn):
    model_config = ConfigDict(json_schema_extra={"examples": [_NAMESPACE_EXAMPLE | {"episode": {
        "episode_ref": "harness-episode-41", "task_id": "shop-ret-004", "domain": "retail", "customer_key": "cust-5f1e",
        "dialogue": _DIALOGUE_EXAMPLE, "success": False, "reward": 0.0,
        "reward_components": {"actions_match": False, "outputs_told": True},
        "feedback": {"critique": "You never started the return.", "satisfaction": 3, "action": "continue"},
        "steps": [{"turn": 1, "tool": "get_order_details", "arguments": {"order_id": "W2378156"}, "ok": True,
                   "result": "{\"status\": \"delivered\"}"}]}}]})

    episode: LayerEpisode


class LayerLearnOut(ContractModel):
    learned: int = Field(ge=0, description="Items the episode added (0: already learnt, or nothing to keep)")
    item_ids: list[str] = Field(default_factory=list)


class LayerResetOut(ContractModel):
    removed: int = Field(ge=0, description="Items the namespace held and no longer does")


class LayerSnapshotOut(ContractModel):
    items: int = Field(ge=0, description="Items the namespace holds")
    digest: str = Field(max_length=200, description="Changes whenever what the namespace holds changes")


class LayerDescribeOut(ContractModel):
    contract: Literal["memweb-memory-layer"] = CONTRACT
    contract_version: str = Field(max_length=20, description="Major.minor; memweb speaks 1.x")
    name: str = Field(min_length=1, max_length=200)
    version: str = Field(max_length=64)
    description: str = Field(default="", max_length=2000)


class LayerFieldProblem(ContractModel):
    loc: list[str | int]
    msg: str


class LayerError(ContractModel):
    detail: str | list[LayerFieldProblem] = Field(description="A sentence, or each refused field with where it is")


# call -> (HTTP method, request model or None, answer model, what it does)
OPERATIONS = {
    "describe": ("get", None, LayerDescribeOut, "The layer's name and version, and the contract version it speaks."),
    "retrieve": ("post", LayerRetrieveIn, LayerRetrieveOut,
                 "Before the agent answers: a prompt block within the budget and the items it came from."),
    "learn": ("post", LayerLearnIn, LayerLearnOut,
              "A finished episode, with its reward components and feedback: what the memory learns from."),
    "reset": ("post", LayerNamespaceIn, LayerResetOut, "Forget everything the namespace holds: a run starts from nothing."),
    "snapshot": ("post", LayerNamespaceIn, LayerSnapshotOut, "How much the namespace holds, and a digest that changes with it."),
}


# How many tokens a word of a prompt block counts for, when a side checks a budget without a
# tokenizer (orbs.budget measured MiniLM's WordPiece at up to 2.25 on reflections dense with ids).
TOKENS_PER_WORD = 2.25


def budget_cut(block: str, tokens: int) -> tuple[str, bool]:
    """The block cut to the words `tokens` holds, and whether it was cut: a service that overran its
    budget does not get more of the agent's prompt for it."""
    words = block.split(" ")
    fits = int(tokens / TOKENS_PER_WORD)
    return (block, False) if len(words) <= fits else (" ".join(words[:fits]), True)


def major_version(version: str) -> str:
    return version.split(".", 1)[0]


def contract_openapi() -> dict:
    """The contract as an OpenAPI 3.1 document: the five calls, their bodies and answers."""
    schemas: dict = {}

    def ref(model: type[BaseModel]) -> dict:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    errors = {str(code): {"description": why, "content": {"application/json": {"schema": ref(LayerError)}}}
              for code, why in ((401, "The key is missing or wrong"), (404, "No such memory"),
                                (422, "The body is not what this contract says"))}
    paths = {}
    for call, (method, body, answer, summary) in OPERATIONS.items():
        operation = {"operationId": call, "summary": summary, "security": [{"bearer": []}], "responses": {
            "200": {"description": "Done", "content": {"application/json": {"schema": ref(answer)}}}, **errors}}
        if body is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref(body)}}}
        paths[f"/{call}"] = {method: operation}
    return {
        "openapi": "3.1.0",
        "info": {"title": "memweb memory-layer contract", "version": CONTRACT_VERSION,
                 "description": "What a memory service answers so memweb can evaluate it (and what a memweb bank "
                                "answers under /api/memory-layer/<bank>/). Paths are relative to the service's base "
                                "URL. Unknown fields are ignored by both sides; timeouts, 5xx answers and bodies that "
                                "are not this contract's are retried by memweb, then recorded on the episode."},
        "paths": paths,
        "components": {"schemas": dict(sorted(schemas.items())),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


if __name__ == "__main__":
    print(json.dumps(contract_openapi(), indent=2))
