"""A typed Python client for memweb's agent API, sync (`MemwebClient`) and async (`AsyncMemwebClient`).

An agent process imports this module alone: it needs httpx2, not Django or memweb's settings.

Both clients share everything but the sending: each method builds a `_Call` (what to ask, and how
its answer reads as a dataclass), and the client sends it, retrying connection errors, 429 and
502/503/504 with exponential backoff and jitter, honouring `Retry-After`. Every POST carries an
`Idempotency-Key` made once per call and resent unchanged on its retries, so a write that reached
the server before its answer was lost is not applied twice by a server that honours the key.
Errors are `MemwebError`s carrying the HTTP status and the API's `detail`.
"""
from __future__ import annotations

import asyncio
import dataclasses
import random
import time
import types
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Generic, TypedDict, TypeVar, Unpack

import httpx2 as httpx

__all__ = (
    "AsyncMemwebClient", "BadRequest", "Bank", "Conflict", "EpisodeOptions", "EpisodeQueued", "ExperienceEntry",
    "ExperienceHit", "ExperienceRetrieval", "FieldProblem", "Forbidden", "Hit", "Ingest", "Me", "MemwebClient",
    "MemwebConnectionError", "MemwebError", "NotFound", "Orb", "PayloadTooLarge", "RateLimited", "Retrieval",
    "RetrieveOptions", "ServerError", "Transition", "TransitionsWritten", "Unauthorized", "ValidationFailed",
)

Result = TypeVar("Result")
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


# --- what the API answers -----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Me:
    username: str
    roles: list[str]


@dataclasses.dataclass(frozen=True)
class Bank:
    id: int
    name: str
    slug: str
    description: str
    retrieval_k: int
    approved_only: bool
    min_score: float
    near_duplicate_threshold: float
    auto_approve: str
    auto_approve_min_reward: float
    prompt_token_budget: int
    embedding_model: str
    created_at: datetime


@dataclasses.dataclass(frozen=True)
class Orb:
    """A policy reflection: `obs` what the customer wanted, `outcome` what to do (or avoid) next time.
    `id` is the Orb's stable id, kept across edits; `revision` counts its edits from 1."""
    id: int
    content_hash: str
    bank: str
    obs: str
    emotion: str
    outcome: str
    context: dict[str, Any]
    timestamp: datetime
    customer_key: str
    domain: str
    source: str
    source_label: str
    episode_ref: str
    status: str
    version: int
    supersedes_id: int | None
    near_duplicate_of_id: int | None
    near_duplicate_score: float | None
    merged_into_id: int | None
    reviewer: str | None
    reviewed_at: datetime | None
    review_note: str
    embedding_model: str
    emotion_backend: str
    reflector_backend: str
    backend_error: str
    times_retrieved: int
    last_retrieved_at: datetime | None
    created_at: datetime
    revision: int = 1
    revision_id: int | None = None


@dataclasses.dataclass(frozen=True)
class EpisodeQueued:
    """An episode accepted for reflection in the background; poll `status_url` (or `wait_for_episode`)."""
    ingest_id: int
    status: str
    status_url: str


@dataclasses.dataclass(frozen=True)
class Ingest:
    """Where an episode's reflection into an Orb stands; `orb` once it is done."""
    ingest_id: int
    status: str
    orb: Orb | None = None
    created: bool | None = None
    near_duplicate_of_id: int | None = None
    error: str = ""

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")


@dataclasses.dataclass(frozen=True)
class Hit:
    rank: int
    score: float
    injected: bool  # in the prompt block; false: cut by the bank's token budget
    orb: Orb


@dataclasses.dataclass(frozen=True)
class Retrieval:
    """The Orbs nearest the query, and the prompt block to put in the agent's prompt."""
    retrieval_id: int
    rewritten_query: str
    rewriter_backend: str
    hits: list[Hit]
    injected: int
    prompt_block: str


@dataclasses.dataclass(frozen=True)
class Transition:
    """One decision step of a trajectory, for DMRM's experience memory."""
    trajectory_id: str
    step: int
    goal: str
    observation: str
    action: str
    reward: float
    next_observation: str = ""
    done: bool = False
    success: bool | None = None
    memory: str = "target"
    domain: str = ""
    task_ref: str = ""
    run_ref: str = ""
    episode_ref: str = ""


@dataclasses.dataclass(frozen=True)
class ExperienceEntry:
    id: int
    trajectory_id: str
    step: int
    action: str
    q_value: float
    visits: int


@dataclasses.dataclass(frozen=True)
class TransitionsWritten:
    written: int
    entries: list[ExperienceEntry]


@dataclasses.dataclass(frozen=True)
class ExperienceHit:
    experience_id: int
    memory: str
    raw_score: float
    score: float
    included: bool
    withheld: bool
    block: int | None
    reason: str
    action: str
    q_value: float
    tokens: int


