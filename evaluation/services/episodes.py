"""Playing and storing episodes, and turning them into the shared trajectory dict.

`episode_simulate` plays an episode and touches no evaluation table (only the Orbs retrieval log
when memory is on); `episode_save` stores it (`episodes_save` several, in one INSERT). Evaluation
runs call the two separately, so an LLM conversation never holds a transaction open and a run can store the
episode together with its own (run, trial, task) row, and its retrievals' outcome (the run's
memory module writes those). `episode_run` does all three for an ad-hoc episode.
"""
import uuid
from dataclasses import dataclass

from django.core.exceptions import ObjectDoesNotExist
from django.db import transaction

from evaluation.configs import (
    AgentBackend,
    AgentConfig,
    CustomerBackend,
    CustomerConfig,
    MemoryConfig,
    ReflectionInput,
)
from evaluation.environments import DEFAULT_MAX_TURNS, STOP, Environment, environment
from evaluation.environments.episode import EpisodeOutcome
from evaluation.llm_backends import LLMAgent, LLMCustomer
from evaluation.memory_layers.registry import memory_layer
from evaluation.models import Episode, Task
from evaluation.vocabulary import EvaluationLLMRole
from memweb.llm import LLMError, role_config
from memweb.llm.trace import LLMTrace, llm_traced
from orbs.services import bank_resolve, retrieval_outcome_record

TOOL_CONTENT_CHARS = 4000  # per tool message in a trajectory (the Orbs schema caps messages at 20k)
# The Orbs trajectory schema's other caps; an LLM agent can exceed any of them (one enormous reply,
# a made-up tool name), and the episode must still become an Orb.
MESSAGE_CHARS, NAME_CHARS, ERROR_DETAIL_CHARS = 20_000, 100, 2000
MAX_TURNS_LIMIT = 50


class EpisodeConfigError(ValueError):
    """A configuration that cannot run (unknown bank, LLM backend without endpoint...)."""


@dataclass
class EpisodePlay:
    task: Task
    seed: int
    max_turns: int
    agent_config: AgentConfig
    customer_config: CustomerConfig
    memory_config: MemoryConfig
    agent_backend: str
    customer_backend: str
    outcome: EpisodeOutcome
    retrieval_ids: list[int]
    trace_id: uuid.UUID | None = None


def _parsed(model, value):
    return value if isinstance(value, model) else model.model_validate(value or {})


def episode_simulate(*, task: Task, agent_config: AgentConfig | dict | None = None,
                     customer_config: CustomerConfig | dict | None = None,
                     memory_config: MemoryConfig | dict | None = None, bank=None, seed: int = 0,
                     max_turns: int = DEFAULT_MAX_TURNS) -> EpisodePlay:
    """Play one episode of `task`. Raises EpisodeConfigError (or pydantic's ValidationError) for a
    configuration that cannot run; an LLM that fails mid-episode is recorded, not raised.
    `bank`: the memory bank already loaded (an evaluation run's), else `memory_config.bank` is looked up."""
    agent_config, customer_config = _parsed(AgentConfig, agent_config), _parsed(CustomerConfig, customer_config)
    memory_config = _parsed(MemoryConfig, memory_config)
    if not 1 <= max_turns <= MAX_TURNS_LIMIT:
        raise EpisodeConfigError(f"max_turns must be between 1 and {MAX_TURNS_LIMIT}, got {max_turns}")
    spec, world = task.spec, environment(task.environment)
    agent = _agent(agent_config, world, spec, seed)
    customer = _customer(customer_config, world, spec, seed)
    memory = _memory(memory_config, spec, bank or _bank_named(memory_config, task))
    with llm_traced(LLMTrace()) as trace:
        outcome = world.play(task=spec, agent=agent, customer=customer, memory=memory, max_turns=max_turns,
                             infra_errors=(LLMError,), on_turn=trace.at_turn)
    return EpisodePlay(task=task, seed=seed, max_turns=max_turns, agent_config=agent_config,
                       customer_config=customer_config, memory_config=memory_config, agent_backend=agent.label,
                       customer_backend=customer.label, outcome=outcome,
                       retrieval_ids=memory.retrieval_ids if memory else [], trace_id=trace.trace_id)


def _require_online(role: str) -> None:
    if role_config(role).is_offline:
        raise EpisodeConfigError(f"the {role} role has no LLM endpoint configured (MEMWEB_LLM_{role.upper()}_BASE_URL);"
                                 " use the scripted backend or configure one")


