"""τ²-bench retail as a memweb environment (registered as "tau2-retail"). Its tasks come only from an
import of the user's checkout (`manage.py benchmark_import tau2-retail --from PATH`): nothing of the
benchmark is shipped, so there are no built-in tasks."""
import re
from pathlib import Path

from evaluation.environments import benchmark
from evaluation.environments.benchmark import BenchmarkSource, Replay
from evaluation.environments.content import content_changes, content_hash
from evaluation.environments.episode import conversation_play
from evaluation.environments.protocol import DEFAULT_MAX_TURNS, ERROR_KINDS, STOP, RewardResult
from evaluation.environments.tau2_retail import players, reward, source
from evaluation.environments.tau2_retail.tools import TOOLS, TRANSFER_TOOL, tool_run, tool_schemas
from evaluation.environments.world import ToolWorld, transcript_replies

_CONTENT = {"instruction": ("instructions", "user_scenario", "customer_id", "persona", "intents"),
            "gold_actions": ("world", "gold_calls", "gold_actions"), "gold_lookups": ("gold_lookups",),
            "required_outputs": ("required_outputs", "nl_assertions", "reward_basis")}
_FIELDS = {"id": str, "domain": str, "split": str, "difficulty": str, "error_kinds": list, "customer_id": str,
           "persona": dict, "intents": list, "instructions": str, "gold_lookups": list, "gold_actions": list,
           "required_outputs": list, "world": str, "gold_calls": list, "nl_assertions": list, "user_scenario": dict}
_CHOICES = {"domain": (source.DOMAIN,), "split": ("train", "dev", "test"), "difficulty": ("easy", "medium", "hard")}
_WORLD_KEY = re.compile(r"[0-9a-f]{64}")

_AGENT_RULES = (
    "You are a customer service agent of an online retail store. Follow the policy below. Use the tools to look "
    "things up and to make changes; make one tool call at a time and, before any change to the database, list "
    "what you will do and obtain the user's explicit confirmation (yes).\n\n")
_CUSTOMER_RULES = (
    "You are playing a customer contacting an online retail store's support; the other side's messages are the "
    "agent's. Follow your instructions below. Give information only when it is asked for and only what your "
    "instructions give you: never invent ids, emails or details; if you do not know something, say so. Write "
    "short, natural messages, one request at a time. When your task is done, or cannot be done, end your message "
    f"with {STOP}.")


