"""The memory hooks: what an agent is reminded of before it answers a customer turn (DMRM: before
each decision step of the turn, `before_step`).

MemOrb retrieval goes through orbs.services.orbs_retrieve (rewrite -> embed -> top-k); DMRM
retrieval through orbs.dmrm.services.experiences_retrieve (embed (o, g) -> rank source and target
experiences -> fill the token budget). Each retrieval is recorded on the episode with its hits, so
the transcript shows what the agent saw. A hook answers `before_turn(*, turn, query, calls, dialogue)`
with (prompt block, record or None); `calls` are the episode's tool calls so far, `dialogue` its
messages before the current customer turn (MemOrb's rewrite context C).

Randomised withholding: with `config.withhold_probability`, a retrieved Orb or DMRM experience is
kept out of the prompt, decided once per (episode, memory) from `config.withhold_key`, so the
episodes a memory was served in and those it was withheld from differ only by chance and by the
memory: their success rates then estimate what it is worth (`evaluation.metrics.memory_effect`).
"""
import hashlib

from evaluation.configs import MemoryConfig
from evaluation.dialogue_memory import DIALOGUE_HOOKS
from orbs.dmrm.qlearning import USER_TEXT_MAX_CHARS, clipped, observation_text
from orbs.dmrm.services import HISTORY_ACTIONS, action_text, experiences_retrieve, goal_text
from orbs.services import bank_resolve, dialogue_window, orbs_retrieve

_OUTCOME_CHARS = 400
RECENT_ACTIONS = HISTORY_ACTIONS  # the last actions shown in DMRM's prompt: the paper's five


def memory_hook(*, config: MemoryConfig, task: dict, bank=None):
    """The hook for `config.kind`, or None without memory. `bank`: the bank already loaded, else
    `config.bank` is looked up (MemoryBank.DoesNotExist when unknown)."""
    hooks = {"memorb": [MemOrbHook], "dmrm": [DMRMHook], "both": [MemOrbHook, DMRMHook]}.get(config.kind)
    hooks = hooks or DIALOGUE_HOOKS.get(config.kind)  # naive RAG over raw past dialogues
    if not hooks:
        return None
    bank = bank or bank_resolve(config.bank)
    parts = [hook(config=config, task=task, bank=bank) for hook in hooks]
    return parts[0] if len(parts) == 1 else CombinedHook(parts)


