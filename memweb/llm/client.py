"""Chat and JSON calls to each role's OpenAI-compatible endpoint, with retries and a call log.

The SDK's own retries are off: our loop retries instead, so every attempt is counted in the
LLMCall row and the backoff policy (429, 5xx, timeouts, connection errors, unreadable bodies)
is one place to read.
"""
import email.utils
import functools
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import openai
from django.conf import settings
from django.utils import timezone
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from memweb.llm.answer import Answer, StreamAssembler, answer_from_completion, estimated_usage
from memweb.llm.capabilities import capabilities_note, capabilities_read
from memweb.llm.config import JsonMode, RoleConfig, ToolChoice
from memweb.llm.repair import InvalidJSON, load_json, parse_model
from memweb.llm.structured import (
    FALLBACK,
    PROBE_SCHEMA,
    PROBE_TITLE,
    PROBE_VALUE,
    next_mode,
    refuses_format,
    server_schema,
    structured_params,
)
from memweb.llm.trace import llm_trace_current
from memweb.models import LLMCall

logger = logging.getLogger(__name__)

_NAMED_TOOL_CHOICES = ("auto", "none", "required")
REPAIR_PROMPT = (
    "Your previous answer could not be used: {error}. "
    "Reply again with only the corrected JSON object, no prose and no code fences."
)


class LLMError(Exception):
    """An LLM call that failed for good; the message names role, model and cause."""

    def __init__(self, *, role: str, model: str, cause: str):
        self.role, self.model, self.cause = role, model, cause
        super().__init__(f"LLM role {role!r} (model {model!r}): {cause}")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict | None  # None when the model's arguments were unusable; see argument_error
    raw_arguments: str
    argument_error: str = ""


@dataclass(frozen=True)
class ChatReply:
    content: str | None
    tool_calls: list[ToolCall]
    tokens_in: int
    tokens_out: int
    call_id: int

    def as_message(self) -> dict:
        """The assistant message to append to the conversation before the tool results."""
        message: dict = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments}}
                for c in self.tool_calls
            ]
        return message


# --- roles ---------------------------------------------------------------

def role_config(role: str) -> RoleConfig:
    try:
        return settings.LLM_ROLES[role]
    except KeyError:
        raise ValueError(f"unknown LLM role {role!r}; known roles: {', '.join(settings.LLM_ROLES)}") from None


def _online_config(role: str) -> RoleConfig:
    config = role_config(role)
    if config.is_offline:
        raise LLMError(role=role, model=config.model, cause="no endpoint configured; use its offline backend")
    return config


def role_statuses() -> list[dict]:
    """One row per role for the health page: where it points and how its last call went."""
    return [_role_status(config) for config in settings.LLM_ROLES.values()]


def _role_status(config: RoleConfig) -> dict:
    calls = LLMCall.objects.filter(role=config.role).order_by("-created_at", "-pk")
    last, failed = calls.first(), calls.filter(status=LLMCall.Status.ERROR).first()
    online = not config.is_offline
    return {
        "role": config.role,
        "offline": config.is_offline,
        "backend": config.backend_label,
        "model": config.model if online else "",
        "base_url": config.base_url,
        "json_mode_setting": config.json_mode,
        "capabilities": capabilities_read(base_url=config.base_url, model=config.model) if online else {},
        "last_status": last.status if last else None,
        "last_at": last.created_at if last else None,
        "last_error": failed.error if failed else "",
        "last_error_at": failed.created_at if failed else None,
    }


# --- one HTTP round trip, classified ----------------------------------------

class _Failure(Exception):
    def __init__(self, cause: str, *, retryable: bool, retry_after: float | None = None, refuses_format: bool = False):
        super().__init__(cause)
        self.retryable, self.retry_after, self.refuses_format = retryable, retry_after, refuses_format


class _FormatRefused(Exception):
    """The server does not take the structured-output form the request used; try the next one."""


@functools.lru_cache(maxsize=32)
def _client(config: RoleConfig) -> openai.OpenAI:
    # Keyed on the whole (frozen) config, so a changed endpoint or timeout gets a fresh client.
    return openai.OpenAI(base_url=config.base_url, api_key=config.api_key, timeout=config.timeout, max_retries=0)


