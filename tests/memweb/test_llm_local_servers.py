"""The LLM client against servers that act like the local ones (llama-cpp-python, Ollama).

Each of the four mistakes issue 21 found against a real llama-cpp-python server has a test here
that failed on the client as it was: tools sent without tool_choice, no max_tokens and no way to
stop a runaway generation, the schema only in the prompt, and (in tests/evaluation) the scripted
customer thanking a silent agent.
"""
import json
import time

import pytest
from pydantic import BaseModel, Field

from memweb.llm import LLMError, llm_chat, llm_json, role_statuses
from memweb.models import LLMCall
from tests.fakes.openai_server import fake_llm  # noqa: F401

pytestmark = pytest.mark.django_db

ASK = [{"role": "user", "content": "Where is order 42?"}]
TOOLS = [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]
PROSE = "Sure! The answer is a refund, and I would give it a four."


class Verdict(BaseModel):
    answer: str
    score: int


@pytest.fixture
def llama_cpp(fake_llm):
    fake_llm.act_like("llama_cpp")
    return fake_llm


def wait_for(predicate, timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


# --- 1. tool_choice ---------------------------------------------------------------------------

def test_it_sends_tool_choice_auto_so_a_llama_cpp_server_offers_the_tools(llama_cpp):
    llama_cpp.use_for("actor")
    llama_cpp.reply_tool_call("lookup_order", {"order_id": "42"})
    reply = llm_chat(role="actor", messages=ASK, tools=TOOLS)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("lookup_order", {"order_id": "42"})]
    assert llama_cpp.last_chat["tool_choice"] == "auto"


@pytest.mark.parametrize(("setting", "sent"), [("required", "required"), ("omit", None)])
def test_it_sends_the_roles_configured_tool_choice(fake_llm, setting, sent):
    fake_llm.use_for("actor", tool_choice=setting)
    fake_llm.reply_text("fine")
    llm_chat(role="actor", messages=ASK, tools=TOOLS)
    assert fake_llm.last_chat.get("tool_choice") == sent


def test_it_sends_no_tool_choice_without_tools(fake_llm):
    fake_llm.use_for("actor")
    fake_llm.reply_text("fine")
    llm_chat(role="actor", messages=ASK)
    assert "tool_choice" not in fake_llm.last_chat and "tools" not in fake_llm.last_chat


# --- 2. max_tokens and stopping generation ---------------------------------------------------

def test_it_caps_every_call_with_the_roles_max_tokens(fake_llm):
    fake_llm.use_for("reflector", max_tokens=5)
    fake_llm.reply_runaway()
    reply = llm_chat(role="reflector", messages=ASK)
    assert fake_llm.last_chat["max_tokens"] == 5
    assert len(reply.content.split()) == 5 and fake_llm.generations[0].ended == "length"


def test_it_takes_a_per_call_max_tokens_over_the_roles(fake_llm):
    fake_llm.use_for("reflector", max_tokens=5)
    fake_llm.reply_json({"answer": "a", "score": 1})
    llm_json(role="reflector", messages=ASK, schema=Verdict, max_tokens=64)
    assert fake_llm.last_chat["max_tokens"] == 64


def test_it_stops_the_servers_generation_when_the_client_times_out(fake_llm):
    fake_llm.use_for("reflector", timeout=0.5, max_retries=0, max_tokens=100_000)
    fake_llm.reply_runaway(token_delay=0.01)
    with pytest.raises(LLMError, match=r"no answer within 0.5 s"):
        llm_chat(role="reflector", messages=ASK)
    gave_up = time.monotonic()
    # Streamed, the server notices the closed connection at its next token and stops there.
    assert wait_for(lambda: fake_llm.generations[0].ended_at is not None)
    generation = fake_llm.generations[0]
    assert generation.ended == "disconnect" and generation.ended_at - gave_up < 1.0


def test_it_logs_usage_that_a_stream_reports(fake_llm):
    fake_llm.use_for("reflector")
    fake_llm.reply_text("It ships tomorrow.", usage=(12, 4))
    llm_chat(role="reflector", messages=ASK)
    assert fake_llm.last_chat["stream"] is True
    assert fake_llm.last_chat["stream_options"] == {"include_usage": True}
    assert (LLMCall.objects.get().tokens_in, LLMCall.objects.get().tokens_out) == (12, 4)


def test_it_estimates_tokens_when_the_server_reports_no_usage(llama_cpp):
    llama_cpp.use_for("reflector")
    llama_cpp.reply_text("It ships tomorrow, in the morning.")
    reply = llm_chat(role="reflector", messages=ASK)
    assert reply.tokens_in > 0 and reply.tokens_out > 0


