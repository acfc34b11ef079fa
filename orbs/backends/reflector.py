"""The policy reflection on a whole trajectory (the MemOrb paper's "outcome"): it starts from how
the episode ended and ends with a new plan. The LLM reflector reads the trajectory and the bank's
last m reflections; a run may choose the complex structured reflection the paper ablates.

What it is given is all it knows: by default an evaluation run hands it the dialogue, the tool calls
with their results, the reward components and a diagnosis drawn from those
(`evaluation.services.episode_trajectory`), never the task's gold answer; only a run's labelled
"oracle" reflection input adds a diagnosis against the gold answer and the gold order id and SKU.

Offline: rules over the trajectory's structure. Failed reward components give the verdict; each
reported error (wrong tool, wrong arguments, result not used) and each tool result carrying an
error becomes a finding that names the tool and the argument involved, and its advice a step of
the new plan; a success records the tool sequence that worked so it can be repeated.
"""
import json
import re
from typing import NamedTuple

from django.db import models
from pydantic import BaseModel, Field

from orbs.backends import BackendResult, run_with_fallback
from orbs.budget import REFLECTION_MAX_WORDS
from orbs.schemas import ErrorIn, TrajectoryIn
from orbs.vocabulary import OrbsLLMRole

ROLE = OrbsLLMRole.REFLECTOR
# The reflector sees the last m reflections of the bank beside the trajectory; see docs/FIDELITY.md.
RECENT_REFLECTIONS_M = 3


class ReflectionStyle(models.TextChoices):
    SIMPLE = "simple", "simple: outcome first, new plan last (the paper's reflection)"
    STRUCTURED = "structured", "complex structured: labelled sections (the paper's ablation, reported to hurt)"


class Lesson(NamedTuple):
    finding: str  # what happened ("Mistake: …", "What worked: …"), empty when nothing specific
    advice: str  # what to do next time, a step of the new plan
_SNAKE_NAME = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_MAX_VALUE_CHARS = 60


