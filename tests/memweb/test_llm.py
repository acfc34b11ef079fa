"""The LLM layer through the real openai SDK, against the fake OpenAI-compatible server."""
import dataclasses
import socket
import time
from email.utils import formatdate

import pytest
from pydantic import BaseModel

from memweb.llm import LLMError, llm_chat, llm_json, role_config, role_statuses
from memweb.llm.client import backoff_delay, parse_tool_arguments, retry_after_seconds
from memweb.llm.repair import repair_json_text
from memweb.models import LLMCall
from tests.fakes.openai_server import fake_llm  # noqa: F401  (until tests/conftest.py registers it)

pytestmark = pytest.mark.django_db

ASK = [{"role": "user", "content": "Where is order 42?"}]
TOOLS = [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]


class Verdict(BaseModel):
    answer: str
    score: int


@pytest.fixture
def reflector(fake_llm):
    fake_llm.use_for("reflector")
    return fake_llm


def only_call() -> LLMCall:
    (call,) = LLMCall.objects.all()
    return call


def test_it_returns_text_and_logs_the_call(reflector):
    reflector.reply_text("It ships tomorrow.", usage=(12, 4))
    reply = llm_chat(role="reflector", messages=ASK)
    assert (reply.content, reply.tool_calls, reply.tokens_in, reply.tokens_out) == ("It ships tomorrow.", [], 12, 4)
    call = only_call()
    assert call.pk == reply.call_id
    assert (call.role, call.model, call.base_url) == ("reflector", "fake-model", reflector.base_url)
    assert (call.status, call.attempts, call.tokens_in, call.tokens_out, call.error) == ("ok", 1, 12, 4, "")
    assert call.latency_ms >= 0
    sent = reflector.last_chat
    assert sent["messages"] == ASK
    assert (sent["model"], sent["temperature"]) == ("fake-model", role_config("reflector").temperature)


def test_it_parses_tool_calls_and_keeps_malformed_arguments_as_errors(reflector):
    reflector.reply_tool_calls([("lookup_order", {"order_id": "42"}), ("lookup_order", '{"order_id": ')])
    reply = llm_chat(role="reflector", messages=ASK, tools=TOOLS, tool_choice="lookup_order")
    good, bad = reply.tool_calls
    assert (good.name, good.arguments, good.argument_error) == ("lookup_order", {"order_id": "42"}, "")
    assert bad.arguments is None and bad.raw_arguments == '{"order_id": '
    assert "not valid JSON" in bad.argument_error
    assert reflector.last_chat["tools"] == TOOLS
    assert reflector.last_chat["tool_choice"] == {"type": "function", "function": {"name": "lookup_order"}}
    assert reply.as_message()["tool_calls"][1]["function"]["arguments"] == '{"order_id": '


@pytest.mark.parametrize(
    ("raw", "arguments", "error_part"),
    [("", {}, ""), ('{"a": 1}', {"a": 1}, ""), ("[1, 2]", None, "JSON object"), ("{'a': 1}", None, "not valid JSON")],
)
def test_it_parses_tool_arguments(raw, arguments, error_part):
    parsed, error = parse_tool_arguments(raw)
    assert parsed == arguments
    assert error_part in error and bool(error) == bool(error_part)