def _send_once(config: RoleConfig, request: dict) -> Answer:
    try:
        response = _client(config).chat.completions.create(**request)
        if request.get("stream"):
            return _read_stream(config, response)
    except openai.RateLimitError as exc:
        raise _Failure(_status_cause(exc), retryable=True, retry_after=retry_after_seconds(exc.response.headers)) from exc
    except openai.APIStatusError as exc:
        refused = refuses_format(exc.status_code, exc.message)
        raise _Failure(_status_cause(exc), retryable=exc.status_code >= 500, refuses_format=refused) from exc
    except openai.APITimeoutError:
        raise _Failure(f"no answer within {config.timeout:g} s", retryable=True) from None
    except openai.APIConnectionError as exc:
        raise _Failure(f"connection failed: {exc.__cause__ or exc}", retryable=True) from exc
    except ValueError as exc:  # the SDK passes on json's error when a JSON-typed body is not JSON
        raise _Failure(f"response body is not JSON ({exc})", retryable=True) from exc
    return _completion_answer(response)


def _completion_answer(completion) -> Answer:
    # Without strict validation the SDK hands back plain text for non-JSON content types.
    if not isinstance(completion, ChatCompletion) or not getattr(completion, "choices", None):
        raise _Failure(f"response is not a chat completion: {str(completion)[:200]!r}", retryable=True)
    return answer_from_completion(completion)


def _read_stream(config: RoleConfig, stream) -> Answer:
    """Read chunks until the end or the role's timeout; closing the stream early is what stops a
    server that would otherwise generate on (the SDK's read timeout only bounds each chunk)."""
    if "text/event-stream" not in stream.response.headers.get("content-type", ""):
        return _unstreamed_answer(stream.response)
    deadline, assembler = time.monotonic() + config.timeout, StreamAssembler()
    with stream:
        for chunk in stream:
            if time.monotonic() > deadline:
                raise _Failure(f"no answer within {config.timeout:g} s", retryable=True) from None
            assembler.add(chunk)
    if not assembler.chunks:
        raise _Failure("response is not a chat completion: the stream ended without a choice", retryable=True)
    return assembler.finish()


def _unstreamed_answer(response) -> Answer:
    """Some servers ignore `stream` and send one completion; read it as such."""
    body = response.read()
    response.close()
    if "json" not in response.headers.get("content-type", ""):
        return _completion_answer(body.decode(errors="replace"))
    data = json.loads(body)  # a ValueError here is classified by _send_once
    completion = ChatCompletion.model_validate(data) if isinstance(data, dict) and data.get("choices") else data
    return _completion_answer(completion)


def _status_cause(exc: openai.APIStatusError) -> str:
    return f"HTTP {exc.status_code}: {exc.message}"


def retry_after_seconds(headers) -> float | None:
    """The server's requested wait, from Retry-After-Ms or Retry-After (seconds or an HTTP date)."""
    if headers.get("retry-after-ms"):
        return _float_or_none(headers["retry-after-ms"], scale=0.001)
    raw = headers.get("retry-after")
    if not raw:
        return None
    seconds = _float_or_none(raw)
    if seconds is None and email.utils.parsedate_tz(raw):
        seconds = email.utils.mktime_tz(email.utils.parsedate_tz(raw)) - time.time()
    return seconds


def _float_or_none(raw: str, scale: float = 1.0) -> float | None:
    try:
        return float(raw) * scale
    except ValueError:
        return None


