"""The DMRM formulas, free of Django so they are easy to check by hand.

"The same state": a Q-table entry is one (goal, observation) pair after normalisation (lowercase,
whitespace runs collapsed to one space, ends stripped) with one action. Entries are never merged
by similarity; the Q update may look its successor state up by similarity (a bank setting, see
orbs.dmrm.services.learning).
"""
import hashlib
import math
import re
import statistics
from collections.abc import Callable
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


HISTORY_ACTIONS = 5  # the paper's history: the last five actions of the current trajectory

# Every DMRM text field is bounded, in characters (a 2 MB goal once reached a prompt block): runs
# and the agent hook cut longer text with a visible marker, the API refuses it naming the field.
# A customer turn is far shorter than USER_TEXT_MAX_CHARS; an observation is that turn and the
# last tool result (TOOL_CONTEXT_CHARS) with its label, and room for the marker.
GOAL_MAX_CHARS = 1000
USER_TEXT_MAX_CHARS = 1200
TOOL_CONTEXT_CHARS = 300
OBSERVATION_MAX_CHARS = 1600
ACTION_MAX_CHARS = 1000
_TOOL_LABEL = "\nTool result: "


def clipped(text: str, limit: int) -> str:
    """`text` when it has at most `limit` characters; else its start and a marker saying how long
    it was, `limit` characters in all."""
    if len(text) <= limit:
        return text
    marker = f" … [cut: {len(text):,} characters]"
    return text[:max(0, limit - len(marker))] + marker[:limit]


def observation_text(*, user: str, tool: str = "") -> str:
    """An observation o as DMRM stores and queries it alike: the customer's last turn and the last
    tool result seen, each cut to its share of OBSERVATION_MAX_CHARS."""
    user = clipped(user, USER_TEXT_MAX_CHARS)
    return f"{user}{_TOOL_LABEL}{tool[:TOOL_CONTEXT_CHARS]}" if tool else user
_BLOCK_GAP = "\n\n"


@dataclass(frozen=True)
class BudgetDecision:
    included: bool
    reason: str
    used_after: int


def prompt_join(parts: list[str]) -> str:
    return _BLOCK_GAP.join(parts)


def budget_fill(*, current: str, blocks: list[str], c_max: int, count: Callable[[str], int]) -> list[BudgetDecision]:
    """Take experience blocks in rank order while the prompt as rendered (the current state, then
    the blocks taken so far) counts at most C_max tokens; the first block that does not fit closes
    the budget, so k is dynamic and the best-ranked go first. Counting the whole prompt, not a sum
    of parts, makes the bound hold for any tokenizer."""
    taken, used = [current], count(current)
    open_, decisions = used <= c_max, []
    for rank, block in enumerate(blocks, start=1):
        if open_:
            total = count(prompt_join([*taken, block]))
            if total <= c_max:
                taken.append(block)
                used = total
                decisions.append(BudgetDecision(True, f"rank {rank}: fits ({used} ≤ C_max {c_max} tokens)", used))
                continue
            reason = f"rank {rank}: the prompt would take {total} tokens > C_max {c_max}; budget closed"
        elif rank == 1:
            reason = f"rank 1: the current state (o, g) alone takes {used} tokens > C_max {c_max}"
        else:
            reason = f"rank {rank}: budget already closed"
        open_ = False
        decisions.append(BudgetDecision(False, reason, used))
    return decisions


@dataclass(frozen=True)
class Choice:
    """An action seen in a retrieved state. `visits` and `recency` (a timestamp) break ties of
    value: better-evidenced, then more recently updated, then the retrieval order; never the name."""

    action: str
    value: float
    reason: str
    visits: int = 0
    recency: float = 0.0


def action_choices(choices: list[Choice]) -> tuple[Choice | None, Choice | None]:
    """(encouraged, discouraged) among the actions of one state: the best- and the worst-valued;
    an action's value is its best Q among the entries. The discouraged one is left out unless its
    value is strictly below the encouraged one's (equal values give no reason to avoid it)."""
    best: dict[str, Choice] = {}
    for choice in choices:
        if choice.action not in best or _better(choice, best[choice.action]):
            best[choice.action] = choice
    if not best:
        return None, None
    actions = list(best.values())
    encouraged = min(actions, key=lambda c: (-c.value, -c.visits, -c.recency))
    discouraged = min(actions, key=lambda c: (c.value, -c.visits, -c.recency))
    return encouraged, (discouraged if discouraged.value < encouraged.value else None)


def _better(a: Choice, b: Choice) -> bool:
    return (a.value, a.visits, a.recency) > (b.value, b.visits, b.recency)