def test_it_reads_a_plain_completion_from_a_server_that_does_not_stream(fake_llm):
    fake_llm.use_for("reflector")
    fake_llm.streams = False
    fake_llm.reply_tool_call("lookup_order", {"order_id": "42"}, usage=(7, 3))
    reply = llm_chat(role="reflector", messages=ASK, tools=TOOLS)
    assert (reply.tool_calls[0].arguments, reply.tokens_in, reply.tokens_out) == ({"order_id": "42"}, 7, 3)
    assert _status("reflector")["capabilities"]["streaming"] is False


def test_it_can_be_told_not_to_stream(fake_llm):
    fake_llm.use_for("reflector", stream=False)
    fake_llm.reply_text("plain")
    assert llm_chat(role="reflector", messages=ASK).content == "plain"
    assert "stream" not in fake_llm.last_chat


# --- 3. the schema handed to the server --------------------------------------------------------

def test_it_probes_a_llama_cpp_server_and_hands_it_the_schema(llama_cpp):
    llama_cpp.use_for("reflector", json_mode="auto")
    llama_cpp.reply_constrained({"answer": "refund", "score": 4}, unconstrained=PROSE)
    assert llm_json(role="reflector", messages=ASK, schema=Verdict) == Verdict(answer="refund", score=4)
    assert llama_cpp.last_chat["response_format"] == {"type": "json_object", "schema": Verdict.model_json_schema()}
    capabilities = _status("reflector")["capabilities"]
    assert capabilities["json_mode"] == "json_object_schema" and capabilities["probed_at"]


def test_it_probes_once_per_endpoint(llama_cpp):
    llama_cpp.use_for("reflector", "rewriter", json_mode="auto")
    for _ in range(3):
        llama_cpp.reply_constrained({"answer": "a", "score": 1}, unconstrained=PROSE)
    for role in ("reflector", "rewriter", "reflector"):
        llm_json(role=role, messages=ASK, schema=Verdict)
    # Two probe requests (json_schema refused, then json_object with a schema), then three calls.
    assert len(llama_cpp.chat_requests) == 5


def test_it_falls_back_at_once_when_json_schema_gets_a_500_and_remembers(llama_cpp):
    llama_cpp.use_for("reflector", json_mode="json_schema", max_retries=3)
    llama_cpp.reply_constrained({"answer": "refund", "score": 4}, unconstrained=PROSE)
    llama_cpp.reply_constrained({"answer": "again", "score": 5}, unconstrained=PROSE)
    assert llm_json(role="reflector", messages=ASK, schema=Verdict).score == 4
    first, second = llama_cpp.chat_requests
    assert first["response_format"]["type"] == "json_schema"
    assert second["response_format"] == {"type": "json_object", "schema": Verdict.model_json_schema()}
    assert llm_json(role="reflector", messages=ASK, schema=Verdict).score == 5
    assert len(llama_cpp.chat_requests) == 3 and llama_cpp.last_chat["response_format"]["type"] == "json_object"
    assert [call.attempts for call in LLMCall.objects.order_by("pk")] == [2, 1]


class LongAnswer(BaseModel):
    query: str = Field(min_length=1, max_length=2000)


def test_it_leaves_length_bounds_out_of_the_schema_a_grammar_server_gets(llama_cpp):
    # Found against the real server: llama.cpp could not build a grammar for max_length=2000 and
    # broke off every answer, so the rewriter never got one.
    llama_cpp.use_for("rewriter", json_mode="json_object_schema")
    llama_cpp.reply_constrained({"query": "tumble dryer delivery date"}, unconstrained=PROSE)
    assert llm_json(role="rewriter", messages=ASK, schema=LongAnswer).query == "tumble dryer delivery date"
    sent = llama_cpp.last_chat["response_format"]["schema"]
    assert "maxLength" not in json.dumps(sent) and sent["properties"]["query"]["minLength"] == 1


def test_it_still_validates_the_length_bounds_itself(fake_llm):
    fake_llm.use_for("rewriter")
    fake_llm.reply_json({"query": "x" * 2001})
    fake_llm.reply_json({"query": "short"})
    assert llm_json(role="rewriter", messages=ASK, schema=LongAnswer).query == "short"


def test_it_still_retries_a_500_that_is_not_about_the_format(fake_llm):
    fake_llm.use_for("reflector", json_mode="json_schema")
    fake_llm.fail(500, "upstream exploded")
    fake_llm.reply_json({"answer": "a", "score": 1})
    llm_json(role="reflector", messages=ASK, schema=Verdict)
    assert [r["response_format"]["type"] for r in fake_llm.chat_requests] == ["json_schema", "json_schema"]


