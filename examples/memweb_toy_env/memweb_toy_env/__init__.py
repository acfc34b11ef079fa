"""A library help desk as a memweb environment (entry point `memweb.environments`: library)."""
import hashlib
from pathlib import Path

from evaluation.environments import DEFAULT_MAX_TURNS, ERROR_KINDS, STOP, RewardResult
from evaluation.environments.content import content_changes, content_hash
from evaluation.environments.episode import conversation_play
from evaluation.environments.world import ToolWorld, transcript_replies
from memweb_toy_env import library, players, tasks

_CONTENT = {"instruction": ("instructions", "customer_id", "persona", "intents", "known"),
            "gold_actions": ("gold_actions",), "gold_lookups": ("gold_lookups",),
            "required_outputs": ("required_outputs",)}


class LibraryEnvironment:
    name = "library"
    label = "Library help desk (toy example)"
    builtin_set_name = "library-5"
    builtin_set_description = "The toy library's five tasks: is a book on the shelf, and holds on books that are out."
    error_kinds = ERROR_KINDS[1:2]  # wrong_arguments: a hold on the wrong book
    reward_version = 1
    reward_components = ("state", "lookups", "outputs")
    content_labels = {"instruction": "instruction", "gold_actions": "gold actions", "gold_lookups": "look-ups",
                      "required_outputs": "outputs"}

    def builtin_tasks(self) -> list[dict]:
        return tasks.builtin_tasks()

    def spec_errors(self, raw: dict) -> tuple[dict | None, list[str]]:
        return tasks.spec_errors(raw)

    def content_hash(self, spec: dict) -> str:
        return content_hash(_CONTENT, spec)

    def content_changes(self, old: dict, new: dict) -> list[str]:
        return content_changes(_CONTENT, old, new)

    def reward_source_hash(self) -> str:
        return hashlib.sha256(Path(library.__file__).read_bytes()).hexdigest()

    def tool_schemas(self) -> list[dict]:
        return library.TOOL_SCHEMAS

    def agent_policy(self, task: dict | None = None) -> str:
        return "You are a librarian at the help desk. Library policies:\n" + "\n".join(
            f"- {policy}" for policy in library.POLICIES)

    def customer_policy(self, task: dict | None = None) -> str:
        return f"You are a library member talking to the help desk. When you are done, end with {STOP}."

    def play(self, *, task: dict, agent, customer, memory=None, max_turns: int = DEFAULT_MAX_TURNS,
             infra_errors: tuple[type[Exception], ...] = (), on_turn=None):
        return conversation_play(
            world=ToolWorld(library.library_fresh(), library.tool_run), agent=agent, customer=customer, memory=memory,
            score=lambda world, replies: self._score(task, world, replies),
            diagnose=lambda calls, reward: library.errors_observed(calls=calls, breakdown=reward.breakdown,
                                                                   invented_ids=[]),
            max_turns=max_turns, infra_errors=infra_errors, on_turn=on_turn)

    def rescore(self, *, task: dict, transcript: list[dict], played: dict) -> RewardResult:
        world = ToolWorld(library.library_fresh(), library.tool_run)
        world.replay(transcript)
        return self._score(task, world, transcript_replies(transcript))

    @staticmethod
    def _score(task: dict, world: ToolWorld, replies: list[str]) -> RewardResult:
        return library.reward_compute(task=task, final_state=world.state, calls=world.calls, replies=replies)

    def scripted_agent(self, *, seed: int, key: str, error_rates: dict[str, float] | None = None):
        return players.ScriptedLibrarian(seed=seed, key=key, error_rates=error_rates)

    def scripted_customer(self, *, task: dict, seed: int):
        return players.ScriptedMember(task=task, seed=seed)

    def errors_observed(self, *, calls: list[dict], breakdown: dict, invented_ids: list[str]) -> list[dict]:
        return library.errors_observed(calls=calls, breakdown=breakdown, invented_ids=invented_ids)

    def tells(self, value: str, text: str) -> bool:
        return library.tells(value, text)

    def wishes(self, task: dict, seed: int) -> str:
        return " ".join(players.ask(intent) for intent in task["intents"])


LIBRARY = LibraryEnvironment()
