"""A fake OpenAI-compatible server on loopback, so the LLM layer is tested through the real `openai` SDK.

The server answers `POST /v1/chat/completions` from a queue of scripted replies (first in, first out)
and `POST /v1/embeddings` with deterministic unit vectors (a hash of each input; `float` or
`base64` encoding, as the SDK asks). Every request is recorded.

Fixture `fake_llm` (function-scoped) starts a server and yields it. Its methods:

Pointing roles at it
    use_for(*roles, model="fake-model", timeout=1.0, max_retries=2)
        Overrides those roles in `settings.LLM_ROLES` (via pytest-django's `settings`) so they talk
        to this server; other roles keep their configuration. Also makes retry backoff tiny.
    base_url                         "http://127.0.0.1:<port>/v1"

Scripting chat replies (each call queues one reply; extra keyword `usage=(tokens_in, tokens_out)`
overrides the default counts, which are the words of the request's messages and of the reply)
    reply_text(text)                 assistant message with plain content
    reply_tool_call(name, arguments, content=None)
                                     one tool call; `arguments` is a dict (sent as JSON) or a str
                                     (sent verbatim, e.g. malformed JSON)
    reply_tool_calls([(name, arguments), ...], content=None)
                                     several tool calls in one message
    reply_json(obj)                  content = json.dumps(obj)
    reply_malformed_json(text=...)   a valid completion whose content is not valid JSON
    reply_garbage(body=..., status=200, content_type="text/html")
                                     an HTTP body that is not a completion at all
    reply_slow(delay, text="...")    waits `delay` seconds, then answers with `text`
    fail(status, message=..., retry_after=None)
                                     an OpenAI-style error body with that HTTP status; `retry_after`
                                     (seconds) sets the Retry-After header
    enqueue(Scripted(...))           any hand-built reply (see `Scripted`)
    queued                           number of replies still waiting

When the queue is empty the server answers HTTP 500 "fake server: no scripted reply", so a test
that makes more calls than it scripted fails loudly (memweb's client retries a 500, so expect
max_retries + 1 such requests, then an LLMError). To answer every unscripted call instead:
    set_default_text(text) / set_default_json(obj)
    set_default(fn)                  fn(request_body: dict) -> Scripted, for replies that depend on
                                     the request; build them with text_reply / tool_call_reply /
                                     json_reply from this module

Acting like a local server (`act_like(name)`; the default is "openai")
    "openai"     honours max_tokens, tool calls, response_format json_schema; streams with usage
                 when asked (stream_options.include_usage)
    "llama_cpp"  like llama-cpp-python 0.3's server: leaves tools out of the prompt unless the
                 request names a tool_choice (so scripted tool calls come back as prose), answers
                 response_format json_schema with HTTP 500 (its request model rejects the type),
                 enforces {"type": "json_object", "schema": ...}, and streams without usage
    "ollama"     enforces json_schema and Ollama's `format` field
    A scripted reply's `unconstrained` message is what the model says when the request did not
    hand the server the schema in a form it enforces (reply_constrained(obj, unconstrained=...)).
    reply_runaway(token_delay)       a model that never stops by itself: it generates words until
                                     the request's max_tokens (finish_reason "length"), the
                                     context limit, or, streamed, until the client disconnects;
                                     `generations` records how each one ended and when
    streams = False                  answer stream requests with one plain JSON completion, as
                                     servers without streaming do
    Capability probes (schema titled PROBE_TITLE) are answered from the profile without touching
    the queue: a schema the server enforces yields its first enum values, others get prose.

Inspecting what the SDK sent
    requests                         every RecordedRequest(path, body, headers with lower-case names), in order
    chat_requests                    the JSON bodies of the chat calls (messages, tools, model, ...)
    last_chat                        the latest of those
"""
from __future__ import annotations

import base64
import collections
import dataclasses
import hashlib
import itertools
import json
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

