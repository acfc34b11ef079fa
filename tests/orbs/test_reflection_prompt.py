"""The reflector as MemOrb has it: it reads the trajectory and the bank's last m reflections, starts from
the outcome and ends with a new plan; the complex structured reflection is a selectable variant."""
import json

from orbs.backends.reflector import (
    RECENT_REFLECTIONS_M,
    ReflectionStyle,
    reflect_offline,
    reflect_offline_structured,
)
from orbs.schemas import TrajectoryIn
from orbs.services import bank_get_or_create, orb_from_episode
from tests.fakes.openai_server import json_reply
from tests.orbs.conftest import success_trajectory, trajectory

TWO_ERRORS = {"errors": [{"kind": "wrong_tool", "tool": "cancel_order", "detail": "use return_order"},
                         {"kind": "result_unused", "tool": "get_order", "detail": ""}]}


def _answer(request: dict):
    if "reflection" in json.dumps(request.get("response_format", {})):
        return json_reply({"reflection": "Outcome: resolved. New plan: repeat it."})
    return json_reply({"label": "neutral"})


def _resolved(order_id: str) -> dict:
    """A resolved episode whose offline reflection names its own order."""
    return success_trajectory(f"Where is order {order_id}?", messages=[
        {"role": "user", "content": f"Where is order {order_id}?"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "get_order", "arguments": {"order_id": order_id}}]},
        {"role": "tool", "tool_name": "get_order", "content": "{}"}, {"role": "assistant", "content": "Shipped."}])


def _reflector_calls(fake_llm) -> list[dict]:
    return [body for body in fake_llm.chat_requests if "reflection" in json.dumps(body.get("response_format", {}))]


def test_the_llm_reflector_reads_the_trajectory_and_the_last_m_orbs(fake_llm, db):
    bank = bank_get_or_create(name="reflections")
    earlier = [orb_from_episode(bank=bank, trajectory=_resolved(f"W{n}")).orb for n in range(RECENT_REFLECTIONS_M + 1)]
    fake_llm.use_for("reflector")
    fake_llm.set_default(_answer)
    episode = trajectory()
    orb_from_episode(bank=bank, trajectory=episode)
    (call,) = _reflector_calls(fake_llm)
    system, user = call["messages"][0]["content"], call["messages"][-1]["content"]
    assert "Start with the outcome" in system and 'end with "New plan:"' in system
    assert episode["task_id"] in user and "cancel_order" in user  # the whole trajectory
    newest_first = [orb.outcome for orb in reversed(earlier)][:RECENT_REFLECTIONS_M]
    shown = user.split("Latest reflections in memory (newest first):")[1]
    assert [line.split(". ", 1)[1] for line in shown.strip().splitlines()] == newest_first
    assert earlier[0].outcome not in user  # older than the last m


def test_the_first_reflection_of_a_bank_says_there_are_none_yet(fake_llm, db):
    fake_llm.use_for("reflector")
    fake_llm.set_default(_answer)
    orb_from_episode(bank=bank_get_or_create(name="empty"), trajectory=trajectory())
    assert _reflector_calls(fake_llm)[0]["messages"][-1]["content"].endswith("(none yet)")


def test_the_offline_reflection_starts_from_the_outcome_and_ends_with_the_new_plan():
    reflection = reflect_offline(TrajectoryIn.model_validate(trajectory(**TWO_ERRORS)))
    assert reflection.startswith("Outcome: not resolved")
    plan = reflection[reflection.index("New plan:"):]
    assert plan == ("New plan: call `return_order` instead of `cancel_order` for this request. "
                    "Then state the facts `get_order` returned in the answer instead of guessing.")
    assert "Next time" not in reflection


def test_the_structured_style_writes_labelled_sections(fake_llm, db):
    structured = reflect_offline_structured(TrajectoryIn.model_validate(trajectory(**TWO_ERRORS)))
    labels = [line.split(":")[0] for line in structured.splitlines()]
    assert labels == ["Outcome", "Root cause", "Evidence", "Findings", "Checklist", "New plan"]
    assert "Root cause: result unused, wrong tool." in structured
    orb = orb_from_episode(bank=bank_get_or_create(name="structured"), trajectory=trajectory(**TWO_ERRORS),
                           reflection_style=ReflectionStyle.STRUCTURED).orb
    assert orb.outcome == structured and orb.reflector_backend == "scripted"
    fake_llm.use_for("reflector")
    fake_llm.set_default(_answer)
    orb_from_episode(bank=bank_get_or_create(name="structured llm"), trajectory=trajectory(),
                     reflection_style=ReflectionStyle.STRUCTURED)
    assert '"Root cause:"' in _reflector_calls(fake_llm)[0]["messages"][0]["content"]