@dataclasses.dataclass(frozen=True)
class ExperienceRetrieval:
    retrieval_id: int
    prompt_block: str
    suppressed: bool
    successful_trajectories: int
    budget_used: int
    c_max: int
    min_similarity: float
    trace: list[ExperienceHit]


def _decode(kind: type[Result], data: Mapping[str, Any]) -> Result:
    """A dataclass from the API's JSON; fields the server adds later are ignored, missing ones take defaults."""
    hints = typing.get_type_hints(kind)
    return kind(**{f.name: _convert(hints[f.name], data[f.name]) for f in dataclasses.fields(kind) if f.name in data})


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if dataclasses.is_dataclass(hint):
        return _decode(hint, value)
    if typing.get_origin(hint) is list and dataclasses.is_dataclass(typing.get_args(hint)[0]):
        return [_decode(typing.get_args(hint)[0], item) for item in value]
    if hint is datetime:
        return datetime.fromisoformat(value)
    return value


# --- errors ---------------------------------------------------------------------------------------

class MemwebError(Exception):
    """The API refused or failed a request: `status` (None when no answer came) and the API's `detail`."""

    def __init__(self, message: str, *, status: int | None = None, detail: Any = None, body: Any = None,
                 response: httpx.Response | None = None):
        super().__init__(message)
        self.status = status
        self.detail = detail
        self.body = body  # the whole JSON answer (422 of a failed reflection carries more than `detail`)
        self.response = response


class MemwebConnectionError(MemwebError):
    """No answer: the server could not be reached, or did not answer in time (after every retry)."""


class BadRequest(MemwebError):
    """400: e.g. a body that is not JSON."""


class Unauthorized(MemwebError):
    """401: no key, or an unknown or revoked one."""


class Forbidden(MemwebError):
    """403: the key's user lacks the role this operation needs."""


class NotFound(MemwebError):
    """404: no such bank, episode, retrieval or path."""


class Conflict(MemwebError):
    """409: a stale version or a transition the object's state refuses."""


class PayloadTooLarge(MemwebError):
    """413: the body is larger than the server accepts."""


@dataclasses.dataclass(frozen=True)
class FieldProblem:
    loc: tuple[str | int, ...]  # e.g. ("body", "payload", "query")
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
    def retry_after(self) -> float | None:
        return _retry_after(self.response.headers) if self.response is not None else None


class ServerError(MemwebError):
    """5xx: the server failed (502/503/504 only after every retry)."""


_ERRORS_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
                     413: PayloadTooLarge, 422: ValidationFailed, 429: RateLimited}


def _error_for(response: httpx.Response) -> MemwebError:
    try:
        body = response.json()
    except ValueError:
        body = response.text
    detail = body.get("detail", body) if isinstance(body, dict) else body
    kind = _ERRORS_BY_STATUS.get(response.status_code, ServerError if response.status_code >= 500 else MemwebError)
    return kind(f"{response.request.method} {response.request.url.path}: HTTP {response.status_code}: {detail}",
                status=response.status_code, detail=detail, body=body, response=response)


# --- retries --------------------------------------------------------------------------------------