NO_SCRIPT_MESSAGE = "fake server: no scripted reply"
PROBE_TITLE = "memweb_capability_probe"
CONTEXT_TOKENS = 2048
# What llama-cpp-python 0.3.36's server answers (HTTP 500) to an OpenAI json_schema response_format.
LLAMA_CPP_JSON_SCHEMA_ERROR = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
)
# llama.cpp turns a string's maxLength into one nested grammar rule per character; past a few
# hundred its grammar parser gives up and the streamed answer breaks off.
LLAMA_CPP_MAX_GRAMMAR_LENGTH = 200
CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
EMBEDDING_DIMENSION = 16


@dataclasses.dataclass
class Scripted:
    """One scripted answer: a chat `message`, or a verbatim `raw_body` (errors, garbage)."""

    message: dict | None = None
    status: int = 200
    raw_body: bytes | None = None
    content_type: str = "application/json"
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    delay: float = 0.0
    usage: tuple[int, int] | None = None
    finish_reason: str = "stop"
    unconstrained: dict | None = None  # the message when the server was not given the schema
    runaway_delay: float | None = None  # set: generate words forever, this many seconds apart
    broken: bool = False  # headers sent, then the connection closes before the body is complete


@dataclasses.dataclass(frozen=True)
class Profile:
    needs_tool_choice: bool  # tools reach the prompt only when the request names a tool_choice
    enforced: frozenset[str]  # the schema carriers whose schema the server enforces
    rejects_json_schema: bool
    reports_stream_usage: bool
    max_grammar_length: int | None = None  # longer length bounds in an enforced schema break the answer


PROFILES = {
    "openai": Profile(False, frozenset({"json_schema"}), False, True),
    "llama_cpp": Profile(True, frozenset({"json_object_schema"}), True, False, LLAMA_CPP_MAX_GRAMMAR_LENGTH),
    "ollama": Profile(False, frozenset({"json_schema", "ollama_format"}), False, True),
}


@dataclasses.dataclass
class Generation:
    """How one runaway generation ended: "length", "context" or "disconnect"."""

    tokens: int = 0
    ended: str = ""
    ended_at: float | None = None


@dataclasses.dataclass
class RecordedRequest:
    path: str
    body: dict | None
    headers: dict[str, str]


_call_ids = itertools.count(1)


def text_reply(text: str | None, **options) -> Scripted:
    return Scripted(message={"role": "assistant", "content": text}, **options)


def tool_call_reply(calls: list[tuple[str, dict | str]], content: str | None = None, **options) -> Scripted:
    tool_calls = [
        {
            "id": f"call_{next(_call_ids)}",
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
        }
        for name, args in calls
    ]
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls}
    return Scripted(message=message, finish_reason="tool_calls", **options)


def json_reply(obj, **options) -> Scripted:
    return text_reply(json.dumps(obj), **options)


def runaway_reply(token_delay: float = 0.01, **options) -> Scripted:
    return Scripted(message={"role": "assistant", "content": ""}, runaway_delay=token_delay, **options)


def error_reply(status: int, message: str, retry_after: float | None = None) -> Scripted:
    body = {"error": {"message": message, "type": "fake_error", "param": None, "code": str(status)}}
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    return Scripted(status=status, raw_body=json.dumps(body).encode(), headers=headers)


def _words(value) -> int:
    # A rough, deterministic token count: real tokenizers are not available offline.
    return len(str(value or "").split())


def _prompt_words(body: dict) -> int:
    return sum(_words(message.get("content")) for message in body.get("messages", []))


def _reply_words(message: dict) -> int:
    calls = message.get("tool_calls") or []
    return _words(message.get("content")) + sum(_words(call["function"]["arguments"]) for call in calls)


def schema_carriers(request: dict) -> dict[str, dict]:
    """Each form in which the request hands over a JSON schema, keyed by the JsonMode naming it."""
    carriers = {}
    response_format = request.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        carriers["json_schema"] = (response_format.get("json_schema") or {}).get("schema") or {}
    if response_format.get("type") == "json_object" and response_format.get("schema"):
        carriers["json_object_schema"] = response_format["schema"]
    if isinstance(request.get("format"), dict):
        carriers["ollama_format"] = request["format"]
    return carriers


def _longest_bound(schema) -> int:
    """The largest maxLength/maxItems anywhere in a JSON schema."""
    if isinstance(schema, dict):
        own = [v for k, v in schema.items() if k in ("maxLength", "maxItems") and isinstance(v, int)]
        return max([*own, *(_longest_bound(v) for v in schema.values())], default=0)
    if isinstance(schema, list):
        return max((_longest_bound(v) for v in schema), default=0)
    return 0


