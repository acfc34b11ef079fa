"""The OpenAI Agents SDK tool set run by the SDK's own Runner against a live memweb. The model is the
SDK's scripted test model (the LLM boundary); the tools, the Runner and memweb are real."""
import json

import pytest
from agents import Agent, RunConfig, Runner
from agents.items import ToolCallOutputItem
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from integrations.openai_agents import memweb_tools
from memweb.mcp.gateway import MemwebApi
from orbs.models import Orb, RetrievalLog
from tests.mcp.conftest import APPROVED_TEXT, LESSON, PENDING_TEXT, SITUATION
from tests.support.event_loop import run_to_end

pytestmark = pytest.mark.django_db(transaction=True)  # the live server's thread reads what the test wrote


def tool_output(call, call_id: str) -> str:
    """What the tool answered to the model's call `call_id`, as the model receives it next turn."""
    return next(item["output"] for item in call.input
                if isinstance(item, dict) and item.get("type") == "function_call_output" and item["call_id"] == call_id)


def run_agent(live_server, key: str, bank: str, model: ScriptedModel) -> dict[str, str]:
    async def run():
        api = MemwebApi.remote(live_server.url)
        agent = Agent(name="support", instructions="Help the customer.", model=model,
                      tools=memweb_tools(api=api, api_key=key, bank=bank))
        try:
            return await Runner.run(agent, SITUATION, run_config=RunConfig(tracing_disabled=True))
        finally:
            await api.aclose()  # the live server's threads hold a database connection per open connection

    result = run_to_end(run())
    model.assert_complete()
    return {item.raw_item["call_id"]: item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)}


def test_an_agent_retrieves_approved_memories_proposes_a_lesson_and_reports_the_outcome(live_server, memory):
    def remember_and_report(call):
        retrieval_id = json.loads(tool_output(call, "retrieve"))["retrieval_id"]
        return [function_call("remember_lesson", {"lesson": LESSON}, call_id="remember"),
                function_call("report_outcome", {"retrieval_id": retrieval_id, "success": True}, call_id="report")]

    model = ScriptedModel([[function_call("retrieve_memories", {"situation": SITUATION}, call_id="retrieve")],
                           ModelStep.respond(remember_and_report), [assistant_message("Refunded.")]])
    outputs = run_agent(live_server, memory["key"], memory["bank"].slug, model)

    retrieval = json.loads(outputs["retrieve"])
    assert APPROVED_TEXT in retrieval["memories"] and PENDING_TEXT not in retrieval["memories"]
    assert retrieval["count"] == 1
    lesson = Orb.objects.get(bank=memory["bank"], outcome=LESSON)
    assert lesson.status == Orb.Status.PENDING and "waits for a human reviewer" in outputs["remember"]
    log = RetrievalLog.objects.get(pk=retrieval["retrieval_id"])
    assert log.outcome_success is True


def test_a_key_without_the_write_scope_gets_the_refusal_as_the_tools_output(live_server, memory):
    model = ScriptedModel([[function_call("remember_lesson", {"lesson": LESSON}, call_id="remember")],
                           [assistant_message("Could not remember.")]])
    outputs = run_agent(live_server, memory["read_only_key"], memory["bank"].slug, model)
    assert "memory:write" in outputs["remember"]
    assert not Orb.objects.filter(outcome=LESSON).exists()