class Tau2RetailEnvironment:
    name = source.BENCHMARK
    benchmark = source.BENCHMARK
    label = "τ²-bench retail (imported benchmark)"
    builtin_set_name = "tau2-retail"
    builtin_set_description = "τ²-bench's retail tasks, imported from a checkout with manage.py benchmark_import."
    error_kinds = ERROR_KINDS
    reward_version = reward.REWARD_VERSION
    reward_components = reward.COMPONENTS
    content_labels = {"instruction": "customer scenario", "gold_actions": "gold actions and database",
                      "gold_lookups": "look-ups", "required_outputs": "required outputs and assertions"}

    def builtin_tasks(self) -> list[dict]:
        return []  # imported only: the benchmark is not shipped

    def read_source(self, path: Path) -> BenchmarkSource:
        return source.read_source(path)

    # ---- validation and versions ----

    def spec_errors(self, raw: dict) -> tuple[dict | None, list[str]]:
        spec = {"reward_basis": [], **raw}
        problems = _structure_problems(spec)
        return (None, problems) if problems else (spec, _replay_problems(spec))

    def content_hash(self, spec: dict) -> str:
        return content_hash(_CONTENT, spec)

    def content_changes(self, old: dict, new: dict) -> list[str]:
        return content_changes(_CONTENT, old, new)

    def reward_source_hash(self) -> str:
        return reward.reward_source_hash()

    # ---- what the LLM players are given ----

    def tool_schemas(self) -> list[dict]:
        return tool_schemas()

    def agent_policy(self, task: dict | None = None) -> str:
        """The rules and the benchmark's policy.md (it lives with the task's world); without a task,
        the rules alone (what prompt hashes pin: the policy is in the task's content hash)."""
        return _AGENT_RULES + (benchmark.world(task["world"]).policy if task is not None else "")

    def customer_policy(self, task: dict | None = None) -> str:
        return _CUSTOMER_RULES

    # ---- episodes ----

    def play(self, *, task: dict, agent, customer, memory=None, max_turns: int = DEFAULT_MAX_TURNS,
             infra_errors: tuple[type[Exception], ...] = (), on_turn=None):
        if isinstance(agent, players.GoldReplayAgent):
            agent.brief(task)
        world = ToolWorld(reward.state_fresh(task["world"]), tool_run, transfer_tool=TRANSFER_TOOL)
        return conversation_play(
            world=world, agent=agent, customer=customer, memory=memory, max_turns=max_turns,
            score=lambda played, replies: reward.score(task, played.state, replies, judged=True),
            diagnose=lambda calls, result: reward.errors_observed(calls=calls, breakdown=result.breakdown),
            infra_errors=infra_errors, on_turn=on_turn)

    def rescore(self, *, task: dict, transcript: list[dict], played: dict) -> RewardResult:
        world = ToolWorld(reward.state_fresh(played["world"]), tool_run, transfer_tool=TRANSFER_TOOL)
        world.replay(transcript)
        return reward.score(task, world.state, transcript_replies(transcript), judged=True)

    def replay(self, *, task: dict, calls: list[dict], replies: tuple[str, ...] = ()) -> Replay:
        state = reward.state_fresh(task["world"])
        results = reward.calls_apply(state, calls)
        return Replay(results=results, reward=reward.score(task, state, list(replies)), database=state.database())

    def scripted_agent(self, *, seed: int, key: str, error_rates: dict[str, float] | None = None):
        return players.GoldReplayAgent(seed=seed, key=key, error_rates=error_rates)

    def scripted_customer(self, *, task: dict, seed: int):
        return players.FactsCustomer(task=task, seed=seed)

    def errors_observed(self, *, calls: list[dict], breakdown: dict, invented_ids: list[str]) -> list[dict]:
        return reward.errors_observed(calls=calls, breakdown=breakdown)

    def tells(self, value: str, text: str) -> bool:
        return reward.tells(value, text)

    def wishes(self, task: dict, seed: int) -> str:
        return task["user_scenario"]["instructions"].get("reason_for_call", "")


def _structure_problems(spec: dict) -> list[str]:
    problems = [f"{name}: Field required" if name not in spec else f"{name}: must be a {kind.__name__}"
                for name, kind in _FIELDS.items() if not isinstance(spec.get(name), kind)]
    problems += [f"{name}: must be one of {', '.join(values)}" for name, values in _CHOICES.items()
                 if isinstance(spec.get(name), str) and spec[name] not in values]
    if problems:
        return problems
    if not _WORLD_KEY.fullmatch(spec["world"]):
        return ["world: must be the SHA-256 (64 hex digits) of an imported τ²-bench retail database"]
    try:
        benchmark.world(spec["world"])
    except LookupError:
        return [f"world: no imported τ²-bench retail database {spec['world'][:12]}…; import the benchmark first "
                "(manage.py benchmark_import tau2-retail --from PATH)"]
    problems += [f"gold_calls: call {number} is not an object with a known tool name and arguments"
                 for number, call in enumerate(spec["gold_calls"])
                 if not isinstance(call, dict) or call.get("name") not in TOOLS
                 or not isinstance(call.get("arguments"), dict)]
    problems += [f"required_outputs: output {number} needs a string value"
                 for number, output in enumerate(spec["required_outputs"])
                 if not isinstance(output, dict) or not isinstance(output.get("value"), str)]
    return problems


def _replay_problems(spec: dict) -> list[str]:
    """The gold solution must earn the reward; doing nothing must not, where the task changes the database."""
    problems = []
    gold = reward.score(spec, reward.gold_replay(spec).state, reward.gold_replies(spec))
    if not gold.success:
        problems.append(f"the gold solution does not earn the reward (components: {gold.breakdown})")
    if reward.changes_database(spec) and reward.score(spec, reward.state_fresh(spec["world"]), []).success:
        problems.append("doing nothing earns the reward although the gold calls change the database")
    return problems


TAU2_RETAIL = Tau2RetailEnvironment()