def _agent(config: AgentConfig, world: Environment, spec: dict, seed: int):
    if config.backend == AgentBackend.SCRIPTED:
        return world.scripted_agent(seed=seed, key=spec["id"], error_rates=config.error_rates)
    _require_online(EvaluationLLMRole.ACTOR)
    return LLMAgent(max_steps=config.max_steps, max_tokens=config.max_tokens, context_tokens=config.context_tokens,
                    environment=world, task=spec)


def _customer(config: CustomerConfig, world: Environment, spec: dict, seed: int):
    if config.backend == CustomerBackend.AGENDA:
        return world.scripted_customer(task=spec, seed=seed)
    _require_online(EvaluationLLMRole.USER_SIMULATOR)
    return LLMCustomer(task=spec, max_tokens=config.max_tokens, environment=world)


def _bank_named(config: MemoryConfig, task: Task):
    """The bank the memory configuration names, in the task's workspace: a task never reads another
    workspace's memories."""
    if not config.bank:
        return None
    try:
        return bank_resolve(config.bank, workspace=task.task_set.workspace)
    except ObjectDoesNotExist:
        raise EpisodeConfigError(f"memory bank {config.bank!r} does not exist") from None


def memory_hook(*, config: MemoryConfig, task: dict, bank=None):
    """The retrieval hook of `config.kind`'s layer, or None (no memory). `bank`: the bank already
    loaded, else `config.bank` is looked up (MemoryBank.DoesNotExist when unknown)."""
    layer = memory_layer(config.kind)
    if layer.has_bank:
        bank = bank or bank_resolve(config.bank)
    return layer.hook(config=config, task=task, bank=bank)


def _memory(config: MemoryConfig, spec: dict, bank):
    try:
        return memory_hook(config=config, task=spec, bank=bank)
    except ObjectDoesNotExist:
        raise EpisodeConfigError(f"memory bank {config.bank!r} does not exist") from None


def episode_save(*, play: EpisodePlay) -> Episode:
    return episodes_save(plays=[play])[0]


def episodes_save(*, plays: list[EpisodePlay]) -> list[Episode]:
    """Store played episodes with one INSERT (a run stores a chunk's episodes together), in order."""
    return Episode.objects.bulk_create([_episode_row(play) for play in plays])


def _episode_row(play: EpisodePlay) -> Episode:
    outcome, reward = play.outcome, play.outcome.reward
    return Episode(
        task=play.task, task_snapshot=play.task.spec, seed=play.seed, max_turns=play.max_turns,
        agent_backend=play.agent_backend, customer_backend=play.customer_backend,
        memory_kind=play.memory_config.kind, agent_config=play.agent_config.model_dump(),
        customer_config=play.customer_config.model_dump(), memory_config=play.memory_config.model_dump(),
        status=Episode.Status.ERROR if outcome.infra_error else Episode.Status.COMPLETED,
        ended_by=outcome.ended_by, success=reward.success, reward=reward.reward,
        reward_breakdown=reward.breakdown, reward_details=_details(reward), transcript=outcome.messages,
        memories=outcome.memories, errors=outcome.errors, committed_errors=outcome.committed,
        infra_error=outcome.infra_error, turns=outcome.turns, tool_calls=len(outcome.calls),
        tokens_in=outcome.tokens_in, tokens_out=outcome.tokens_out, latency_ms=outcome.latency_ms,
        trace_id=play.trace_id, spans=outcome.spans)


def _details(reward) -> dict:
    return {"missing_lookups": reward.missing_lookups, "missing_outputs": reward.missing_outputs,
            "invented_ids": reward.invented_ids, "state_hash": reward.state_hash,
            "gold_state_hash": reward.gold_state_hash}


def episode_run(*, task: Task, agent_config=None, customer_config=None, memory_config=None, seed: int = 0,
                max_turns: int = DEFAULT_MAX_TURNS) -> Episode:
    """Play one ad-hoc episode and store it with its retrievals' outcome (see episode_simulate
    for the arguments)."""
    play = episode_simulate(task=task, agent_config=agent_config, customer_config=customer_config,
                            memory_config=memory_config, seed=seed, max_turns=max_turns)
    with transaction.atomic():
        episode = episode_save(play=play)
        retrieval_outcome_record(retrieval_ids=play.retrieval_ids, success=episode.success, reward=episode.reward,
                                 episode_ref=episode_ref(episode))
    return episode


