"""The fake OpenAI-compatible server itself, spoken to with the plain openai SDK."""
import array
import base64
import time

import openai
import pytest

from tests.fakes.openai_server import NO_SCRIPT_MESSAGE, FakeOpenAIServer, fake_llm, text_reply  # noqa: F401

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def sdk(fake_llm):
    return openai.OpenAI(base_url=fake_llm.base_url, api_key="k", max_retries=0, timeout=2)


def test_it_fails_loudly_when_nothing_is_scripted(sdk):
    with pytest.raises(openai.InternalServerError, match=NO_SCRIPT_MESSAGE):
        sdk.chat.completions.create(model="m", messages=HELLO)


def test_it_answers_from_a_default_once_the_queue_is_empty(fake_llm, sdk):
    fake_llm.reply_text("scripted")
    fake_llm.set_default(lambda request: text_reply(f"echo {request['messages'][-1]['content']}"))
    answers = [sdk.chat.completions.create(model="m", messages=HELLO).choices[0].message.content for _ in range(2)]
    assert answers == ["scripted", "echo hello"]
    assert fake_llm.queued == 0


def test_it_records_every_request(fake_llm, sdk):
    fake_llm.reply_text("ok")
    sdk.chat.completions.create(model="m", messages=HELLO, temperature=0.3)
    assert fake_llm.last_chat == {"model": "m", "messages": HELLO, "temperature": 0.3}
    assert fake_llm.requests[0].path == "/v1/chat/completions"
    assert fake_llm.requests[0].headers["authorization"] == "Bearer k"


def vectors(response) -> list[list[float]]:
    # The SDK leaves base64 undecoded only when the caller asked for it explicitly.
    return [
        list(array.array("f", base64.b64decode(item.embedding))) if isinstance(item.embedding, str) else item.embedding
        for item in response.data
    ]


@pytest.mark.parametrize("encoding", ["float", "base64", None])
def test_it_serves_deterministic_unit_embeddings(sdk, encoding):
    options = {"encoding_format": encoding} if encoding else {}
    red, blue = vectors(sdk.embeddings.create(model="e", input=["red shoes", "blue kettle"], **options))
    (red_again,) = vectors(sdk.embeddings.create(model="e", input="red shoes", **options))
    assert red == pytest.approx(red_again)
    assert red != pytest.approx(blue)
    assert sum(v * v for v in red) == pytest.approx(1.0)


def test_it_stops_without_waiting_out_slow_replies():
    server = FakeOpenAIServer().start()
    server.reply_slow(30)
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=0.2)
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="m", messages=HELLO)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2


def test_it_streams_text_and_tool_calls_with_usage_when_asked(fake_llm, sdk):
    fake_llm.reply_tool_call("lookup", {"order_id": "O12345"}, content="Checking.", usage=(5, 2))
    chunks = list(sdk.chat.completions.create(model="m", messages=HELLO, stream=True,
                                              stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    arguments = "".join(c.choices[0].delta.tool_calls[0].function.arguments or ""
                        for c in chunks if c.choices and c.choices[0].delta.tool_calls)
    assert (text, arguments) == ("Checking.", '{"order_id": "O12345"}')
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (5, 2)


def test_it_acts_like_llama_cpp(fake_llm, sdk):
    fake_llm.act_like("llama_cpp")
    fake_llm.reply_tool_call("lookup", {})
    fake_llm.set_default_text("hi")
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    dropped = sdk.chat.completions.create(model="m", messages=HELLO, tools=tools).choices[0].message
    assert dropped.tool_calls is None and dropped.content
    with pytest.raises(openai.InternalServerError, match="response_format"):
        sdk.chat.completions.create(model="m", messages=HELLO, response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}})
    chunks = list(sdk.chat.completions.create(model="m", messages=HELLO, stream=True,
                                              stream_options={"include_usage": True}))
    assert all(chunk.usage is None for chunk in chunks)  # it streams no usage


def test_it_generates_a_runaway_answer_up_to_max_tokens_or_the_context(fake_llm, sdk):
    fake_llm.reply_runaway(token_delay=0.001)
    capped = sdk.chat.completions.create(model="m", messages=HELLO, max_tokens=3).choices[0]
    assert (capped.message.content, capped.finish_reason) == ("word0 word1 word2", "length")
    assert (fake_llm.generations[0].tokens, fake_llm.generations[0].ended) == (3, "length")
