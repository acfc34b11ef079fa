"""Every refusal or failure is a `MemwebError` carrying the HTTP status and the API's `detail`.

A 409 comes in three kinds, told apart because a caller handles each differently:
`StaleVersion` (someone changed the object since you read it: reload and decide again),
`RequestInProgress` (the same Idempotency-Key is still being served: retried for you, raised only
when every retry found it still running), and plain `Conflict` (the object's state refuses the
action, e.g. an archived bank).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Optional, Union

import httpx


class MemwebError(Exception):
    """The API refused or failed a request: `status` (None when no answer came) and the API's `detail`."""

    def __init__(self, message: str, *, status: Optional[int] = None, detail: Any = None, body: Any = None,
                 response: Optional[httpx.Response] = None):
        super().__init__(message)
        self.status = status
        self.detail = detail
        self.body = body  # the whole JSON answer: some carry more than `detail`
        self.response = response


class MemwebConnectionError(MemwebError):
    """No answer: the server could not be reached, or did not answer in time (after every retry)."""


class BadRequest(MemwebError):
    """400: e.g. a body that is not JSON."""


class Unauthorized(MemwebError):
    """401: no key, or an unknown or revoked one."""


class Forbidden(MemwebError):
    """403: the key lacks the role or scope this operation needs."""


class NotFound(MemwebError):
    """404: no such bank, Orb, episode, job or path in the key's workspace."""


class Conflict(MemwebError):
    """409 that neither retrying nor reloading resolves: the object's state refuses the action."""


class StaleVersion(Conflict):
    """409: the object changed after you read it (your `expected_version` is old); nothing was written.
    `current_version` is the version to read again when the server says it."""

    @property
    def current_version(self) -> Optional[int]:
        return self.body.get("current_version") if isinstance(self.body, dict) else None


class RequestInProgress(Conflict):
    """409 with Retry-After: a request with the same Idempotency-Key is still running. Retried by the
    client; raised when it was still running after every retry."""


class PayloadTooLarge(MemwebError):
    """413: the body is larger than the server accepts."""


@dataclasses.dataclass(frozen=True)
class FieldProblem:
    loc: tuple[Union[str, int], ...]  # e.g. ("body", "payload", "query")
    msg: str


class ValidationFailed(MemwebError):
    """422: refused input. `problems` names each refused field when the API says which."""

    @property
    def problems(self) -> list[FieldProblem]:
        if not isinstance(self.detail, list):
            return []
        return [FieldProblem(tuple(item.get("loc", ())), item.get("msg", "")) for item in self.detail]


class RateLimited(MemwebError):
    """429 after every retry, or asking for a longer wait than the client's `max_wait`; `retry_after` is
    the wait in seconds the server asked for, if it said."""

    @property
    def retry_after(self) -> Optional[float]:
        return retry_after(self.response.headers) if self.response is not None else None


class ServerError(MemwebError):
    """5xx: the server failed (502/503/504 only after every retry)."""


class WaitTimedOut(MemwebError):
    """`wait_for_episode` or `wait_for_job` saw no end before its timeout; `detail` is the last state seen."""


_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 413: PayloadTooLarge,
              422: ValidationFailed, 429: RateLimited}
# The DMRM routes say a version is stale in words only (no `current_version` in the body).
_STALE_WORDS = "changed after you loaded it"


def retry_after(headers: Mapping[str, str]) -> Optional[float]:
    """The seconds a `Retry-After` header asks for; None when absent or not a number of seconds."""
    try:
        return max(0.0, float(headers["Retry-After"]))
    except (KeyError, ValueError):
        return None


def is_in_progress(response: httpx.Response) -> bool:
    """The idempotency layer's 409: the same key is being served now, and it says when to retry."""
    return response.status_code == 409 and "Retry-After" in response.headers


def _conflict_kind(response: httpx.Response, body: Any, detail: Any) -> type:
    if is_in_progress(response):
        return RequestInProgress
    if (isinstance(body, dict) and body.get("current_version") is not None) or _STALE_WORDS in str(detail):
        return StaleVersion
    return Conflict


def error_for(response: httpx.Response) -> MemwebError:
    try:
        body = response.json()
    except ValueError:
        body = response.text
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if response.status_code == 409:
        kind = _conflict_kind(response, body, detail)
    else:
        kind = _BY_STATUS.get(response.status_code, ServerError if response.status_code >= 500 else MemwebError)
    return kind(f"{response.request.method} {response.request.url.path}: HTTP {response.status_code}: {detail}",
                status=response.status_code, detail=detail, body=body, response=response)