def current_render(*, recent_actions: list[str], observation: str, instruction: str) -> str:
    """The current step as the paper's template has it: the history (last five actions), o and g."""
    history = [clipped(action, ACTION_MAX_CHARS) for action in recent_actions[-HISTORY_ACTIONS:]]
    return "\n".join(["Recent actions: " + ("; ".join(history) if history else "(none)"),
                      f"Observation: {clipped(observation, OBSERVATION_MAX_CHARS)}",
                      f"Instruction: {clipped(instruction, GOAL_MAX_CHARS)}"])


@dataclass(frozen=True)
class ExperienceView:
    """One retrieved experience: its own state, the actions taken there, and the advice."""

    heading: str
    observation: str
    instruction: str
    actions: list[str]
    encouraged: Choice | None
    discouraged: Choice | None


def experience_render(view: ExperienceView) -> str:
    """Stored fields are bounded on write; rows written before the bounds are cut here as well."""
    lines = [view.heading, f"Observation: {clipped(view.observation, OBSERVATION_MAX_CHARS)}",
             f"Instruction: {clipped(view.instruction, GOAL_MAX_CHARS)}",
             "Actions taken: " + "; ".join(clipped(action, ACTION_MAX_CHARS) for action in view.actions)]
    for label, choice in (("Encouraged", view.encouraged), ("Discouraged", view.discouraged)):
        if choice:
            lines.append(f"{label}: {clipped(choice.action, ACTION_MAX_CHARS)} → {choice.value:.3f} ({choice.reason})")
    return "\n".join(lines)


def entry_text(*, goal: str, observation: str, action: str) -> str:
    """What len(m_j) measures: the entry's state and action as they would enter a prompt."""
    return f"Goal: {goal}\nObservation: {observation}\nAction: {action}"


# A Q-value beyond this many interquartile ranges outside the quartiles is charted in an overflow bin,
# so one extreme value cannot squeeze every other one into a single bar.
OUTLIER_IQRS = 3
SHORT_LABEL_LIMIT = 1000  # beyond it a bin edge is written with an exponent


def _fences(finite: list[float]) -> tuple[float, float]:
    """The range charted in equal-width bins: the quartiles widened by OUTLIER_IQRS interquartile
    ranges (all the values when there are too few for quartiles)."""
    if len(finite) < 4:
        return min(finite, default=0.0), max(finite, default=0.0)
    q1, _, q3 = statistics.quantiles(finite, n=4, method="inclusive")
    spread = OUTLIER_IQRS * (q3 - q1)
    if math.isnan(spread):  # quartiles of values near the float limit can overflow: no fences then
        return min(finite), max(finite)
    return q1 - spread, q3 + spread


def _short(value: float) -> str:
    """Two decimals, or three significant digits for a value too large for them to stay short."""
    return f"{value:.2f}" if abs(value) < SHORT_LABEL_LIMIT else f"{value:.3g}"


def _equal_bins(values: list[float], low: float, high: float, bins: int) -> tuple[list[str], list[int]]:
    """Equal-width bins over [low, high]; one bin when every value is the same. Every step divides
    before it subtracts, since the difference of two huge values overflows to infinity."""
    if high == low:
        return [_short(low)], [len(values)]
    width = high / bins - low / bins
    counts = [0] * bins
    for value in values:
        counts[min(int((value / bins - low / bins) / width * bins), bins - 1)] += 1
    edges = [low * (1 - i / bins) + high * (i / bins) for i in range(bins + 1)]
    return [f"{_short(edges[i])}–{_short(edges[i + 1])}" for i in range(bins)], counts


def histogram(values: list[float], *, bins: int = 10) -> dict:
    """The Q-value chart's bins: labels and counts. Equal-width bins over the values inside the
    fences (_fences), with one underflow ("< x") and one overflow ("> x") bin for those beyond them,
    infinities included, when there are any; labels stay short (_short). NaN is left out."""
    values = [value for value in values if not math.isnan(value)]
    if not values:
        return {"labels": [], "counts": []}
    low_fence, high_fence = _fences([value for value in values if math.isfinite(value)])
    inside = [value for value in values if low_fence <= value <= high_fence and math.isfinite(value)]
    below = sum(1 for value in values if value < low_fence)
    above = len(values) - len(inside) - below
    low, high = min(inside, default=low_fence), max(inside, default=high_fence)
    labels, counts = _equal_bins(inside, low, high, bins)
    if below:
        labels, counts = [f"< {_short(low)}", *labels], [below, *counts]
    if above:
        labels, counts = [*labels, f"> {_short(high)}"], [*counts, above]
    return {"labels": labels, "counts": counts}