def probe_answer(schema: dict | None) -> Scripted:
    """A constrained decoder's answer to the probe schema (its first enum values), or prose."""
    if schema is None:
        return text_reply("Hello! How can I help you today?")
    return json_reply({name: spec["enum"][0] for name, spec in schema.get("properties", {}).items()})


def completion_body(reply: Scripted, request: dict) -> dict:
    """The JSON the OpenAI API returns for a non-streamed chat completion."""
    tokens_in, tokens_out = reply.usage or (_prompt_words(request), _reply_words(reply.message))
    return {
        "id": f"chatcmpl-fake-{next(_call_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake-model"),
        "choices": [{"index": 0, "message": reply.message, "finish_reason": reply.finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out},
    }


def _chunk(request: dict, delta: dict, finish_reason: str | None = None) -> dict:
    return {"id": "chatcmpl-fake-stream", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": request.get("model", "fake-model"),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}


def stream_chunks(reply: Scripted, request: dict) -> list[dict]:
    """The chunks a streaming server sends for one finished message: role, pieces, finish."""
    message = reply.message
    chunks = [_chunk(request, {"role": "assistant", "content": ""})]
    words = (message.get("content") or "").split(" ")
    chunks += [_chunk(request, {"content": w if i == 0 else " " + w}) for i, w in enumerate(words) if message.get("content")]
    for index, call in enumerate(message.get("tool_calls") or []):
        head = {"index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}
        arguments = call["function"]["arguments"]
        chunks.append(_chunk(request, {"tool_calls": [head]}))
        for start in range(0, len(arguments), 7):  # split mid-token on purpose, as servers do
            piece = {"index": index, "function": {"arguments": arguments[start:start + 7]}}
            chunks.append(_chunk(request, {"tool_calls": [piece]}))
    chunks.append(_chunk(request, {}, reply.finish_reason))
    return chunks


def usage_chunk(reply: Scripted, request: dict) -> dict:
    body = completion_body(reply, request)
    return {**_chunk(request, {}), "choices": [], "usage": body["usage"]}


def fake_embedding(text: str, dimension: int = EMBEDDING_DIMENSION) -> list[float]:
    """A unit vector derived from the text's hash: equal texts, equal vectors."""
    digest = hashlib.sha256(text.encode()).digest()
    raw = [(digest[i % len(digest)] - 127.5) for i in range(dimension)]
    norm = sum(v * v for v in raw) ** 0.5
    return [v / norm for v in raw]


def embeddings_body(request: dict) -> dict:
    inputs = request.get("input", [])
    inputs = [inputs] if isinstance(inputs, str) else inputs
    as_base64 = request.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(inputs):
        vector = fake_embedding(str(text))
        encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode() if as_base64 else vector
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(_words(text) for text in inputs)
    return {"object": "list", "data": data, "model": request.get("model", "fake-embedding"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 5  # idle keep-alive connections from cached clients must not pin threads forever
    server: _Server

    def do_POST(self):
        body = self._read_json()
        fake = self.server.fake
        fake.record(RecordedRequest(self.path, body, {k.lower(): v for k, v in self.headers.items()}))
        if self.path == CHAT_PATH:
            self._answer_chat(fake.answer_for(body or {}), body or {})
        elif self.path == EMBEDDINGS_PATH:
            self._send(200, json.dumps(embeddings_body(body or {})).encode())
        else:
            self._send(404, json.dumps({"error": {"message": f"fake server: no route {self.path}"}}).encode())

    def _read_json(self) -> dict | None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _answer_chat(self, reply: Scripted, request: dict) -> None:
        fake = self.server.fake
        # Waiting on the stop event lets the server shut down without sleeping out slow replies.
        if reply.delay and fake.stopping.wait(reply.delay):
            return
        if reply.broken:
            self._break_off()
            return
        streamed = bool(request.get("stream")) and fake.streams and reply.raw_body is None and reply.status == 200
        if reply.runaway_delay is not None:
            self._run_away(reply, request, streamed)
        elif streamed:
            self._stream(reply, request, stream_chunks(reply, request))
        else:
            payload = reply.raw_body if reply.raw_body is not None else json.dumps(completion_body(reply, request)).encode()
            self._send(reply.status, payload, reply.content_type, reply.headers)

    def _break_off(self) -> None:
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"10\r\ndata: {\"id\": \"")  # a chunk cut short; then the socket closes

    def _stream(self, reply: Scripted, request: dict, chunks: list[dict]) -> bool:
        """Send server-sent events; False when the client went away mid-stream."""
        return self._start_events() and self._finish_events(reply, request, chunks)

    def _start_events(self) -> bool:
        self.close_connection = True  # the end of the body is the end of the connection
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def _finish_events(self, reply: Scripted, request: dict, chunks: list[dict]) -> bool:
        if (request.get("stream_options") or {}).get("include_usage") and self.server.fake.profile.reports_stream_usage:
            chunks = [*chunks, usage_chunk(reply, request)]
        return all(self._write_event(chunk) for chunk in chunks) and self._write_raw(b"data: [DONE]\n\n")

    def _run_away(self, reply: Scripted, request: dict, streamed: bool) -> None:
        generation = Generation()
        self.server.fake.generations.append(generation)
        if streamed and not self._start_events():
            return
        words = self._generate(reply.runaway_delay, request, generation, streamed)
        if generation.ended == "disconnect":
            return
        generation.ended = "length" if request.get("max_tokens") else "context"
        finished = dataclasses.replace(reply, message={"role": "assistant", "content": " ".join(words)},
                                       finish_reason="length", runaway_delay=None)
        if streamed:
            self._finish_events(finished, request, [_chunk(request, {}, "length")])
        else:
            self._send(200, json.dumps(completion_body(finished, request)).encode())

    def _generate(self, delay: float, request: dict, generation: Generation, streamed: bool) -> list[str]:
        """Produce words one by one; streamed, each goes out at once, so a closed socket stops it."""
        limit, words = request.get("max_tokens") or CONTEXT_TOKENS, []
        while len(words) < limit and not self.server.fake.stopping.wait(delay):
            words.append(f"word{len(words)}")
            generation.tokens += 1
            if streamed and not self._write_event(_chunk(request, {"content": " " + words[-1]})):
                generation.ended = "disconnect"
                break
        generation.ended_at = time.monotonic()
        return words

    def _write_event(self, chunk: dict) -> bool:
        return self._write_raw(f"data: {json.dumps(chunk)}\n\n".encode())

    def _write_raw(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def _send(self, status: int, payload: bytes, content_type: str = "application/json", headers=None) -> bool:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            return False  # the client gave up (its timeout); nothing left to tell it
        return True

    def log_message(self, format, *args):
        pass  # keep test output clean


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeOpenAIServer


class FakeOpenAIServer:
    def __init__(self, settings=None):
        self._settings = settings  # pytest-django's `settings` fixture, for use_for()
        self._queue: collections.deque[Scripted] = collections.deque()
        self._lock = threading.Lock()
        self._default: Callable[[dict], Scripted] | None = None
        self.requests: list[RecordedRequest] = []
        self.generations: list[Generation] = []
        self.profile = PROFILES["openai"]
        self.streams = True
        self.stopping = threading.Event()
        self._httpd: _Server | None = None

    # --- lifecycle -------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="fake-openai", daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def act_like(self, name: str) -> None:
        self.profile = PROFILES[name]

    def use_for(self, *roles: str, model: str = "fake-model", timeout: float = 1.0, max_retries: int = 2,
                **config) -> None:
        """Point `roles` at this server for the current test (needs the `settings` fixture).

        Further RoleConfig fields (max_tokens, tool_choice, json_mode, stream) pass through; the
        JSON mode defaults to json_schema, so only tests about probing send probes."""
        config.setdefault("json_mode", "json_schema")
        overrides = {
            role: dataclasses.replace(
                self._settings.LLM_ROLES[role], base_url=self.base_url, api_key="fake-key",
                model=model, timeout=timeout, max_retries=max_retries, **config,
            )
            for role in roles
        }
        self._settings.LLM_ROLES = {**self._settings.LLM_ROLES, **overrides}
        # Real backoff waits seconds; tests only need to see that it happens.
        self._settings.LLM_BACKOFF_SECONDS = 0.01

    # --- the server side -------------------------------------------------
    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def answer_for(self, request: dict) -> Scripted:
        """The reply as this kind of server would give it to this request."""
        carriers = schema_carriers(request)
        if self.profile.rejects_json_schema and "json_schema" in carriers:
            return error_reply(500, LLAMA_CPP_JSON_SCHEMA_ERROR)
        enforced = next((schema for mode, schema in carriers.items() if mode in self.profile.enforced), None)
        if any(schema.get("title") == PROBE_TITLE for schema in carriers.values()):
            return probe_answer(enforced)
        if enforced is not None and _longest_bound(enforced) > (self.profile.max_grammar_length or float("inf")):
            return Scripted(raw_body=b"", broken=True)
        return self._as_the_model_sees_it(self.next_reply(request), request, enforced)

    def _as_the_model_sees_it(self, reply: Scripted, request: dict, enforced: dict | None) -> Scripted:
        if reply.unconstrained is not None and enforced is None:
            return dataclasses.replace(reply, message=reply.unconstrained, unconstrained=None)
        tools_dropped = self.profile.needs_tool_choice and request.get("tool_choice") in (None, "none")
        if tools_dropped and reply.message and reply.message.get("tool_calls"):
            # The model never saw the tools, so it can only talk.
            return text_reply(reply.message.get("content") or "Let me look into that for you.")
        return reply

    def next_reply(self, request: dict) -> Scripted:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self._default is not None:
            return self._default(request)
        return error_reply(500, NO_SCRIPT_MESSAGE)

    # --- scripting ------------------------------------------------------
    def enqueue(self, reply: Scripted) -> None:
        with self._lock:
            self._queue.append(reply)

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._queue)

    def reply_text(self, text: str, **options) -> None:
        self.enqueue(text_reply(text, **options))

    def reply_tool_call(self, name: str, arguments: dict | str, content: str | None = None, **options) -> None:
        self.enqueue(tool_call_reply([(name, arguments)], content, **options))

    def reply_tool_calls(self, calls: list[tuple[str, dict | str]], content: str | None = None, **options) -> None:
        self.enqueue(tool_call_reply(calls, content, **options))

    def reply_json(self, obj, **options) -> None:
        self.enqueue(json_reply(obj, **options))

    def reply_malformed_json(self, text: str = '{"answer": "unterminated', **options) -> None:
        self.enqueue(text_reply(text, **options))

    def reply_garbage(self, body: str = "<html>502 Bad Gateway</html>", status: int = 200,
                      content_type: str = "text/html") -> None:
        self.enqueue(Scripted(status=status, raw_body=body.encode(), content_type=content_type))

    def reply_constrained(self, obj, unconstrained: str, **options) -> None:
        message = {"role": "assistant", "content": unconstrained}
        self.enqueue(json_reply(obj, unconstrained=message, **options))

    def reply_runaway(self, token_delay: float = 0.01, **options) -> None:
        self.enqueue(runaway_reply(token_delay, **options))

    def reply_slow(self, delay: float, text: str = "slow answer", **options) -> None:
        self.enqueue(text_reply(text, delay=delay, **options))

    def fail(self, status: int, message: str = "", retry_after: float | None = None) -> None:
        self.enqueue(error_reply(status, message or f"fake server: scripted HTTP {status}", retry_after))

    def set_default(self, respond: Callable[[dict], Scripted] | None) -> None:
        self._default = respond

    def set_default_text(self, text: str) -> None:
        self.set_default(lambda request: text_reply(text))

    def set_default_json(self, obj) -> None:
        self.set_default(lambda request: json_reply(obj))

    # --- inspecting -----------------------------------------------------
    @property
    def chat_requests(self) -> list[dict]:
        with self._lock:
            return [r.body for r in self.requests if r.path == CHAT_PATH]

    @property
    def last_chat(self) -> dict:
        return self.chat_requests[-1]


@pytest.fixture
def fake_llm(settings):
    server = FakeOpenAIServer(settings).start()
    yield server
    server.stop()
