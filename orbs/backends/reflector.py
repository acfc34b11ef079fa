"""The policy reflection on a whole trajectory: what went wrong or right, and
what to do next time (the MemOrb paper's "outcome").

Offline: rules over the trajectory's structure. Failed reward components
give the verdict; each reported error (wrong tool, wrong arguments, result
not used) and each tool result carrying an error becomes a lesson that
names the tool and the argument involved; a success records the tool
sequence that worked so it can be repeated.
"""
import json
import re

from pydantic import BaseModel, Field

from orbs.backends import BackendResult, run_with_fallback
from orbs.schemas import ErrorIn, TrajectoryIn

ROLE = "reflector"
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


def _wrong_tool_lesson(error: ErrorIn, trajectory: TrajectoryIn) -> str:
    arguments = _last_call(trajectory, error.tool) or {}
    mistake = f"Mistake: called `{error.tool}`({_format_args(arguments)}), the wrong tool"
    reason = f" ({error.detail})" if error.detail else ""
    expected = _expected_tool(error, trajectory)
    if expected:
        return f"{mistake}{reason}. Next time: call `{expected}` instead of `{error.tool}` for this request."
    advice = f"do not use `{error.tool}` here; pick the tool that performs what the customer asked"
    return f"{mistake}{reason}. Next time: {advice}."


def _argument_fixes(arguments: dict, metadata: dict) -> list[str]:
    """Arguments whose value differs from the task's own facts (e.g. the SKU or order id)."""
    return [
        f"{name}={_short(metadata[name])} (not {_short(value)})"
        for name, value in arguments.items()
        if name in metadata and metadata[name] not in (None, "") and metadata[name] != value
    ]


def _wrong_arguments_lesson(error: ErrorIn, trajectory: TrajectoryIn) -> str:
    arguments = _last_call(trajectory, error.tool) or {}
    reason = f" ({error.detail})" if error.detail else ""
    mistake = f"Mistake: `{error.tool}` got wrong arguments ({_format_args(arguments)}){reason}."
    fixes = _argument_fixes(arguments, trajectory.metadata)
    if fixes:
        return f"{mistake} Next time: call `{error.tool}` with {', '.join(fixes)}."
    names = ", ".join(arguments) or "its arguments"
    advice = f"take {names} for `{error.tool}` from the customer's own words or a lookup, and check them before calling"
    return f"{mistake} Next time: {advice}."


def _result_fields(result: str) -> str:
    try:
        data = json.loads(result)
    except ValueError:
        return _short(result)
    if isinstance(data, dict):
        return ", ".join(f"{key}={_short(value, 30)}" for key, value in list(data.items())[:4])
    return _short(result)


def _result_unused_lesson(error: ErrorIn, trajectory: TrajectoryIn) -> str:
    result = _tool_result(trajectory, error.tool)
    facts = f" ({_result_fields(result)})" if result else ""
    reason = f" {_sentence(error.detail)}" if error.detail else ""
    return (
        f"Mistake: the result of `{error.tool}`{facts} was not used in the reply.{reason} "
        f"Next time: state the facts `{error.tool}` returned in the answer instead of guessing."
    )


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


def _what_worked(trajectory: TrajectoryIn) -> str:
    calls = _tool_calls(trajectory)
    if not calls:
        return "What worked: answering directly from the conversation without tool calls."
    sequence = " -> ".join(f"`{name}`({_format_args(arguments)})" for name, arguments in calls)
    return f"What worked: {sequence}. Next time: follow the same sequence for similar {trajectory.domain} requests."


def _unmet_advice(trajectory: TrajectoryIn) -> str:
    failed = _failed_components(trajectory)
    if not failed:
        return "Next time: confirm the customer's request is fully done before ending the conversation."
    return f"Next time: make sure {', '.join(failed)} is satisfied before ending the conversation."


def reflect_offline(trajectory: TrajectoryIn) -> str:
    parts = [_verdict(trajectory)]
    parts += [_LESSONS[error.kind](error, trajectory) for error in trajectory.errors]
    parts += _tool_error_lessons(trajectory)
    if trajectory.success and not trajectory.errors:
        parts.append(_what_worked(trajectory))
    elif not trajectory.errors:
        parts.append(_unmet_advice(trajectory))
    return " ".join(parts)


class ReflectionOut(BaseModel):
    reflection: str = Field(min_length=1, max_length=4000)


_SYSTEM_PROMPT = (
    "You review a finished customer-service episode of an e-commerce agent: the dialogue, its tool calls and "
    "results, and the reward. Write a short policy reflection for the agent's memory: what went wrong or right, "
    "and exactly what to do next time in a similar situation. Name the tools and arguments involved. "
    "At most 120 words."
)


def _reflect_with_llm(trajectory: TrajectoryIn) -> str:
    from memweb.llm import llm_json

    messages = [
        {"role": "system", "content": _SYSTEM_PROMPT},
        {"role": "user", "content": trajectory.model_dump_json(indent=1)},
    ]
    return llm_json(role=ROLE, messages=messages, schema=ReflectionOut).reflection.strip()


def reflection_write(*, trajectory: TrajectoryIn) -> BackendResult:
    return run_with_fallback(
        role=ROLE, llm=lambda: _reflect_with_llm(trajectory), offline=lambda: reflect_offline(trajectory)
    )
