"""What a task world must provide for memweb to play, score, validate and re-grade episodes on it.

An environment is one object (`Environment`); the episode player, the task sets, the validator,
re-grading, task versions and the pages reach the world only through it. Django-free, like the
worlds themselves. docs/ENVIRONMENTS.md walks through adding one.

A task spec is a JSON object. Besides what the environment itself needs, memweb's lists, feedback
and trajectories read these common fields, so every environment's specs carry them: `id`,
`domain`, `split` (train/dev/test), `difficulty` (easy/medium/hard), `error_kinds`, `customer_id`,
`persona` ({name, emotion, patience, trust}), `intents` ([{kind, slots}]), `instructions` (what the
simulated customer is told), `gold_lookups` and `gold_actions` ([{name, arguments}]) and
`required_outputs` ([{label, value}]).
"""
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

# The simulated customer ends a conversation by saying this.
STOP = "###STOP###"
DEFAULT_MAX_TURNS = 12
# The MemOrb paper's error kinds: what a scripted agent can be told to get wrong, and what the
# diagnosis of an episode names. An environment's `error_kinds` are some of these.
WRONG_TOOL, WRONG_ARGUMENTS, RESULT_UNUSED = "wrong_tool", "wrong_arguments", "result_unused"
ERROR_KINDS = (WRONG_TOOL, WRONG_ARGUMENTS, RESULT_UNUSED)


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    content: str  # what the agent reads: JSON text, or "Error: ..."
    data: dict | None


@dataclass
class RewardResult:
    """An episode's score. `breakdown` holds each pass/fail component as 1.0/0.0 (plus counts); it
    is the shared trajectory's reward_breakdown and what re-grading compares."""
    success: bool
    reward: float
    breakdown: dict
    missing_lookups: list[dict]
    missing_outputs: list[dict]
    invented_ids: list[str]
    state_hash: str
    gold_state_hash: str


@runtime_checkable
class Environment(Protocol):
    """One task world. Players (agents, customers, memory hooks) are described in
    evaluation.environments.episode."""

    name: str  # the registry key, stored on tasks ("shop")
    label: str  # for people ("Online shop")
    builtin_set_name: str  # the name of the task set holding `builtin_tasks()`
    builtin_set_description: str
    error_kinds: tuple[str, ...]  # which of ERROR_KINDS its scripted agent can make
    reward_version: int  # bump it with every change to what an episode earns (runs re-grade)
    reward_components: tuple[str, ...]  # the pass/fail keys of RewardResult.breakdown

    def builtin_tasks(self) -> list[dict]:
        """The environment's own task specs (each passes `spec_errors`)."""

    def spec_errors(self, raw: dict) -> tuple[dict | None, list[str]]:
        """The validator: (the playable spec, problems). Structure first, then the gold replay: the
        gold calls succeed on a fresh world, the gold solution earns success and doing nothing
        does not. A problem is a sentence naming the field or the call."""

    def content_hash(self, spec: dict) -> str:
        """SHA-256 of the spec's gradable content (a task version changes when it does)."""

    def content_changes(self, old: dict, new: dict) -> list[str]:
        """The gradable parts that differ between two specs; each is named in `content_labels`."""

    content_labels: dict[str, str]  # gradable part -> how people call it

    def reward_source_hash(self) -> str:
        """SHA-256 of the reward's code, pinned by runs beside `reward_version`."""

    def tool_schemas(self) -> list[dict]:
        """The tools, as OpenAI function schemas (JSON Schema parameters)."""

    def agent_policy(self, task: dict | None = None) -> str:
        """The system prompt an LLM agent is given: its rules and the world's policies. `task`, when
        given, is the task being played (a benchmark's policy lives with the task's world); an
        environment whose policy is the same for every task ignores it."""

    def customer_policy(self, task: dict | None = None) -> str:
        """The rules an LLM customer is given before the task's instructions (`task`, when given, is
        the task being played: a benchmark's customer rules may come with it)."""

    def play(self, *, task: dict, agent, customer, memory=None, max_turns: int = DEFAULT_MAX_TURNS,
             infra_errors: tuple[type[Exception], ...] = (), on_turn=None):
        """One episode on a fresh world (the database reset for it), scored and diagnosed:
        an evaluation.environments.episode.EpisodeOutcome."""

    def rescore(self, *, task: dict, transcript: list[dict], played: dict) -> RewardResult:
        """Score a stored transcript again against `task` (a newer version): its tool calls are
        replayed on a fresh copy of the world the episode was played on (`played`, the spec it was
        played with); nothing is asked of any player."""

    def scripted_agent(self, *, seed: int, key: str, error_rates: dict[str, float] | None = None):
        """The offline agent; `error_rates` maps some of `error_kinds` to how often it makes them."""

    def scripted_customer(self, *, task: dict, seed: int):
        """The offline customer for `task`."""

    def errors_observed(self, *, calls: list[dict], breakdown: dict, invented_ids: list[str]) -> list[dict]:
        """Error records {kind, tool, detail} drawn from the calls and the reward's components only
        (never the gold answer): what a reflection may read."""

    def tells(self, value: str, text: str) -> bool:
        """Whether `text` tells the fact `value` (the reward's own comparison)."""

    def wishes(self, task: dict, seed: int) -> str:
        """The customer's requests in words, as its simulated customer would put them."""