def backoff_delay(attempt: int, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number `attempt` (1-based)."""
    base, cap = settings.LLM_BACKOFF_SECONDS, settings.LLM_BACKOFF_MAX_SECONDS
    if retry_after is not None:
        return min(max(retry_after, 0.0), cap)
    ceiling = min(cap, base * 2 ** (attempt - 1))
    # "Equal jitter": always wait half the step, so workers that failed together spread out
    # without any of them retrying immediately.
    return ceiling / 2 + random.uniform(0, ceiling / 2)


# --- retries and the call log -----------------------------------------------

@dataclass
class _CallLog:
    config: RoleConfig
    started: float = field(default_factory=time.monotonic)
    attempts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    def add_usage(self, usage: tuple[int, int]) -> None:
        self.tokens_in += usage[0]
        self.tokens_out += usage[1]

    def write(self, status: str, error: str = "") -> LLMCall:
        trace = llm_trace_current()
        return LLMCall.objects.create(
            role=self.config.role, model=self.config.model, base_url=self.config.base_url,
            tokens_in=self.tokens_in, tokens_out=self.tokens_out, attempts=self.attempts,
            latency_ms=round((time.monotonic() - self.started) * 1000), status=status, error=error,
            trace_id=trace.trace_id if trace else None, turn=trace.turn if trace else None,
        )


def _request(config: RoleConfig, max_tokens: int | None, params: dict) -> dict:
    request = {"model": config.model, "temperature": config.temperature,
               "max_tokens": max_tokens or config.max_tokens, **params}
    if config.stream:
        request.update(stream=True, stream_options={"include_usage": True})
    return request


def _complete(config: RoleConfig, log: _CallLog, *, max_tokens: int | None = None, **params) -> Answer:
    """One chat completion, retried on transient failures up to the role's max_retries."""
    request = _request(config, max_tokens, params)
    total = config.max_retries + 1
    for attempt in range(1, total + 1):
        log.attempts += 1
        try:
            answer = _send_once(config, request)
        except _Failure as failure:
            if failure.refuses_format and _carries_schema(request):
                raise _FormatRefused(str(failure)) from None
            if not failure.retryable or attempt == total:
                cause = f"{failure} (attempt {attempt} of {total})"
                raise LLMError(role=config.role, model=config.model, cause=cause) from None
            delay = backoff_delay(attempt, failure.retry_after)
            logger.warning("LLM role %s: %s; retrying in %.2f s", config.role, failure, delay)
            time.sleep(delay)
        else:
            log.add_usage(answer.usage or estimated_usage(request["messages"], answer))
            _note_answer(config, request, answer)
            return answer


def _carries_schema(request: dict) -> bool:
    return "response_format" in request or "format" in request.get("extra_body", {})


def _note_answer(config: RoleConfig, request: dict, answer: Answer) -> None:
    facts = {"reported_model": answer.model}
    if request.get("stream"):
        facts["streaming"] = answer.streamed
    if request.get("tools") and answer.tool_calls:
        facts["tools"] = True
    capabilities_note(base_url=config.base_url, model=config.model, **facts)


def _run_logged(config: RoleConfig, work: Callable[[_CallLog], tuple[object, str]]) -> tuple[object, LLMCall]:
    """Run `work` and write exactly one LLMCall row for it, failed or not."""
    log = _CallLog(config)
    try:
        result, status = work(log)
    except LLMError as exc:
        log.write(LLMCall.Status.ERROR, str(exc))
        raise
    return result, log.write(status)


# --- chat ---------------------------------------------------------------------

def llm_chat(*, role: str, messages: list[dict], tools: list[dict] | None = None,
             tool_choice: str | dict | None = None, max_tokens: int | None = None) -> ChatReply:
    """One chat turn for `role`. Raises LLMError when the call fails after its retries.

    `max_tokens` overrides the role's limit for this call (a run's own setting, say)."""
    config = _online_config(role)
    params = _tool_params(tools, tool_choice or config.tool_choice)
    answer, call = _run_logged(
        config, lambda log: (_complete(config, log, messages=messages, max_tokens=max_tokens, **params),
                             LLMCall.Status.OK)
    )
    return _chat_reply(answer, call)


def _tool_params(tools: list[dict] | None, tool_choice: str | dict) -> dict:
    # Without tools a tool_choice is an error on OpenAI's API, so both go together or not at all.
    if not tools:
        return {}
    if tool_choice == ToolChoice.OMIT:
        return {"tools": tools}
    if isinstance(tool_choice, str) and tool_choice not in _NAMED_TOOL_CHOICES:
        # A bare tool name is the common case; spell it the way the API wants.
        tool_choice = {"type": "function", "function": {"name": tool_choice}}
    return {"tools": tools, "tool_choice": tool_choice}


def _chat_reply(answer: Answer, call: LLMCall) -> ChatReply:
    return ChatReply(
        content=answer.content, tool_calls=[_tool_call(c) for c in answer.tool_calls],
        tokens_in=call.tokens_in, tokens_out=call.tokens_out, call_id=call.pk,
    )


def _tool_call(call) -> ToolCall:
    arguments, error = parse_tool_arguments(call.arguments)
    return ToolCall(id=call.id, name=call.name, arguments=arguments, raw_arguments=call.arguments,
                    argument_error=error)


def parse_tool_arguments(raw: str) -> tuple[dict | None, str]:
    """(arguments, error): a model's bad arguments are data for the caller, never an exception."""
    if not raw.strip():
        return {}, ""  # some servers send "" for a tool that takes no arguments
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return None, f"arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, ""


# --- JSON answers ---------------------------------------------------------------

def llm_json(*, role: str, messages: list[dict], schema: type[BaseModel], max_tokens: int | None = None) -> BaseModel:
    """An answer validated against `schema`, after a local repair and at most one repair round trip.

    The schema goes into the prompt always, and to the server in the form the role's JSON mode
    names (probed once per endpoint when the mode is "auto"). `max_tokens` overrides the role's."""
    config = _online_config(role)
    prompt = _with_schema(messages, schema)
    request = _JsonRequest(config=config, schema=schema, max_tokens=max_tokens)
    instance, _ = _run_logged(config, lambda log: _json_with_repair(request, log, prompt))
    return instance


@dataclass
class _JsonRequest:
    config: RoleConfig
    schema: type[BaseModel]
    max_tokens: int | None


def _with_schema(messages: list[dict], schema: type[BaseModel]) -> list[dict]:
    instruction = f"Answer with one JSON object matching this JSON Schema:\n{json.dumps(schema.model_json_schema())}"
    # Merged into an existing system message: some chat templates reject a second one.
    if messages and messages[0].get("role") == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{instruction}"}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def _json_with_repair(request: _JsonRequest, log: _CallLog, messages: list[dict]):
    content = _json_content(request, log, messages)
    try:
        instance, repaired = parse_model(content, request.schema)
    except InvalidJSON as error:
        logger.info("LLM role %s: invalid JSON answer (%s); asking once for a repair", request.config.role, error)
        retry = [*messages, {"role": "assistant", "content": content},
                 {"role": "user", "content": REPAIR_PROMPT.format(error=error)}]
        return _json_repair_round(request, log, retry), LLMCall.Status.REPAIRED
    return instance, LLMCall.Status.REPAIRED if repaired else LLMCall.Status.OK


def _json_repair_round(request: _JsonRequest, log: _CallLog, messages: list[dict]) -> BaseModel:
    try:
        return parse_model(_json_content(request, log, messages), request.schema)[0]
    except InvalidJSON as error:
        cause = f"answer is not a valid {request.schema.__name__} even after a repair round: {error}"
        raise LLMError(role=request.config.role, model=request.config.model, cause=cause) from None


def _json_content(request: _JsonRequest, log: _CallLog, messages: list[dict]) -> str:
    """The answer's text, stepping down the structured-output forms the server refuses."""
    config, schema = request.config, server_schema(request.schema.model_json_schema())
    first = mode = json_mode_for(config)
    while True:
        params = structured_params(mode=mode, name=request.schema.__name__, schema=schema)
        try:
            answer = _complete(config, log, messages=messages, max_tokens=request.max_tokens, **params)
        except _FormatRefused as refused:
            logger.warning("LLM role %s: server refuses JSON mode %s (%s)", config.role, mode, refused)
            mode = next_mode(mode)
            continue
        if mode != first:
            _json_mode_remember(config, mode)
        return answer.content or ""


# --- structured-output mode: configured, remembered or probed ---------------------

def json_mode_for(config: RoleConfig) -> str:
    """The form to send the schema in: a fallback remembered for this setting, else the setting,
    else (auto) the result of a one-time probe."""
    record = capabilities_read(base_url=config.base_url, model=config.model)
    if record.get("json_mode") and record.get("json_mode_setting") == config.json_mode:
        return record["json_mode"]
    if config.json_mode != JsonMode.AUTO:
        return config.json_mode
    return json_mode_probe(config)


def _json_mode_remember(config: RoleConfig, mode: str, probe: str = "") -> None:
    facts = {"json_mode": mode, "json_mode_setting": config.json_mode}
    if probe:
        facts.update(json_probe=probe, probed_at=timezone.now().isoformat(timespec="seconds"))
    capabilities_note(base_url=config.base_url, model=config.model, **facts)


def json_mode_probe(config: RoleConfig) -> str:
    """Ask for an answer that only an enforcing server can give, in each form in turn, and
    remember the first that works. A transient failure (down, timed out) records nothing, so
    the next call probes again rather than settling on a weaker form."""
    findings = []
    for mode in FALLBACK[:-1]:
        try:
            answer = _send_once(config, _probe_request(config, mode))
        except _Failure as failure:
            if failure.retryable and not failure.refuses_format:
                return JsonMode.PROMPT_ONLY
            findings.append(f"{mode}: refused ({failure})")
            continue
        if _probe_enforced(answer.content):
            _json_mode_remember(config, mode, "; ".join([*findings, f"{mode}: enforced"]))
            return mode
        findings.append(f"{mode}: accepted but not enforced")
    _json_mode_remember(config, JsonMode.PROMPT_ONLY, "; ".join(findings))
    return JsonMode.PROMPT_ONLY


def _probe_request(config: RoleConfig, mode: str) -> dict:
    messages = [{"role": "system", "content": "Answer with one JSON object."},
                {"role": "user", "content": "Reply with any JSON object."}]
    return {"model": config.model, "temperature": 0.0, "max_tokens": 32, "messages": messages,
            **structured_params(mode=mode, name=PROBE_TITLE, schema=PROBE_SCHEMA)}


def _probe_enforced(content: str | None) -> bool:
    try:
        data, _ = load_json(content or "")
    except InvalidJSON:
        return False
    return isinstance(data, dict) and data.get("probe") == PROBE_VALUE
