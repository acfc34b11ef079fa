"""The DMRM formulas, free of Django so they are easy to check by hand.

"The same state": two (goal, observation) pairs are the same state when they
are equal after normalisation (lowercase, whitespace runs collapsed to one
space, ends stripped). Exact matching is cheap, deterministic and lets the
database find the next state's actions with an index look-up; similarity is
used for retrieval only, never to merge Q-table entries.
"""
import hashlib
import re
from dataclasses import dataclass

_SPACES = re.compile(r"\s+")
_SEPARATOR = "\x1f"


def normalise(text: str) -> str:
    return _SPACES.sub(" ", text).strip().lower()


def text_key(*parts: str) -> str:
    return hashlib.sha256(_SEPARATOR.join(normalise(p) for p in parts).encode("utf-8")).hexdigest()


def state_key(*, goal: str, observation: str) -> str:
    return text_key(goal, observation)


def q_target(*, reward: float, gamma: float, next_max: float | None) -> float:
    """Q'(g,o,a) = r + γ·max_a Q(g,o',a); no action observed at o' counts as 0."""
    return reward + gamma * (next_max or 0.0)


def q_update(*, q: float, alpha: float, target: float) -> float:
    """Q ← (1−α)·Q + α·Q'."""
    return (1 - alpha) * q + alpha * target


def discounted_returns(rewards: list[float], *, gamma: float) -> list[float]:
    """Per-step Monte-Carlo Q estimates of one finished trajectory: G_i = r_i + γ·G_{i+1}."""
    returns, running = [], 0.0
    for reward in reversed(rewards):
        running = reward + gamma * running
        returns.append(running)
    return returns[::-1]


@dataclass(frozen=True)
class BudgetDecision:
    included: bool
    reason: str
    used_after: int


def budget_select(*, lengths: list[int], query_tokens: int, c_max: int) -> list[BudgetDecision]:
    """Take entries in rank order while Σ len(m_j) + len(o, g) ≤ C_max; the first entry
    that does not fit closes the budget, so k is dynamic and the best-ranked go first."""
    used, open_, decisions = query_tokens, query_tokens <= c_max, []
    for rank, length in enumerate(lengths, start=1):
        if open_ and used + length <= c_max:
            used += length
            decisions.append(BudgetDecision(True, f"rank {rank}: fits ({used} ≤ C_max {c_max} tokens)", used))
            continue
        if open_:
            reason = f"rank {rank}: {used} + {length} tokens would exceed C_max {c_max}; budget closed"
        elif rank == 1:
            reason = f"rank 1: the query (o, g) alone takes {query_tokens} tokens > C_max {c_max}"
        else:
            reason = f"rank {rank}: budget already closed"
        open_ = False
        decisions.append(BudgetDecision(False, reason, used))
    return decisions


@dataclass(frozen=True)
class Choice:
    action: str
    value: float
    reason: str


def action_choices(entries: list[tuple[str, float, str]]) -> tuple[Choice | None, Choice | None]:
    """(encouraged, discouraged) from (action, Q-value, reason) entries: the best- and the
    worst-valued action; an action's value is its best Q among the entries.
    The discouraged one is left out when only one action was retrieved."""
    best: dict[str, Choice] = {}
    for action, value, reason in entries:
        if action not in best or value > best[action].value:
            best[action] = Choice(action, value, reason)
    if not best:
        return None, None
    ranked = sorted(best.values(), key=lambda c: (-c.value, c.action))
    return ranked[0], (ranked[-1] if len(ranked) > 1 else None)


def prompt_render(*, recent_actions: list[str], observation: str, instruction: str,
                  encouraged: Choice | None, discouraged: Choice | None) -> str:
    """The paper's template: recent actions, observation, instruction, then the advice."""
    lines = ["Recent actions: " + ("; ".join(recent_actions) if recent_actions else "(none)"),
             f"Observation: {observation}", f"Instruction: {instruction}"]
    if encouraged:
        lines.append(f"Encouraged: {encouraged.action} → {encouraged.value:.3f} ({encouraged.reason})")
    if discouraged:
        lines.append(f"Discouraged: {discouraged.action} → {discouraged.value:.3f}")
    return "\n".join(lines)


def entry_text(*, goal: str, observation: str, action: str) -> str:
    """What len(m_j) measures: the entry's state and action as they would enter a prompt."""
    return f"Goal: {goal}\nObservation: {observation}\nAction: {action}"


def histogram(values: list[float], *, bins: int = 10) -> dict:
    """Equal-width bins over [min, max] for the Q-value chart: labels and counts."""
    if not values:
        return {"labels": [], "counts": []}
    low, high = min(values), max(values)
    width = (high - low) / bins or 1.0
    counts = [0] * bins
    for value in values:
        counts[min(int((value - low) / width), bins - 1)] += 1
    labels = [f"{low + i * width:.2f}–{low + (i + 1) * width:.2f}" for i in range(bins)]
    return {"labels": labels, "counts": counts}
