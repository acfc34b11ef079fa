"""ECom-Bench (XiaoduoAILab/ECom-Bench: 53 household-appliance tasks on a JD shop, the MemOrb paper's
Table 2) as a memweb environment, registered as "ecom-bench". Django-free.

Nothing of the benchmark ships with memweb: its tasks, database and wikis are imported from a
user's folder (`read_source`), and the database lives in the benchmark world store
(evaluation.environments.benchmark), found through each spec's `world` key. Its tools (tools.py)
and reward (reward.py) are memweb's own code, written from the benchmark's documented behaviour.

The agent is told the benchmark's agent wiki (wikis/agent_wiki.md of a checkout, with the task's
platform, shop and user filled in), or memweb's own rules when the folder lacks it; the LLM customer
is told the benchmark's customer wiki (envs/story/wiki.md) before the task's instruction.
"""
import hashlib
from pathlib import Path

from evaluation.environments import benchmark as world_store
from evaluation.environments.benchmark import BenchmarkSource, Replay
from evaluation.environments.content import content_changes, content_hash
from evaluation.environments.ecom_bench import players, reward, source, tools
from evaluation.environments.episode import conversation_play
from evaluation.environments.protocol import DEFAULT_MAX_TURNS, ERROR_KINDS, STOP, RewardResult
from evaluation.environments.world import ToolWorld, transcript_replies

_CONTENT = {"instruction": ("instructions", "customer_rules", "customer_id", "platform", "shop_id", "user_id"),
            "world": ("world",), "gold_actions": ("gold_actions",), "gold_lookups": ("gold_lookups",),
            "required_outputs": ("required_outputs",)}
_FIELDS = {"id": str, "domain": str, "split": str, "difficulty": str, "error_kinds": list, "customer_id": str,
           "persona": dict, "intents": list, "instructions": str, "customer_rules": str, "gold_lookups": list,
           "gold_actions": list, "required_outputs": list, "platform": str, "shop_id": str, "user_id": str,
           "world": str}
_CHOICES = {"domain": ("appliances",), "split": ("train", "dev", "test"), "difficulty": ("easy", "medium", "hard")}
_POLICY_SLOTS = ("platform", "shop_id", "user_id")
_CUSTOMER_RULES = (
    "You are role-playing a customer of an online shop talking to its customer-service agent. Stay in character, "
    "bring up your requests one at a time, in order, give ids and links exactly as your instructions hold them and "
    f"never invent any. When all your requests are handled, send {STOP} alone on its own line.")


