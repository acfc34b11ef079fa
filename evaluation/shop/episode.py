"""One shop episode, Django-free: the generic conversation (evaluation.environments.episode) on a
fresh copy of the task's shop, scored by the shop's reward and diagnosed against the task's gold."""
import functools
import json
from collections.abc import Callable

from evaluation.environments.episode import EpisodeOutcome, conversation_play, exchanges_count
from evaluation.environments.protocol import DEFAULT_MAX_TURNS
from evaluation.environments.world import transcript_replies
from evaluation.shop.env import ShopEnv
from evaluation.shop.errors import errors_diagnose
from evaluation.shop.generator import shop_fresh
from evaluation.shop.reward import RewardResult, gold_replay, reward_compute, state_fingerprint

# Named here as well: tests and the recount migration (0015) read them from the shop.
__all__ = ["DEFAULT_MAX_TURNS", "EpisodeOutcome", "episode_play", "exchanges_count", "gold_state_hash",
           "transcript_rescore"]


@functools.lru_cache(maxsize=1024)
def _gold_hash(seed: int, gold_actions: str) -> str:
    return state_fingerprint(gold_replay({"shop_seed": seed, "gold_lookups": [],
                                         "gold_actions": json.loads(gold_actions)}).state)


def gold_state_hash(task: dict) -> str:
    """The fingerprint of the gold-replayed shop, computed once per distinct solution."""
    return _gold_hash(task["shop_seed"], json.dumps(task["gold_actions"], sort_keys=True))


def _score(task: dict, env: ShopEnv, replies: list[str]) -> RewardResult:
    return reward_compute(task=task, final_state=env.state, calls=env.calls, replies=replies,
                          gold_state_hash=gold_state_hash(task))


def episode_play(*, task: dict, agent, customer, memory=None, max_turns: int = DEFAULT_MAX_TURNS,
                 infra_errors: tuple[type[Exception], ...] = (),
                 on_turn: Callable[[int], None] | None = None) -> EpisodeOutcome:
    """Play one episode on a fresh copy of the task's shop and score it (see conversation_play)."""
    return conversation_play(
        world=ShopEnv(shop_fresh(task["shop_seed"])), agent=agent, customer=customer, memory=memory,
        score=lambda env, replies: _score(task, env, replies),
        diagnose=lambda calls, reward: errors_diagnose(task=task, calls=calls, reward=reward),
        max_turns=max_turns, infra_errors=infra_errors, on_turn=on_turn)


def transcript_rescore(*, task: dict, transcript: list[dict], shop_seed: int) -> RewardResult:
    """Score a stored episode again against `task` (a newer gold): its tool calls are replayed in
    order on a fresh copy of the shop it was played on (`shop_seed`), which rebuilds its final state
    (tools are deterministic), and its replies are read from the transcript. Nothing is played again:
    neither customer nor agent is asked anything."""
    env = ShopEnv(shop_fresh(shop_seed))
    env.replay(transcript)
    return _score(task, env, transcript_replies(transcript))