def test_it_sends_the_openai_json_schema_form(fake_llm):
    fake_llm.use_for("reflector", json_mode="auto")
    fake_llm.reply_constrained({"answer": "a", "score": 1}, unconstrained=PROSE)
    llm_json(role="reflector", messages=ASK, schema=Verdict)
    assert fake_llm.last_chat["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "Verdict", "schema": Verdict.model_json_schema()}}
    assert _status("reflector")["capabilities"]["json_mode"] == "json_schema"


def test_it_sends_ollamas_format_field_when_told_to(fake_llm):
    fake_llm.act_like("ollama")
    fake_llm.use_for("reflector", json_mode="ollama_format")
    fake_llm.reply_constrained({"answer": "a", "score": 1}, unconstrained=PROSE)
    assert llm_json(role="reflector", messages=ASK, schema=Verdict).score == 1
    assert fake_llm.last_chat["format"] == Verdict.model_json_schema()
    assert "response_format" not in fake_llm.last_chat


def test_it_keeps_the_schema_in_the_prompt_in_every_mode(fake_llm):
    fake_llm.use_for("reflector", json_mode="prompt_only")
    fake_llm.reply_json({"answer": "a", "score": 1})
    llm_json(role="reflector", messages=ASK, schema=Verdict)
    assert "response_format" not in fake_llm.last_chat
    assert '"score"' in fake_llm.last_chat["messages"][0]["content"]


# --- what the health page shows ------------------------------------------------------------------

def _status(role: str) -> dict:
    return next(row for row in role_statuses() if row["role"] == role)


def test_it_records_the_reported_model_tools_and_the_last_error(fake_llm):
    fake_llm.use_for("actor", model="served-model")
    fake_llm.reply_tool_call("lookup_order", {"order_id": "42"})
    llm_chat(role="actor", messages=ASK, tools=TOOLS)
    fake_llm.fail(400, "context too long")
    with pytest.raises(LLMError):
        llm_chat(role="actor", messages=ASK)
    fake_llm.reply_text("fine")
    llm_chat(role="actor", messages=ASK)
    status = _status("actor")
    assert status["capabilities"]["reported_model"] == "served-model"
    assert (status["capabilities"]["tools"], status["capabilities"]["streaming"]) == (True, True)
    assert status["last_status"] == "ok" and "context too long" in status["last_error"]
    assert status["last_error_at"] is not None


# --- configuration -----------------------------------------------------------------------------

def test_it_reads_max_tokens_per_role_then_shared_then_the_roles_default(monkeypatch):
    from memweb.llm.config import read_role_config
    from orbs.vocabulary import OrbsLLMRole

    assert read_role_config("rewriter").max_tokens == OrbsLLMRole.REWRITER.max_tokens
    monkeypatch.setenv("MEMWEB_LLM_MAX_TOKENS", "300")
    monkeypatch.setenv("MEMWEB_LLM_ACTOR_MAX_TOKENS", "900")
    assert (read_role_config("actor").max_tokens, read_role_config("scorer").max_tokens) == (900, 300)


def test_it_reads_tool_choice_json_mode_and_stream(monkeypatch):
    from memweb.llm.config import read_role_config

    monkeypatch.setenv("MEMWEB_LLM_JSON_MODE", "json_object_schema")
    monkeypatch.setenv("MEMWEB_LLM_REFLECTOR_JSON_MODE", "Ollama_Format")
    monkeypatch.setenv("MEMWEB_LLM_ACTOR_TOOL_CHOICE", "required")
    monkeypatch.setenv("MEMWEB_LLM_STREAM", "false")
    reflector, actor = read_role_config("reflector"), read_role_config("actor")
    assert (reflector.json_mode, actor.json_mode, actor.tool_choice, actor.stream) == (
        "ollama_format", "json_object_schema", "required", False)


@pytest.mark.parametrize(("name", "value"), [("MEMWEB_LLM_SCORER_JSON_MODE", "xml"),
                                             ("MEMWEB_LLM_TOOL_CHOICE", "sometimes"),
                                             ("MEMWEB_LLM_MAX_TOKENS", "0")])
def test_it_refuses_bad_values_naming_the_variable(monkeypatch, name, value):
    from django.core.exceptions import ImproperlyConfigured

    from memweb.llm.config import read_role_config

    monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=name):
        read_role_config("scorer")