def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The seconds a `Retry-After` header asks for; None when absent or not a number of seconds."""
    try:
        return max(0.0, float(headers["Retry-After"]))
    except (KeyError, ValueError):
        return None


@dataclasses.dataclass(frozen=True)
class _RetryPolicy:
    max_retries: int
    backoff: float
    max_wait: float

    def wait_before_retry(self, attempt: int, outcome: httpx.Response | httpx.TransportError) -> float | None:
        """Seconds to wait before resending after `attempt` (0 = the first try); None: do not retry."""
        if attempt >= self.max_retries:
            return None
        if isinstance(outcome, httpx.Response):
            if outcome.status_code not in RETRYABLE_STATUSES:
                return None
            asked = _retry_after(outcome.headers)
            if asked is not None:
                # A wait longer than we are willing to sleep is the caller's decision, not ours.
                return asked if asked <= self.max_wait else None
        # Jitter spreads the retries of many agents that failed together.
        return min(self.max_wait, self.backoff * 2 ** attempt * random.uniform(0.5, 1.0))


# --- what each method asks ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Call(Generic[Result]):
    """One API call: the request, resent unchanged on retries (same Idempotency-Key), and how its answer reads."""
    method: str
    path: str
    read: Callable[[Any], Result]
    body: Any = None
    params: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def answer(self, outcome: httpx.Response | httpx.TransportError) -> Result:
        if isinstance(outcome, httpx.TransportError):
            raise MemwebConnectionError(f"{self.method} {self.path}: {outcome!r}") from outcome
        if outcome.is_error:
            raise _error_for(outcome)
        return self.read(outcome.json())


def _get(path: str, read: Callable[[Any], Result]) -> _Call[Result]:
    return _Call("GET", path, read)


def _post(path: str, body: Any, read: Callable[[Any], Result], params: Mapping[str, Any] | None = None) -> _Call[Result]:
    return _Call("POST", path, read, body=body, params=params, headers={"Idempotency-Key": str(uuid.uuid4())})


def _reading(kind: type[Result]) -> Callable[[Any], Result]:
    return lambda data: _decode(kind, data)


def _episode_answer(data: Mapping[str, Any]) -> EpisodeQueued | Ingest:
    # 202 answers with a status URL (reflection queued), 200/201 with the reflection's result.
    return _decode(EpisodeQueued, data) if "status_url" in data else _decode(Ingest, data)


class EpisodeOptions(TypedDict, total=False):
    sync: bool  # reflect now and answer with the Orb, instead of queueing it (the default)
    source_label: str
    episode_ref: str  # the caller's own id for the episode


class RetrieveOptions(TypedDict, total=False):
    context: dict[str, Any]
    k: int
    approved_only: bool
    domain: str
    customer_key: str
    min_score: float
    client: str


def _bank_path(bank: str, rest: str) -> str:
    return f"/api/orbs/banks/{bank}/{rest}"


def _episode_write(bank: str, trajectory: Mapping[str, Any], options: EpisodeOptions) -> _Call[EpisodeQueued | Ingest]:
    body = {"trajectory": trajectory, **{k: v for k, v in options.items() if k != "sync"}}
    return _post(_bank_path(bank, "episodes"), body, _episode_answer,
                 params={"sync": "true"} if options.get("sync") else None)


def _retrieval_outcome(retrieval_id: int, success: bool, reward: float | None, episode_ref: str) -> _Call[None]:
    return _post(f"/api/orbs/retrievals/{retrieval_id}/outcome",
                 {"success": success, "reward": reward, "episode_ref": episode_ref}, lambda data: None)


def _transitions(bank: str, transitions: Iterable[Transition | Mapping[str, Any]]) -> _Call[TransitionsWritten]:
    rows = [dataclasses.asdict(t) if isinstance(t, Transition) else dict(t) for t in transitions]
    return _post(f"/api/orbs/experiences/banks/{bank}/transitions", {"transitions": rows},
                 _reading(TransitionsWritten))


def _experiences_retrieve(bank: str, goal: str, observation: str, recent_actions: Iterable[str],
                          client: str) -> _Call[ExperienceRetrieval]:
    body = {"goal": goal, "observation": observation, "recent_actions": list(recent_actions), "client": client}
    return _post(f"/api/orbs/experiences/banks/{bank}/retrieve", body, _reading(ExperienceRetrieval))


def _banks_read(data: list) -> list[Bank]:
    return [_decode(Bank, row) for row in data]


# --- the clients: the same methods, sent synchronously or awaited ---------------------------------

class _ClientSettings:
    """What both clients are made with. `timeout`: seconds per request; `max_retries`: resends after the
    first try; `backoff`: the first retry's wait in seconds, doubled each retry, with jitter; `max_wait`: the
    longest wait between tries (a longer `Retry-After` is raised as RateLimited at once); `poll_interval`:
    seconds between looks at a queued episode."""

    _transport: type[httpx.Client] | type[httpx.AsyncClient]

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 30.0, max_retries: int = 3,
                 backoff: float = 0.5, max_wait: float = 60.0, poll_interval: float = 0.5):
        self._http = self._transport(base_url=base_url.rstrip("/"), timeout=timeout,
                                     headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"})
        self._retry = _RetryPolicy(max_retries, backoff, max_wait)
        self._poll_interval = poll_interval


class MemwebClient(_ClientSettings):
    """`with MemwebClient("http://127.0.0.1:8000", key) as memweb: memweb.retrieve("shop", "refund")`."""

    _transport = httpx.Client
    _http: httpx.Client

    def __enter__(self) -> MemwebClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: _Call[Result]) -> Result:
        attempt = 0
        while True:
            outcome = self._attempt(call)
            wait = self._retry.wait_before_retry(attempt, outcome)
            if wait is None:
                return call.answer(outcome)
            time.sleep(wait)
            attempt += 1

    def _attempt(self, call: _Call) -> httpx.Response | httpx.TransportError:
        try:
            return self._http.request(call.method, call.path, json=call.body, params=call.params, headers=call.headers)
        except httpx.TransportError as failure:
            return failure

    def me(self) -> Me:
        return self._send(_get("/api/me", _reading(Me)))

    def banks(self) -> list[Bank]:
        return self._send(_get("/api/orbs/banks", _banks_read))

    def episode_write(self, bank: str, trajectory: Mapping[str, Any],
                      **options: Unpack[EpisodeOptions]) -> EpisodeQueued | Ingest:
        return self._send(_episode_write(bank, trajectory, options))

    def episode_status(self, ingest_id: int) -> Ingest:
        return self._send(_get(f"/api/orbs/episodes/{ingest_id}", _reading(Ingest)))

    def wait_for_episode(self, ingest_id: int, *, timeout: float = 120.0) -> Ingest:
        """Polls until the episode's reflection is done or failed; MemwebError when `timeout` passes first."""
        deadline = time.monotonic() + timeout
        while not (ingest := self.episode_status(ingest_id)).finished:
            if time.monotonic() > deadline:
                raise MemwebError(f"episode #{ingest_id} still {ingest.status} after {timeout} s", detail=ingest)
            time.sleep(self._poll_interval)
        return ingest

    def retrieve(self, bank: str, query: str, **options: Unpack[RetrieveOptions]) -> Retrieval:
        return self._send(_post(_bank_path(bank, "retrieve"), {"query": query, **options}, _reading(Retrieval)))

    def retrieval_outcome(self, retrieval_id: int, success: bool, reward: float | None = None,
                          episode_ref: str = "") -> None:
        return self._send(_retrieval_outcome(retrieval_id, success, reward, episode_ref))

    def transitions(self, bank: str, transitions: Iterable[Transition | Mapping[str, Any]]) -> TransitionsWritten:
        return self._send(_transitions(bank, transitions))

    def experiences_retrieve(self, bank: str, goal: str, observation: str, recent_actions: Iterable[str] = (),
                             client: str = "") -> ExperienceRetrieval:
        return self._send(_experiences_retrieve(bank, goal, observation, recent_actions, client))


