"""The answer-key leak check: does a stored memory hold a value that only the task's gold answer knew?

A value leaks when it is one of the gold answer's identifiers or values (the gold calls' arguments,
the facts the customer must be told) that the episode never showed: no customer or agent message,
no tool-call argument and no tool result held it. Such a value in a memory can only have come from
the answer key, and since every trial replays the same tasks, it hands the next trial's agent the
answer. Memories whose episode said the value are fine (the customer may say an order id; a tool may
return a date): that is learning from experience, not from the key.

Checked: a bank's Orbs (reflections, feedback-into-memory Orbs included: their obs, outcome and
context) and DMRM experiences (goal, observation, action), each against the episode it was written
from (its episode reference). Raw-dialogue memories are the transcript itself and cannot leak.
"""
import json
import re
from dataclasses import dataclass

from evaluation.environments import environment
from evaluation.models import Episode
from orbs.dmrm.services import ExperienceFilters, experiences_filtered
from orbs.services.queue import OrbFilters, orbs_filtered

# "evaluation-episode:12" (run and ad-hoc episodes, ":feedback" for feedback Orbs) or "episode:12"
# (DMRM source memories built from stored episodes).
_EPISODE_REF_RE = re.compile(r"^(?:evaluation-)?episode:(\d+)")
# Shorter values ("1", "no") would be found in any text; identifiers, SKUs, dates, amounts and
# reasons are all longer.
MIN_VALUE_CHARS = 3


@dataclass(frozen=True)
class GoldLeak:
    memory: str  # "orb" or "experience"
    memory_id: int
    episode_id: int
    value: str  # the gold-only value found in the memory
    source: str  # where the gold answer holds it, e.g. "gold_actions cancel_order.order_id"


def _gold_values(spec: dict) -> dict[str, str]:
    """The gold answer's values, as text, each with where it comes from."""
    values = {}
    for field in ("gold_lookups", "gold_actions"):
        for call in spec.get(field, ()):
            for name, value in (call.get("arguments") or {}).items():
                values.setdefault(_text(value), f"{field} {call['name']}.{name}")
    for output in spec.get("required_outputs", ()):
        values.setdefault(_text(output["value"]), f"required_outputs {output['label']}")
    return {value: source for value, source in values.items() if len(value.strip()) >= MIN_VALUE_CHARS}


def _text(value) -> str:
    if isinstance(value, bool) or value is None:
        return ""  # flags and absences are not identifiers
    return value if isinstance(value, str) else json.dumps(value)


def episode_shown_text(episode: Episode) -> str:
    """Everything the episode showed: what the customer and the agent said, the agent's tool-call
    arguments and the tools' results."""
    parts = []
    for message in episode.transcript:
        parts.append(message.get("content") or "")
        parts += [json.dumps(call.get("arguments") or {}, ensure_ascii=False) for call in message.get("tool_calls", ())]
    return "\n".join(parts)


def episode_gold_only_values(episode: Episode) -> dict[str, str]:
    """The gold answer's values that the episode never showed (value -> where the gold holds it)."""
    shown, tells = episode_shown_text(episode), environment(episode.task.environment).tells
    return {value: source for value, source in _gold_values(episode.task_snapshot).items()
            if not tells(value, shown)}


def _episode_id(ref: str) -> int | None:
    match = _EPISODE_REF_RE.match(ref or "")
    return int(match.group(1)) if match else None


def _orb_texts(bank) -> list[tuple[str, int, str, str]]:
    orbs = orbs_filtered(filters=OrbFilters(bank=bank.slug, all_revisions=True))
    return [("orb", orb.pk, orb.episode_ref, "\n".join([orb.obs, orb.outcome, json.dumps(orb.context)]))
            for orb in orbs]


def _experience_texts(bank) -> list[tuple[str, int, str, str]]:
    experiences = experiences_filtered(bank=bank, filters=ExperienceFilters())
    return [("experience", e.pk, e.episode_ref, "\n".join([e.goal, e.observation, e.action])) for e in experiences]


def bank_gold_leaks(*, bank) -> list[GoldLeak]:
    """Every gold-only value found in one of the bank's stored memories (Orbs of every revision and
    DMRM experiences), checked against the episode each memory was written from. Memories not written
    from a stored episode (imported, hand-written) have no answer key to leak and are skipped."""
    memories = [m for m in _orb_texts(bank) + _experience_texts(bank) if _episode_id(m[2]) is not None]
    episodes = Episode.objects.select_related("task").in_bulk({_episode_id(ref) for _, _, ref, _ in memories})
    gold_only = {pk: episode_gold_only_values(episode) for pk, episode in episodes.items()}
    leaks = []
    for kind, memory_id, ref, text in memories:
        episode_id = _episode_id(ref)
        if episode_id not in episodes:
            continue
        tells = environment(episodes[episode_id].task.environment).tells
        leaks += [GoldLeak(kind, memory_id, episode_id, value, source)
                  for value, source in gold_only[episode_id].items() if tells(value, text)]
    return leaks