def test_it_validates_json_against_the_schema(reflector):
    reflector.reply_json({"answer": "refund", "score": 4})
    assert llm_json(role="reflector", messages=ASK, schema=Verdict) == Verdict(answer="refund", score=4)
    sent = reflector.last_chat
    assert sent["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "Verdict", "schema": Verdict.model_json_schema()}}
    assert sent["messages"][0]["role"] == "system" and '"score"' in sent["messages"][0]["content"]
    assert sent["messages"][1:] == ASK
    assert only_call().status == "ok"


def test_it_merges_the_schema_into_an_existing_system_message(reflector):
    reflector.reply_json({"answer": "a", "score": 1})
    llm_json(role="reflector", messages=[{"role": "system", "content": "Be brief."}, *ASK], schema=Verdict)
    system, *rest = reflector.last_chat["messages"]
    assert system["content"].startswith("Be brief.") and "JSON Schema" in system["content"]
    assert rest == ASK


def test_it_repairs_json_locally_without_asking_again(reflector):
    reflector.reply_text('Sure!\n```json\n{"answer": "refund", "score": 4,}\n```')
    assert llm_json(role="reflector", messages=ASK, schema=Verdict).score == 4
    assert len(reflector.chat_requests) == 1
    assert only_call().status == "repaired"


def test_it_repairs_json_by_one_round_trip_naming_the_error(reflector):
    reflector.reply_json({"answer": "refund"}, usage=(10, 3))
    reflector.reply_json({"answer": "refund", "score": 2}, usage=(20, 5))
    assert llm_json(role="reflector", messages=ASK, schema=Verdict).score == 2
    first, second = reflector.chat_requests
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert second["messages"][-2] == {"role": "assistant", "content": '{"answer": "refund"}'}
    assert "score: Field required" in second["messages"][-1]["content"]
    call = only_call()
    assert (call.status, call.attempts, call.tokens_in, call.tokens_out) == ("repaired", 2, 30, 8)


def test_it_raises_when_the_repair_round_fails_too(reflector):
    reflector.reply_malformed_json()
    reflector.reply_json({"answer": "refund", "score": "high"})
    with pytest.raises(LLMError) as raised:
        llm_json(role="reflector", messages=ASK, schema=Verdict)
    message = str(raised.value)
    assert "'reflector'" in message and "'fake-model'" in message and "score" in message
    assert "not valid JSON" in reflector.chat_requests[1]["messages"][-1]["content"]
    call = only_call()
    assert (call.status, call.attempts) == ("error", 2)
    assert "score" in call.error


def test_it_retries_after_429_honouring_retry_after(reflector):
    reflector.fail(429, "slow down", retry_after=0.3)
    reflector.reply_text("done")
    started = time.monotonic()
    assert llm_chat(role="reflector", messages=ASK).content == "done"
    assert time.monotonic() - started >= 0.3
    assert (only_call().status, only_call().attempts) == ("ok", 2)


def test_it_gives_up_on_5xx_after_its_retries_and_logs_the_error(reflector):
    for _ in range(3):
        reflector.fail(500, "upstream exploded")
    with pytest.raises(LLMError, match=r"HTTP 500.*upstream exploded.*attempt 3 of 3"):
        llm_chat(role="reflector", messages=ASK)
    assert len(reflector.chat_requests) == 3
    call = only_call()
    assert (call.status, call.attempts) == ("error", 3)
    assert "upstream exploded" in call.error


@pytest.mark.parametrize("content_type", ["text/html", "application/json"])
def test_it_retries_a_body_that_is_not_a_completion(reflector, content_type):
    reflector.reply_garbage("<html>bad gateway</html>", content_type=content_type)
    reflector.reply_text("recovered")
    assert llm_chat(role="reflector", messages=ASK).content == "recovered"
    assert only_call().attempts == 2


def test_it_fails_when_every_body_is_garbage(reflector):
    for _ in range(3):
        reflector.reply_garbage()
    with pytest.raises(LLMError, match="not a chat completion"):
        llm_chat(role="reflector", messages=ASK)


def test_it_times_out_slow_answers_retries_then_fails(fake_llm):
    fake_llm.use_for("reflector", timeout=0.2, max_retries=1)
    fake_llm.reply_slow(2.0)
    fake_llm.reply_slow(2.0)
    with pytest.raises(LLMError, match=r"no answer within 0.2 s \(attempt 2 of 2\)"):
        llm_chat(role="reflector", messages=ASK)
    assert (only_call().status, only_call().attempts) == ("error", 2)


def test_it_fails_at_once_on_a_non_retryable_4xx(reflector):
    reflector.fail(400, "bad request: unknown parameter")
    with pytest.raises(LLMError, match=r"HTTP 400.*attempt 1 of 3"):
        llm_chat(role="reflector", messages=ASK)
    assert len(reflector.chat_requests) == 1
    assert only_call().attempts == 1


def test_it_retries_connection_errors(fake_llm, settings):
    fake_llm.use_for("reflector", max_retries=1)
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    config = dataclasses.replace(settings.LLM_ROLES["reflector"], base_url=f"http://127.0.0.1:{closed_port}/v1")
    settings.LLM_ROLES = {**settings.LLM_ROLES, "reflector": config}
    with pytest.raises(LLMError, match="connection failed"):
        llm_chat(role="reflector", messages=ASK)
    assert only_call().attempts == 2


def test_it_refuses_offline_roles_without_sending_anything(fake_llm, settings):
    settings.LLM_ROLES = {**settings.LLM_ROLES, "actor": dataclasses.replace(role_config("actor"), base_url="")}
    assert role_config("actor").is_offline
    with pytest.raises(LLMError, match="'actor'.*no endpoint configured; use its offline backend"):
        llm_chat(role="actor", messages=ASK)
    with pytest.raises(LLMError, match="offline backend"):
        llm_json(role="actor", messages=ASK, schema=Verdict)
    assert not LLMCall.objects.exists()


def test_it_rejects_unknown_roles_listing_the_known_ones():
    # The roles the apps declare, in app order (orbs' then evaluation's: memweb.registry.llm_roles).
    with pytest.raises(ValueError, match="unknown LLM role 'critic'; known roles: reflector, rewriter, actor, "
                                         "user_simulator, scorer$"):
        role_config("critic")


def test_it_reports_each_role_status(reflector, settings):
    settings.LLM_ROLES = {**settings.LLM_ROLES, "actor": dataclasses.replace(role_config("actor"), base_url="")}
    reflector.fail(400)
    with pytest.raises(LLMError):
        llm_chat(role="reflector", messages=ASK)
    reflector.reply_text("fine")
    llm_chat(role="reflector", messages=ASK)
    statuses = {row["role"]: row for row in role_statuses()}
    assert set(statuses) == set(settings.LLM_ROLES)
    online, offline = statuses["reflector"], statuses["actor"]
    assert (online["offline"], online["model"], online["base_url"], online["last_status"]) == (
        False, "fake-model", reflector.base_url, "ok")
    assert online["last_at"] is not None
    assert (offline["offline"], offline["backend"], offline["last_status"]) == (True, "offline (scripted)", None)


def test_it_backs_off_exponentially_with_jitter_up_to_a_cap(settings):
    settings.LLM_BACKOFF_SECONDS = 1.0
    settings.LLM_BACKOFF_MAX_SECONDS = 5.0
    for attempt, step in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        delays = [backoff_delay(attempt) for _ in range(50)]
        assert all(step / 2 <= d <= step for d in delays)
        assert len(set(delays)) > 1
    assert backoff_delay(1, retry_after=3.0) == 3.0
    assert backoff_delay(1, retry_after=60.0) == 5.0


def test_it_reads_retry_after_headers():
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert 8 <= retry_after_seconds({"retry-after": formatdate(time.time() + 10, usegmt=True)}) <= 10
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


@pytest.mark.parametrize(
    ("text", "repaired"),
    [
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ('Here you go: {"a": [1, 2,], "b": {"c": 3,},} Hope it helps.', '{"a": [1, 2], "b": {"c": 3}}'),
        ('{"a": 1}', '{"a": 1}'),
    ],
)
def test_it_repairs_common_json_slips(text, repaired):
    assert repair_json_text(text) == repaired
