"""A public benchmark played as an environment (τ²-bench retail, ECom-Bench): what reading a user's
checkout of it yields, how a list of tool calls is replayed on a fresh copy of a task's database, and
where that database lives.

A benchmark's initial database is megabytes, shared by all of its tasks, so a task spec does not
carry it: the spec's `world` field holds the SHA-256 of the database (`world_key`), and the
environment asks `world_fresh(key)` for a private copy each episode. Django stores the databases
(evaluation.models.BenchmarkWorld) and sets the loader when the app starts; Django-free code and
tests set their own with `world_loader_set`.
"""
import copy
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from evaluation.environments.protocol import Environment, RewardResult, ToolResult

# What a benchmark's offline agent is called wherever its results are shown: it replays the task's
# gold calls (making the MemOrb error kinds at the rates asked), so it reads the answer key.
USES_GOLD = "uses the gold answer"
GOLD_REPLAY_AGENT = f"scripted: gold-replay agent with errors ({USES_GOLD})"


class BenchmarkFolderError(ValueError):
    """A folder that is not a (complete) checkout of the benchmark; the message names what is missing
    or unreadable, with its path."""


@dataclass(frozen=True)
class BenchmarkWorld:
    """A benchmark's initial database and the policy its agent is given."""
    database: dict  # in the benchmark's own schema (what --db-out writes)
    policy: str


@dataclass
class BenchmarkSource:
    """What one read of a benchmark's files gives memweb."""
    benchmark: str  # the name `benchmark_import` takes ("tau2-retail")
    layout: str  # "checkout" (the upstream repository) or "json" (the ../shared/benchmarks form)
    tasks: list[dict]  # memweb task specs, each with `world` = world_key(world)
    world: BenchmarkWorld
    files: dict[str, str]  # each file read (path relative to the folder) -> its SHA-256
    licence: str  # SPDX identifier
    source: str  # the upstream repository
    commit: str = ""  # the checkout's commit when it can be read, else ""
    splits: dict[str, list[str]] = field(default_factory=dict)  # split name -> task ids


@dataclass
class Replay:
    """Tool calls applied in order to a fresh copy of a task's database, and the reward they earn."""
    results: list[ToolResult]
    reward: RewardResult
    database: dict  # the final database, in the benchmark's own schema


@runtime_checkable
class BenchmarkEnvironment(Environment, Protocol):
    benchmark: str  # the name `benchmark_import` and `env_replay` take

    def read_source(self, path: Path) -> BenchmarkSource:
        """Read a checkout of the benchmark, or the JSON form; BenchmarkFolderError otherwise."""

    def replay(self, *, task: dict, calls: list[dict], replies: tuple[str, ...] = ()) -> Replay:
        """Apply `calls` ([{name, arguments}]) to a fresh copy of the task's database and score them
        (with `replies`, the agent's messages, where the reward reads them)."""


def world_key(world: BenchmarkWorld) -> str:
    canonical = json.dumps({"database": world.database, "policy": world.policy}, sort_keys=True,
                           ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


_loader: Callable[[str], BenchmarkWorld] | None = None
_cache: dict[str, BenchmarkWorld] = {}


def world_loader_set(loader: Callable[[str], BenchmarkWorld] | None) -> None:
    """Where worlds come from (Django: the BenchmarkWorld table); forgets the worlds read so far."""
    global _loader
    _loader = loader
    _cache.clear()


def world(key: str) -> BenchmarkWorld:
    """The world stored under `key`, read once per process. Never change what it holds: use
    `world_fresh` for a database an episode may write to."""
    if key not in _cache:
        if _loader is None:
            raise LookupError("no benchmark world store is configured")
        _cache[key] = _loader(key)
    return _cache[key]


def world_forget(key: str) -> None:
    """Drop the world read under `key` from this process (its store no longer holds it)."""
    _cache.pop(key, None)


def world_fresh(key: str) -> dict:
    """A private copy of the database stored under `key`, for one episode or replay."""
    return copy.deepcopy(world(key).database)


BENCHMARKS_DIR_VARIABLE = "MEMWEB_BENCHMARKS_DIR"
_SHARED_FALLBACK = Path("/work/shared/benchmarks")


def benchmarks_dir() -> Path:
    """Where the public benchmarks' data lies on this machine (tests, the demo): the folder
    MEMWEB_BENCHMARKS_DIR names, else `../shared/benchmarks` beside the repository, else
    /work/shared/benchmarks. The folder may not exist: nothing of a benchmark is shipped."""
    configured = os.environ.get(BENCHMARKS_DIR_VARIABLE, "").strip()
    if configured:
        return Path(configured)
    beside = Path(__file__).resolve().parents[2].parent / "shared" / "benchmarks"
    return beside if beside.is_dir() else _SHARED_FALLBACK


def gold_solution(spec: dict) -> tuple[list[dict], list[str]]:
    """The task's gold calls in order (`gold_calls` where the benchmark orders look-ups and changes
    together, else the look-ups then the changes) and the replies the gold solution gives (the
    required outputs' values): what `env_replay --gold` replays."""
    calls = spec.get("gold_calls") or [*spec.get("gold_lookups", []), *spec.get("gold_actions", [])]
    return calls, [output["value"] for output in spec.get("required_outputs", [])]