def episode_ref(episode: Episode) -> str:
    return f"evaluation-episode:{episode.pk}"


# --- the shared trajectory shape (orbs.schemas.TrajectoryIn) ---------------------------------

def episode_trajectory(episode: Episode, *, reflection_input: str = ReflectionInput.TRAJECTORY) -> dict:
    """The episode as the trajectory dict orbs.services.orb_from_episode takes. By default it holds
    only what the episode itself showed: the dialogue, the tool calls with their results, the reward
    components and a diagnosis drawn from those. The oracle input adds the diagnosis against the
    gold answer and the gold call's order id and SKU: the next trial replays the same task, so
    those hand its agent the answer."""
    spec = episode.task_snapshot
    oracle = ReflectionInput(reflection_input) == ReflectionInput.ORACLE
    return {
        "task_id": spec["id"],
        "domain": spec["domain"],
        "customer_key": spec["customer_id"],
        "messages": [m for m in (_message(m) for m in episode.transcript) if m is not None],
        "reward": episode.reward,
        "success": episode.success,
        "reward_breakdown": episode.reward_breakdown,
        "errors": [_error(e) for e in (episode.errors if oracle else _errors_observed(episode))],
        "metadata": _metadata(episode, spec) | (_gold_metadata(spec) if oracle else {}),
    }


def _errors_observed(episode: Episode) -> list[dict]:
    calls = [{**call, "ok": result.get("ok", True), "content": result.get("content") or ""}
             for call, result in _calls_with_results(episode.transcript)]
    return environment(episode.task.environment).errors_observed(
        calls=calls, breakdown=episode.reward_breakdown, invented_ids=(episode.reward_details or {}).get("invented_ids", []))


def _calls_with_results(transcript: list[dict]) -> list[tuple[dict, dict]]:
    """Each tool call of the transcript with the tool message that answered it (by call id, else in order)."""
    results = [m for m in transcript if m["role"] == "tool"]
    by_id = {m["tool_call_id"]: m for m in results if m.get("tool_call_id")}
    calls = [c for m in transcript if m["role"] == "assistant" for c in m.get("tool_calls", ())]
    in_order = iter(results)
    return [(call, by_id.get(call.get("id")) or next(in_order, {})) for call in calls]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _error(error: dict) -> dict:
    return {**error, "tool": _clip(error["tool"], NAME_CHARS), "detail": _clip(error["detail"], ERROR_DETAIL_CHARS)}


def _message(message: dict) -> dict | None:
    role, content = message["role"], (message.get("content") or "")
    if role == "user":
        content = content.replace(STOP, "").strip()
        return {"role": "user", "content": _clip(content, MESSAGE_CHARS)} if content else None
    if role == "tool":
        return {"role": "tool", "content": content[:TOOL_CONTENT_CHARS],
                "tool_name": _clip(message["tool_name"], NAME_CHARS)}
    calls = [{"name": _clip(c["name"], NAME_CHARS), "arguments": c.get("arguments") or {}}
             for c in message.get("tool_calls", ())]
    said = {"role": "assistant", "content": _clip(content, MESSAGE_CHARS)}
    return {**said, "tool_calls": calls} if calls else said


def _metadata(episode: Episode, spec: dict) -> dict:
    # The product the customer asks about (the simulated customer names it) and the task's shape.
    products = [i["slots"]["product"] for i in spec["intents"] if "product" in i["slots"]]
    return {
        "product": products[0] if products else None, "template": spec.get("template", ""),
        "intents": [i["kind"] for i in spec["intents"]], "agent": episode.agent_backend,
        "customer": episode.customer_backend, "seed": episode.seed,
        # Read by orbs: the retrievals this episode used, so each hit's page shows how it ended.
        "retrieval_ids": [m["retrieval_id"] for m in episode.memories if "retrieval_id" in m],
    }


def _gold_metadata(spec: dict) -> dict:
    """The oracle input only: the order id and SKU of the call the task turns on (its first change,
    else its last look-up), taken from the gold answer."""
    main = (spec["gold_actions"][:1] or spec["gold_lookups"][-1:] or [{"arguments": {}}])[0]
    arguments = main["arguments"]
    return {"order_id": arguments.get("order_id"), "sku": arguments.get("new_sku") or arguments.get("product_id")}
