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
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from memweb.llm.config import RoleConfig
from memweb.llm.repair import InvalidJSON, parse_model
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
    last = LLMCall.objects.filter(role=config.role).order_by("-created_at", "-pk").first()
    return {
        "role": config.role,
        "offline": config.is_offline,
        "backend": config.backend_label,
        "model": "" if config.is_offline else config.model,
        "base_url": config.base_url,
        "last_status": last.status if last else None,
        "last_error": last.error if last else "",
        "last_at": last.created_at if last else None,
    }


# --- one HTTP round trip, classified ----------------------------------------

class _Failure(Exception):
    def __init__(self, cause: str, *, retryable: bool, retry_after: float | None = None):
        super().__init__(cause)
        self.retryable, self.retry_after = retryable, retry_after


@functools.lru_cache(maxsize=32)
def _client(config: RoleConfig) -> openai.OpenAI:
    # Keyed on the whole (frozen) config, so a changed endpoint or timeout gets a fresh client.
    return openai.OpenAI(base_url=config.base_url, api_key=config.api_key, timeout=config.timeout, max_retries=0)


def _send_once(config: RoleConfig, request: dict) -> ChatCompletion:
    try:
        completion = _client(config).chat.completions.create(**request)
    except openai.RateLimitError as exc:
        raise _Failure(_status_cause(exc), retryable=True, retry_after=retry_after_seconds(exc.response.headers))
    except openai.APIStatusError as exc:
        raise _Failure(_status_cause(exc), retryable=exc.status_code >= 500)
    except openai.APITimeoutError:
        raise _Failure(f"no answer within {config.timeout:g} s", retryable=True)
    except openai.APIConnectionError as exc:
        raise _Failure(f"connection failed: {exc.__cause__ or exc}", retryable=True)
    except ValueError as exc:  # the SDK passes on json's error when a JSON-typed body is not JSON
        raise _Failure(f"response body is not JSON ({exc})", retryable=True)
    # Without strict validation the SDK hands back plain text for non-JSON content types.
    if not isinstance(completion, ChatCompletion) or not getattr(completion, "choices", None):
        raise _Failure(f"response is not a chat completion: {str(completion)[:200]!r}", retryable=True)
    return completion


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

    def add_usage(self, completion: ChatCompletion) -> None:
        if completion.usage:
            self.tokens_in += completion.usage.prompt_tokens or 0
            self.tokens_out += completion.usage.completion_tokens or 0

    def write(self, status: str, error: str = "") -> LLMCall:
        return LLMCall.objects.create(
            role=self.config.role, model=self.config.model, base_url=self.config.base_url,
            tokens_in=self.tokens_in, tokens_out=self.tokens_out, attempts=self.attempts,
            latency_ms=round((time.monotonic() - self.started) * 1000), status=status, error=error,
        )


def _complete(config: RoleConfig, log: _CallLog, **params) -> ChatCompletion:
    """One chat completion, retried on transient failures up to the role's max_retries."""
    request = {"model": config.model, "temperature": config.temperature, **params}
    total = config.max_retries + 1
    for attempt in range(1, total + 1):
        log.attempts += 1
        try:
            completion = _send_once(config, request)
        except _Failure as failure:
            if not failure.retryable or attempt == total:
                cause = f"{failure} (attempt {attempt} of {total})"
                raise LLMError(role=config.role, model=config.model, cause=cause) from None
            delay = backoff_delay(attempt, failure.retry_after)
            logger.warning("LLM role %s: %s; retrying in %.2f s", config.role, failure, delay)
            time.sleep(delay)
        else:
            log.add_usage(completion)
            return completion


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
             tool_choice: str | dict | None = None) -> ChatReply:
    """One chat turn for `role`. Raises LLMError when the call fails after its retries."""
    config = _online_config(role)
    params = _tool_params(tools, tool_choice)
    completion, call = _run_logged(
        config, lambda log: (_complete(config, log, messages=messages, **params), LLMCall.Status.OK)
    )
    return _chat_reply(completion, call)


def _tool_params(tools: list[dict] | None, tool_choice: str | dict | None) -> dict:
    params = {}
    if tools:
        params["tools"] = tools
    if isinstance(tool_choice, str) and tool_choice not in _NAMED_TOOL_CHOICES:
        # A bare tool name is the common case; spell it the way the API wants.
        tool_choice = {"type": "function", "function": {"name": tool_choice}}
    if tool_choice is not None:
        params["tool_choice"] = tool_choice
    return params


def _chat_reply(completion: ChatCompletion, call: LLMCall) -> ChatReply:
    message = completion.choices[0].message
    calls = [_tool_call(c) for c in message.tool_calls or [] if c.type == "function"]
    return ChatReply(
        content=message.content, tool_calls=calls,
        tokens_in=call.tokens_in, tokens_out=call.tokens_out, call_id=call.pk,
    )


def _tool_call(call) -> ToolCall:
    raw = call.function.arguments or ""
    arguments, error = parse_tool_arguments(raw)
    return ToolCall(id=call.id, name=call.function.name, arguments=arguments, raw_arguments=raw, argument_error=error)


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

def llm_json(*, role: str, messages: list[dict], schema: type[BaseModel]) -> BaseModel:
    """An answer validated against `schema`, after a local repair and at most one repair round trip."""
    config = _online_config(role)
    prompt = _with_schema(messages, schema)
    instance, _ = _run_logged(config, lambda log: _json_with_repair(config, log, prompt, schema))
    return instance


def _with_schema(messages: list[dict], schema: type[BaseModel]) -> list[dict]:
    instruction = f"Answer with one JSON object matching this JSON Schema:\n{json.dumps(schema.model_json_schema())}"
    # Merged into an existing system message: some chat templates reject a second one.
    if messages and messages[0].get("role") == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{instruction}"}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def _json_with_repair(config: RoleConfig, log: _CallLog, messages: list[dict], schema: type[BaseModel]):
    content = _json_content(config, log, messages)
    try:
        instance, repaired = parse_model(content, schema)
    except InvalidJSON as error:
        logger.info("LLM role %s: invalid JSON answer (%s); asking once for a repair", config.role, error)
        retry = [*messages, {"role": "assistant", "content": content},
                 {"role": "user", "content": REPAIR_PROMPT.format(error=error)}]
        return _json_repair_round(config, log, retry, schema), LLMCall.Status.REPAIRED
    return instance, LLMCall.Status.REPAIRED if repaired else LLMCall.Status.OK


def _json_repair_round(config: RoleConfig, log: _CallLog, messages: list[dict], schema: type[BaseModel]) -> BaseModel:
    try:
        return parse_model(_json_content(config, log, messages), schema)[0]
    except InvalidJSON as error:
        cause = f"answer is not a valid {schema.__name__} even after a repair round: {error}"
        raise LLMError(role=config.role, model=config.model, cause=cause) from None


def _json_content(config: RoleConfig, log: _CallLog, messages: list[dict]) -> str:
    completion = _complete(config, log, messages=messages, response_format={"type": "json_object"})
    return completion.choices[0].message.content or ""