def memory_withheld(*, key: str, memory_id: int | str, probability: float) -> bool:
    """The same (key, memory) always draws the same, in every process and on every turn: a hash,
    not a random generator whose state depends on what was drawn before."""
    if probability <= 0:
        return False
    digest = hashlib.sha256(f"{key}:{memory_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < probability


class _Hook:
    def __init__(self, *, config: MemoryConfig, task: dict, bank):
        self.config, self.task, self.bank = config, task, bank
        self.block = ""
        self.retrieval_ids: list[int] = []  # MemOrb retrievals, whose outcome is noted when the episode ends
        self.dialogue: list[dict] = []

    def before_turn(self, *, turn: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        if not self.config.per_turn and turn > 1:
            return self.block, None
        self.dialogue = list(dialogue)
        self.block, record = self.retrieve(turn=turn, query=query, calls=list(calls))
        return self.block, {"turn": turn, "query": query, **record}


class MemOrbHook(_Hook):
    def retrieve(self, *, turn: int, query: str, calls: list[dict]) -> tuple[str, dict]:
        result = orbs_retrieve(
            bank=self.bank, query=query, k=self.config.k, approved_only=self.config.approved_only,
            context={"task_id": self.task["id"], "domain": self.task["domain"], "turn": turn,
                     "history": dialogue_window(self.dialogue)},
            domain=self.task["domain"] if self.config.same_domain_only else None,
            customer_key=self.task["customer_id"] if self.config.same_customer_only else None,
            min_score=self.config.min_score, client="evaluation", withhold=self._withheld)
        self.retrieval_ids.append(result.retrieval_id)
        return result.prompt_block, {
            "retrieval_id": result.retrieval_id, "rewritten_query": result.rewritten_query,
            "rewriter_backend": result.rewriter_backend, "timings": result.timings,
            "prompt_block": result.prompt_block, "retrieved": len(result.hits), "injected": result.injected_count,
            # served = in the prompt: an Orb cut by the token budget was neither served nor withheld
            "served_ids": [hit.orb.pk for hit in result.hits if hit.injected],
            "withheld_ids": [hit.orb.pk for hit in result.hits if hit.withheld],
            "hits": [{"orb_id": hit.orb.pk, "rank": hit.rank, "score": hit.score, "emotion": hit.orb.emotion,
                      "withheld": hit.withheld, "injected": hit.injected,
                      "outcome": hit.orb.outcome[:_OUTCOME_CHARS]} for hit in result.hits]}

    def _withheld(self, orb_id: int) -> bool:
        return memory_withheld(key=self.config.withhold_key, memory_id=orb_id,
                               probability=self.config.withhold_probability)


class DMRMHook(_Hook):
    """Retrieves at every decision step, as the paper does: before the turn's first decision
    (`before_turn`) and before each later one (`before_step`, once the tool results are in). The
    state is built exactly as the stored one (`trajectory_steps`): goal g = the customer's opening
    request, observation o = the current customer turn and the last tool result, both bounded. The
    source memory is switched off by the successful trajectories of the task's own domain. With
    withholding, each retrieved experience is drawn like an Orb, under the key "exp:<id>" so an
    experience and an Orb with the same id draw independently."""

    goal = ""

    def before_turn(self, *, turn: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        return self._step(turn=turn, step=0, query=query, calls=list(calls))

    def before_step(self, *, turn: int, step: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        return self._step(turn=turn, step=step, query=query, calls=list(calls))

    def _step(self, *, turn: int, step: int, query: str, calls: list[dict]) -> tuple[str, dict | None]:
        if not self.config.per_turn and (turn, step) != (1, 0):
            return self.block, None
        self.block, record = self.retrieve(turn=turn, query=query, calls=calls)
        return self.block, {"turn": turn, "step": step, "query": clipped(query, USER_TEXT_MAX_CHARS), **record}

    def observation(self, *, query: str, calls: list[dict]) -> str:
        return observation_text(user=query, tool=calls[-1]["content"] if calls else "")

    def retrieve(self, *, turn: int, query: str, calls: list[dict]) -> tuple[str, dict]:
        self.goal = self.goal or goal_text(query)
        observation = self.observation(query=query, calls=calls)
        result = experiences_retrieve(
            bank=self.bank, goal=self.goal, observation=observation, domain=self.task.get("domain", ""),
            client="evaluation", withhold=self._withheld,
            recent_actions=[action_text(c) for c in calls[-RECENT_ACTIONS:]])
        return result.prompt_block, {"dmrm": {
            "observation": observation, "after_calls": len(calls),
            "retrieval_id": result.retrieval_id, "prompt_block": result.prompt_block,
            "suppressed": result.suppressed, "budget_used": result.budget_used, "c_max": result.c_max,
            "min_similarity": result.min_similarity,
            "served_ids": [h.experience.pk for h in result.hits if h.included],
            "withheld_ids": [h.experience.pk for h in result.hits if h.withheld],
            "hits": [{"experience_id": h.experience.pk, "memory": h.memory, "score": round(h.score, 6),
                      "action": h.experience.action, "q_value": h.experience.q_value, "block": h.block}
                     for h in result.hits if h.included]}}

    def _withheld(self, experience_id: int) -> bool:
        return memory_withheld(key=self.config.withhold_key, memory_id=f"exp:{experience_id}",
                               probability=self.config.withhold_probability)


class CombinedHook:
    """MemOrb and DMRM together: both blocks in the prompt, one record per turn holding both."""

    def __init__(self, hooks: list[_Hook]):
        self.hooks = hooks

    @property
    def retrieval_ids(self) -> list[int]:
        return [pk for hook in self.hooks for pk in hook.retrieval_ids]

    def before_turn(self, *, turn: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        answers = [hook.before_turn(turn=turn, query=query, calls=calls, dialogue=dialogue) for hook in self.hooks]
        return self._joined(answers)

    def before_step(self, *, turn: int, step: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        """The per-step hooks retrieve again; the others keep the block of the turn."""
        answers = [hook.before_step(turn=turn, step=step, query=query, calls=calls, dialogue=dialogue)
                   if hasattr(hook, "before_step") else (hook.block, None) for hook in self.hooks]
        return self._joined(answers)

    @staticmethod
    def _joined(answers: list[tuple[str, dict | None]]) -> tuple[str, dict | None]:
        block = "\n\n".join(b for b, _ in answers if b)
        records = [r for _, r in answers if r is not None]
        return block, ({k: v for r in records for k, v in r.items()} if records else None)