class EcomBenchEnvironment:
    name = "ecom-bench"
    benchmark = "ecom-bench"
    label = "ECom-Bench (household appliances)"
    builtin_set_name = "ecom-bench"
    builtin_set_description = ("ECom-Bench's 53 household-appliance tasks, imported from a checkout: "
                               "manage.py benchmark_import ecom-bench --from PATH. None ship with memweb.")
    error_kinds = ERROR_KINDS
    reward_version = 1
    reward_components = reward.COMPONENTS
    content_labels = {"instruction": "instruction", "world": "database and agent wiki", "gold_actions": "gold actions",
                      "gold_lookups": "look-ups", "required_outputs": "outputs"}

    # --- the benchmark seam -------------------------------------------------------------------

    def read_source(self, path: Path) -> BenchmarkSource:
        return source.read_source(path)

    def replay(self, *, task: dict, calls: list[dict], replies: tuple[str, ...] = ()) -> Replay:
        """`calls` on a fresh copy of the task's database; the final database is ECom-Bench's own
        schema (one key per data file, named without .json). Bare names (`manage_order`, as gold
        actions and the benchmark's own replay use) and agent names (`manage_order_tool`) both work."""
        database = world_store.world_fresh(task["world"])
        results = reward.calls_apply(database, calls)
        scored = reward.reward_compute(task=task, database=database, calls=calls, replies=list(replies))
        return Replay(results=results, reward=scored, database=database)

    # --- tasks ---------------------------------------------------------------------------------

    def builtin_tasks(self) -> list[dict]:
        return []  # imported from the user's folder only

    def spec_errors(self, raw: dict) -> tuple[dict | None, list[str]]:
        problems = _structure_problems(raw)
        if problems:
            return None, problems
        try:
            world_store.world(raw["world"])
        except LookupError as exc:
            return None, [f"world: no benchmark database stored under {raw['world']!r} ({exc}); import the "
                          "benchmark first"]
        return raw, self._replay_problems(raw)

    def _replay_problems(self, spec: dict) -> list[str]:
        gold = spec["gold_lookups"] + spec["gold_actions"]
        solved = self.replay(task=spec, calls=gold, replies=tuple(o["value"] for o in spec["required_outputs"]))
        problems = [f"gold call {call['name']} fails on a fresh database: {result.content}"
                    for call, result in zip(gold, solved.results) if not result.ok]
        if not solved.reward.success:
            problems.append(f"the gold solution does not earn reward 1: {solved.reward.breakdown}")
        if self.replay(task=spec, calls=[]).reward.success:
            problems.append("an agent that does nothing would earn reward 1")
        return problems

    def content_hash(self, spec: dict) -> str:
        return content_hash(_CONTENT, spec)

    def content_changes(self, old: dict, new: dict) -> list[str]:
        return content_changes(_CONTENT, old, new)

    def reward_source_hash(self) -> str:
        digest = hashlib.sha256()
        for module in (reward, tools):
            digest.update(Path(module.__file__).read_bytes())
        return digest.hexdigest()

    # --- the LLM players' prompts and tools -----------------------------------------------------

    def tool_schemas(self) -> list[dict]:
        return tools.tool_schemas()

    def agent_policy(self, task: dict | None = None) -> str:
        """The task's agent wiki with its platform, shop and user filled in; without a task, memweb's
        own rules with the slots unfilled (what a run pins when it names no task)."""
        if task is None:
            return source.FALLBACK_AGENT_POLICY
        policy = world_store.world(task["world"]).policy
        for slot in _POLICY_SLOTS:
            policy = policy.replace("{" + slot + "}", task[slot])
        return policy

    def customer_policy(self, task: dict | None = None) -> str:
        """The benchmark's customer wiki (what comes before the task's instruction) for `task`;
        memweb's own short rules without one."""
        return task["customer_rules"] if task else _CUSTOMER_RULES

    # --- episodes ------------------------------------------------------------------------------

    def play(self, *, task: dict, agent, customer, memory=None, max_turns: int = DEFAULT_MAX_TURNS,
             infra_errors: tuple[type[Exception], ...] = (), on_turn=None):
        if hasattr(agent, "gold_receive"):  # the labelled gold-replay agent
            agent.gold_receive(task)
        return conversation_play(
            world=self._world(task["world"]), agent=agent, customer=customer, memory=memory,
            score=lambda world, replies: self._score(task, world, replies),
            diagnose=lambda calls, scored: players.errors_observed(calls=calls, breakdown=scored.breakdown,
                                                                  invented_ids=[]),
            max_turns=max_turns, infra_errors=infra_errors, on_turn=on_turn)

    def rescore(self, *, task: dict, transcript: list[dict], played: dict) -> RewardResult:
        world = self._world(played["world"])
        world.replay(transcript)
        return self._score(task, world, transcript_replies(transcript))

    @staticmethod
    def _world(key: str) -> ToolWorld:
        return ToolWorld(world_store.world_fresh(key), tools.tool_run, transfer_tool=tools.TRANSFER_TOOL)

    @staticmethod
    def _score(task: dict, world: ToolWorld, replies: list[str]) -> RewardResult:
        return reward.reward_compute(task=task, database=world.state, calls=world.calls, replies=replies)

    def scripted_agent(self, *, seed: int, key: str, error_rates: dict[str, float] | None = None):
        return players.GoldReplayAgent(seed=seed, key=key, error_rates=error_rates)

    def scripted_customer(self, *, task: dict, seed: int):
        return players.FactCustomer(task=task, seed=seed)

    def errors_observed(self, *, calls: list[dict], breakdown: dict, invented_ids: list[str]) -> list[dict]:
        return players.errors_observed(calls=calls, breakdown=breakdown, invented_ids=invented_ids)

    def tells(self, value: str, text: str) -> bool:
        return reward.tells(value, text)

    def wishes(self, task: dict, seed: int) -> str:
        return " ".join(players.in_customer_words(intent["slots"]["text"]) for intent in task["intents"])


def _structure_problems(spec: dict) -> list[str]:
    problems = [f"{name}: Field required" if name not in spec else f"{name}: must be a {kind.__name__}"
                for name, kind in _FIELDS.items() if not isinstance(spec.get(name), kind)]
    problems += [f"{name}: must be one of {', '.join(values)}" for name, values in _CHOICES.items()
                 if isinstance(spec.get(name), str) and spec[name] not in values]
    if problems:
        return problems
    for field in ("gold_lookups", "gold_actions"):
        for call in spec[field]:
            if not isinstance(call, dict) or tools.tool_named(call.get("name", "")) is None:
                problems.append(f"{field}: unknown tool {call.get('name') if isinstance(call, dict) else call!r}")
            elif not isinstance(call.get("arguments", {}), dict):
                problems.append(f"{field}: the arguments of {call['name']} must be an object")
    problems += [f"required_outputs: each needs a text value, not {output!r}" for output in spec["required_outputs"]
                 if not isinstance(output, dict) or not isinstance(output.get("value"), str)]
    return problems


ECOM = EcomBenchEnvironment()