def _short(value, limit: int = _MAX_VALUE_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def _format_args(arguments: dict) -> str:
    return ", ".join(f"{name}={_short(value)}" for name, value in arguments.items())


def _tool_calls(trajectory: TrajectoryIn) -> list[tuple[str, dict]]:
    return [(call.name, call.arguments) for m in trajectory.messages if m.role == "assistant" for call in m.tool_calls]


def _last_call(trajectory: TrajectoryIn, tool: str) -> dict | None:
    calls = [arguments for name, arguments in _tool_calls(trajectory) if name == tool]
    return calls[-1] if calls else None


def _tool_result(trajectory: TrajectoryIn, tool: str) -> str:
    results = [m.content for m in trajectory.messages if m.role == "tool" and m.tool_name == tool]
    return results[-1] if results else ""


def _failed_components(trajectory: TrajectoryIn) -> list[str]:
    return [
        name for name, value in trajectory.reward_breakdown.items()
        if value is False or (not isinstance(value, bool) and value < 1)
    ]


def _verdict(trajectory: TrajectoryIn) -> str:
    if trajectory.success:
        return f"Outcome: resolved (reward {trajectory.reward:g})."
    failed = _failed_components(trajectory)
    unmet = f"; unmet: {', '.join(failed)}" if failed else ""
    return f"Outcome: not resolved (reward {trajectory.reward:g}{unmet})."


def _expected_tool(error: ErrorIn, trajectory: TrajectoryIn) -> str | None:
    """The tool the error's detail points to: a snake_case name that is not the
    wrong tool itself nor an argument name (`order_id`)."""
    not_tools = {error.tool, *trajectory.metadata, *(_last_call(trajectory, error.tool) or {})}
    return next((name for name in _SNAKE_NAME.findall(error.detail) if name not in not_tools), None)


def _wrong_tool_lesson(error: ErrorIn, trajectory: TrajectoryIn) -> Lesson:
    arguments = _last_call(trajectory, error.tool) or {}
    mistake = f"Mistake: called `{error.tool}`({_format_args(arguments)}), the wrong tool"
    reason = f" ({error.detail})" if error.detail else ""
    expected = _expected_tool(error, trajectory)
    if expected:
        return Lesson(f"{mistake}{reason}.", f"call `{expected}` instead of `{error.tool}` for this request.")
    advice = f"do not use `{error.tool}` here; pick the tool that performs what the customer asked."
    return Lesson(f"{mistake}{reason}.", advice)


def _argument_fixes(arguments: dict, metadata: dict) -> list[str]:
    """Arguments whose value differs from the order id or SKU the metadata names: an API caller's own
    facts, or the gold answer's under the oracle reflection input (a plain run's metadata has none)."""
    return [
        f"{name}={_short(metadata[name])} (not {_short(value)})"
        for name, value in arguments.items()
        if name in metadata and metadata[name] not in (None, "") and metadata[name] != value
    ]


def _wrong_arguments_lesson(error: ErrorIn, trajectory: TrajectoryIn) -> Lesson:
    arguments = _last_call(trajectory, error.tool) or {}
    reason = f" ({error.detail})" if error.detail else ""
    mistake = f"Mistake: `{error.tool}` got wrong arguments ({_format_args(arguments)}){reason}."
    fixes = _argument_fixes(arguments, trajectory.metadata)
    if fixes:
        return Lesson(mistake, f"call `{error.tool}` with {', '.join(fixes)}.")
    names = ", ".join(arguments) or "its arguments"
    return Lesson(mistake, f"take {names} for `{error.tool}` from the customer's own words or a lookup, "
                           "and check them before calling.")


def _result_fields(result: str) -> str:
    try:
        data = json.loads(result)
    except ValueError:
        return _short(result)
    if isinstance(data, dict):
        return ", ".join(f"{key}={_short(value, 30)}" for key, value in list(data.items())[:4])
    return _short(result)


def _result_unused_lesson(error: ErrorIn, trajectory: TrajectoryIn) -> Lesson:
    result = _tool_result(trajectory, error.tool)
    facts = f" ({_result_fields(result)})" if result else ""
    reason = f" {_sentence(error.detail)}" if error.detail else ""
    return Lesson(f"Mistake: the result of `{error.tool}`{facts} was not used in the reply.{reason}",
                  f"state the facts `{error.tool}` returned in the answer instead of guessing.")


_LESSONS = {
    "wrong_tool": _wrong_tool_lesson,
    "wrong_arguments": _wrong_arguments_lesson,
    "result_unused": _result_unused_lesson,
}


def _tool_error_lessons(trajectory: TrajectoryIn) -> list[str]:
    """Tool results that carry an error the trajectory's error list did not already explain."""
    reported = {error.tool for error in trajectory.errors}
    lessons = []
    for message in trajectory.messages:
        if message.role == "tool" and message.tool_name not in reported and '"error"' in message.content:
            lessons.append(f"`{message.tool_name}` returned an error: {_short(message.content, 120)}.")
    return lessons


def _what_worked(trajectory: TrajectoryIn) -> Lesson:
    calls = _tool_calls(trajectory)
    if not calls:
        return Lesson("What worked: answering directly from the conversation without tool calls.",
                      "answer the same way when no lookup or change is needed.")
    sequence = " -> ".join(f"`{name}`({_format_args(arguments)})" for name, arguments in calls)
    return Lesson(f"What worked: {sequence}.", f"follow the same sequence for similar {trajectory.domain} requests.")


def _unmet_advice(trajectory: TrajectoryIn) -> str:
    failed = _failed_components(trajectory)
    if not failed:
        return "confirm the customer's request is fully done before ending the conversation."
    return f"make sure {', '.join(failed)} is satisfied before ending the conversation."


def _lessons(trajectory: TrajectoryIn) -> list[Lesson]:
    """What happened and what to do about it: one per reported error, else what worked or what was left undone."""
    lessons = [_LESSONS[error.kind](error, trajectory) for error in trajectory.errors]
    if lessons:
        return lessons
    if trajectory.success:
        return [_what_worked(trajectory)]
    return [Lesson("", _unmet_advice(trajectory))]


def _plan(lessons: list[Lesson]) -> str:
    return "New plan: " + " Then ".join(lesson.advice for lesson in lessons)


def reflect_offline(trajectory: TrajectoryIn) -> str:
    """The paper's shape: the outcome first, what happened in between, the new plan last."""
    lessons = _lessons(trajectory)
    middle = [lesson.finding for lesson in lessons if lesson.finding] + _tool_error_lessons(trajectory)
    return " ".join([_verdict(trajectory), *middle, _plan(lessons)])


_CHECKLIST = ("identify the customer before reading or changing orders", "look up before acting",
              "confirm every change with the customer", "report what the tools return")


def _root_cause(trajectory: TrajectoryIn) -> str:
    kinds = sorted({error.kind.replace("_", " ") for error in trajectory.errors})
    if kinds:
        return ", ".join(kinds)
    return "none found" if trajectory.success else f"unmet: {', '.join(_failed_components(trajectory)) or 'unknown'}"


def reflect_offline_structured(trajectory: TrajectoryIn) -> str:
    """The complex structured reflection the paper ablates: the same findings in labelled sections,
    with a root-cause label, the evidence and a generic checklist besides the plan."""
    lessons = _lessons(trajectory)
    findings = [lesson.finding for lesson in lessons if lesson.finding] + _tool_error_lessons(trajectory)
    calls = _tool_calls(trajectory)
    evidence = "; ".join(f"`{name}`({_format_args(arguments)})" for name, arguments in calls) or "no tool calls"
    return "\n".join([
        _verdict(trajectory), f"Root cause: {_root_cause(trajectory)}.", f"Evidence: {evidence}.",
        "Findings: " + (" ".join(findings) or "none."), "Checklist: " + "; ".join(_CHECKLIST) + ".",
        _plan(lessons)])


class ReflectionOut(BaseModel):
    reflection: str = Field(min_length=1, max_length=4000)


_TASK = (
    "You review a finished customer-service episode of an e-commerce agent: the dialogue, its tool calls and "
    "results, and the reward. You also see the latest reflections already in the agent's memory: build on "
    "them, correct them where this episode shows they were wrong, and do not repeat them. "
)
_SHAPES = {
    ReflectionStyle.SIMPLE: (
        "Write one policy reflection in plain sentences. Start with the outcome (resolved or not, and why), then "
        "what went wrong or right, naming the tools and arguments involved, and end with \"New plan:\" followed "
        "by exactly what to do next time in a similar situation."),
    ReflectionStyle.STRUCTURED: (
        "Write a structured reflection with these labelled sections, one per line, in this order: \"Outcome:\", "
        "\"Root cause:\" (wrong tool, wrong arguments, result unused, or unmet goal), \"Evidence:\" (the tool "
        "calls involved), \"Findings:\", \"Checklist:\" (rules to check before every action) and \"New plan:\"."),
}


def reflection_prompt(*, style: str = ReflectionStyle.SIMPLE) -> str:
    return f"{_TASK}{_SHAPES[ReflectionStyle(style)]} At most {REFLECTION_MAX_WORDS} words."


def reflection_request(trajectory: TrajectoryIn, recent: list[str]) -> str:
    """The trajectory and the bank's last m reflections (newest first), as the reflector reads them."""
    earlier = "\n".join(f"{n}. {text}" for n, text in enumerate(recent[:RECENT_REFLECTIONS_M], start=1))
    return (f"Trajectory:\n{trajectory.model_dump_json(indent=1)}\n\n"
            f"Latest reflections in memory (newest first):\n{earlier or '(none yet)'}")


def _reflect_with_llm(trajectory: TrajectoryIn, recent: list[str], style: str) -> str:
    from memweb.llm import llm_json

    messages = [
        {"role": "system", "content": reflection_prompt(style=style)},
        {"role": "user", "content": reflection_request(trajectory, recent)},
    ]
    return llm_json(role=ROLE, messages=messages, schema=ReflectionOut).reflection.strip()


_OFFLINE = {ReflectionStyle.SIMPLE: reflect_offline, ReflectionStyle.STRUCTURED: reflect_offline_structured}


def reflection_write(*, trajectory: TrajectoryIn, recent: list[str] = (),
                     style: str = ReflectionStyle.SIMPLE) -> BackendResult:
    """`recent`: the outcomes of the bank's latest Orbs, newest first (the first m are shown). The
    offline reflector works from the trajectory alone: its rules have nothing to take from them."""
    offline = _OFFLINE[ReflectionStyle(style)]
    return run_with_fallback(
        role=ROLE, llm=lambda: _reflect_with_llm(trajectory, list(recent), style), offline=lambda: offline(trajectory)
    )