class AsyncMemwebClient(_ClientSettings):
    """`async with AsyncMemwebClient(url, key) as memweb: await memweb.retrieve("shop", "refund")`."""

    _transport = httpx.AsyncClient
    _http: httpx.AsyncClient

    async def __aenter__(self) -> AsyncMemwebClient:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: _Call[Result]) -> Result:
        attempt = 0
        while True:
            outcome = await self._attempt(call)
            wait = self._retry.wait_before_retry(attempt, outcome)
            if wait is None:
                return call.answer(outcome)
            await asyncio.sleep(wait)
            attempt += 1

    async def _attempt(self, call: _Call) -> httpx.Response | httpx.TransportError:
        try:
            return await self._http.request(call.method, call.path, json=call.body, params=call.params,
                                            headers=call.headers)
        except httpx.TransportError as failure:
            return failure

    async def me(self) -> Me:
        return await self._send(_get("/api/me", _reading(Me)))

    async def banks(self) -> list[Bank]:
        return await self._send(_get("/api/orbs/banks", _banks_read))

    async def episode_write(self, bank: str, trajectory: Mapping[str, Any],
                            **options: Unpack[EpisodeOptions]) -> EpisodeQueued | Ingest:
        return await self._send(_episode_write(bank, trajectory, options))

    async def episode_status(self, ingest_id: int) -> Ingest:
        return await self._send(_get(f"/api/orbs/episodes/{ingest_id}", _reading(Ingest)))

    async def wait_for_episode(self, ingest_id: int, *, timeout: float = 120.0) -> Ingest:
        """Polls until the episode's reflection is done or failed; MemwebError when `timeout` passes first."""
        deadline = time.monotonic() + timeout
        while not (ingest := await self.episode_status(ingest_id)).finished:
            if time.monotonic() > deadline:
                raise MemwebError(f"episode #{ingest_id} still {ingest.status} after {timeout} s", detail=ingest)
            await asyncio.sleep(self._poll_interval)
        return ingest

    async def retrieve(self, bank: str, query: str, **options: Unpack[RetrieveOptions]) -> Retrieval:
        return await self._send(_post(_bank_path(bank, "retrieve"), {"query": query, **options}, _reading(Retrieval)))

    async def retrieval_outcome(self, retrieval_id: int, success: bool, reward: float | None = None,
                                episode_ref: str = "") -> None:
        return await self._send(_retrieval_outcome(retrieval_id, success, reward, episode_ref))

    async def transitions(self, bank: str,
                          transitions: Iterable[Transition | Mapping[str, Any]]) -> TransitionsWritten:
        return await self._send(_transitions(bank, transitions))

    async def experiences_retrieve(self, bank: str, goal: str, observation: str, recent_actions: Iterable[str] = (),
                                   client: str = "") -> ExperienceRetrieval:
        return await self._send(_experiences_retrieve(bank, goal, observation, recent_actions, client))
