"""`Client` (sync) and `AsyncClient` (the same methods, awaited) for memweb's JSON API.

Both share every method: a method names its `Route` and builds the request as a `_Call`, and the
client sends it. Sending retries what the server asks to be retried (429, 503, and the 409 of an
Idempotency-Key still in progress, waiting as long as `Retry-After` says) and what failed on the way
(502/504, connection errors), with exponential backoff and jitter, a bounded number of times. Every
write carries an `Idempotency-Key` made once per call and resent unchanged on its retries, so a write
that reached the server before its answer was lost is not applied twice.
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import time
import typing
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional, TypeVar, Union

import httpx

from memweb_client import models as m
from memweb_client import routes as r
from memweb_client.errors import MemwebConnectionError, WaitTimedOut, error_for, is_in_progress, retry_after

Result = TypeVar("Result")
# 429 and 503 are the server asking for a later try; 502/504 a proxy that lost its way to it.
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


@dataclasses.dataclass(frozen=True)
class _Call:
    """One request, resent unchanged on retries (same Idempotency-Key)."""
    route: r.Route
    path: str
    body: Any = None
    params: Optional[Mapping[str, Any]] = None
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def answer(self, outcome: Union[httpx.Response, httpx.TransportError]) -> Any:
        if isinstance(outcome, httpx.TransportError):
            raise MemwebConnectionError(f"{self.route.method} {self.path}: {outcome!r}") from outcome
        if outcome.is_error:
            raise error_for(outcome)
        kind = self.route.answers.get(outcome.status_code)
        return None if kind is None else _read(kind, outcome.json())


def _read(kind: Any, data: Any) -> Any:
    if typing.get_origin(kind) is list:
        item = typing.get_args(kind)[0]
        return [m.decode(item, row) for row in data]
    return m.decode(kind, data)


def _call(route: r.Route, *, body: Any = None, query: Optional[Mapping[str, Any]] = None, **path_params: Any) -> _Call:
    headers = {"Idempotency-Key": str(uuid.uuid4())} if route.writes else {}
    params = {name: value for name, value in (query or {}).items() if value is not None} or None
    return _Call(route, route.url(**path_params), body=body, params=params, headers=headers)


def _given(**fields: Any) -> dict[str, Any]:
    """A JSON body of the fields the caller gave (None: leave it to the server's default)."""
    return {name: value for name, value in fields.items() if value is not None}


def endpoint(route: r.Route) -> Callable:
    """Marks a method as the caller of `route`, for the test that checks routes against the schema."""
    def mark(method: Callable) -> Callable:
        setattr(method, "route", route)  # noqa: B010 (a function has no declared `route`)
        return method
    return mark


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """`max_retries` resends after the first try; `backoff` the first wait in seconds, doubled each retry,
    with jitter; `max_wait` the longest wait (a longer Retry-After is raised at once)."""
    max_retries: int = 3
    backoff: float = 0.5
    max_wait: float = 60.0

    def wait_before_retry(self, attempt: int, outcome: Union[httpx.Response, httpx.TransportError]) -> Optional[float]:
        """Seconds to wait before resending after `attempt` (0 = the first try); None: do not retry."""
        if attempt >= self.max_retries:
            return None
        if isinstance(outcome, httpx.Response):
            if outcome.status_code not in RETRYABLE_STATUSES and not is_in_progress(outcome):
                return None
            asked = retry_after(outcome.headers)
            if asked is not None:
                # A wait longer than we are willing to sleep is the caller's decision, not ours.
                return asked if asked <= self.max_wait else None
        # Jitter spreads the retries of many agents that failed together.
        return min(self.max_wait, self.backoff * 2 ** attempt * random.uniform(0.5, 1.0))


class _Endpoints:
    """The API's operations. Each returns what `_send` returns: the answer itself for `Client`, an
    awaitable of it for `AsyncClient`."""

    def _send(self, call: _Call) -> Any:
        raise NotImplementedError  # each client sends in its own way

    # --- who is asking, banks ---

    @endpoint(r.ME)
    def me(self) -> m.Me:
        return self._send(_call(r.ME))

    @endpoint(r.BANKS)
    def banks(self, *, archived: bool = False) -> list[m.Bank]:
        return self._send(_call(r.BANKS, query={"archived": "true" if archived else None}))

    @endpoint(r.BANK)
    def bank(self, slug: str) -> m.Bank:
        return self._send(_call(r.BANK, slug=slug))

    @endpoint(r.BANK_CREATE)
    def bank_create(self, name: str, *, description: Optional[str] = None, retrieval_k: Optional[int] = None,
                    prompt_token_budget: Optional[int] = None) -> m.Bank:
        """A new bank with the review gate's defaults (only a reviewer's session may change those)."""
        body = _given(name=name, description=description, retrieval_k=retrieval_k,
                                prompt_token_budget=prompt_token_budget)
        return self._send(_call(r.BANK_CREATE, body=body))

    # --- episodes, lessons, retrieval ---

    @endpoint(r.EPISODE_WRITE)
    def episode_write(self, bank: str, trajectory: Mapping[str, Any], *, sync: bool = False,
                      source_label: Optional[str] = None,
                      episode_ref: Optional[str] = None) -> Union[m.EpisodeQueued, m.Ingest]:
        """Submit a finished episode; it is reflected into an Orb in the background (`EpisodeQueued`,
        see `wait_for_episode`), or at once with `sync=True` (`Ingest`)."""
        body = _given(trajectory=dict(trajectory), source_label=source_label, episode_ref=episode_ref)
        return self._send(_call(r.EPISODE_WRITE, slug=bank, body=body, query={"sync": "true" if sync else None}))

    @endpoint(r.EPISODE_STATUS)
    def episode_status(self, ingest_id: int) -> m.Ingest:
        return self._send(_call(r.EPISODE_STATUS, ingest_id=ingest_id))

    @endpoint(r.REMEMBER)
    def remember(self, bank: str, text: str, *, context: Optional[Mapping[str, Any]] = None,
                 customer_key: Optional[str] = None, domain: Optional[str] = None,
                 source_label: Optional[str] = None) -> m.Orb:
        """Remember a lesson given as text; it passes the bank's review gate like an episode's Orb."""
        body = _given(text=text, context=dict(context) if context is not None else None,
                                    customer_key=customer_key, domain=domain, source_label=source_label)
        return self._send(_call(r.REMEMBER, slug=bank, body=body))

    @endpoint(r.RETRIEVE)
    def retrieve(self, bank: str, query: str, *, context: Optional[Mapping[str, Any]] = None,
                 k: Optional[int] = None, approved_only: Optional[bool] = None, domain: Optional[str] = None,
                 customer_key: Optional[str] = None, min_score: Optional[float] = None,
                 client: Optional[str] = None, filter: Optional[Mapping[str, Any]] = None) -> m.Retrieval:
        """The bank's Orbs nearest the situation, and the prompt block to put in the agent's prompt.
        `filter` keeps Orbs whose context matches, e.g. {"and": [{"field": "sku", "eq": "DW-450"},
        {"field": "priority", "gte": 2}]} (operators eq, in, gt, gte, lt, lte; groups and, or)."""
        body = _given(query=query, context=dict(context) if context is not None else None, k=k,
                                    approved_only=approved_only, domain=domain, customer_key=customer_key,
                                    min_score=min_score, client=client,
                                    filter=dict(filter) if filter is not None else None)
        return self._send(_call(r.RETRIEVE, slug=bank, body=body))

    @endpoint(r.RETRIEVAL_OUTCOME)
    def retrieval_outcome(self, retrieval_id: int, success: bool, reward: Optional[float] = None,
                          episode_ref: Optional[str] = None) -> None:
        """How the episode that used this retrieval ended."""
        body = _given(success=success, reward=reward, episode_ref=episode_ref)
        return self._send(_call(r.RETRIEVAL_OUTCOME, retrieval_id=retrieval_id, body=body))

    # --- reading Orbs (reviewing them is a person's act, in the dashboard: no API key may) ---

    @endpoint(r.ORBS)
    def orbs(self, *, bank: Optional[str] = None, status: Optional[str] = None, domain: Optional[str] = None,
             customer_key: Optional[str] = None, q: Optional[str] = None, page: int = 1,
             page_size: Optional[int] = None) -> m.OrbPage:
        """One page of Orbs, pending first; every filter optional."""
        query = {"bank": bank, "status": status, "domain": domain, "customer_key": customer_key, "q": q,
                 "page": page, "page_size": page_size}
        return self._send(_call(r.ORBS, query=query))

    @endpoint(r.ORB)
    def orb(self, orb_id: int) -> m.OrbDetail:
        return self._send(_call(r.ORB, orb_id=orb_id))

    @endpoint(r.ORB_REVISIONS)
    def orb_revisions(self, orb_id: int) -> m.OrbRevisions:
        return self._send(_call(r.ORB_REVISIONS, orb_id=orb_id))

    @endpoint(r.CUSTOMER_ERASURE)
    def erase_customer(self, bank: str, customer_key: str, *, reason: Optional[str] = None,
                       every_bank: bool = False) -> m.Job:
        """Erase everything memweb holds about one customer, as a background job (see `wait_for_job`)."""
        body = _given(customer_key=customer_key, reason=reason, every_bank=every_bank)
        return self._send(_call(r.CUSTOMER_ERASURE, slug=bank, body=body))

    @endpoint(r.JOB)
    def job(self, job_id: int) -> m.Job:
        return self._send(_call(r.JOB, job_id=job_id))

    # --- DMRM experience memory ---

    @endpoint(r.TRANSITIONS)
    def transitions(self, bank: str, transitions: Iterable[m.Transition]) -> m.TransitionsWritten:
        body = {"transitions": [dict(step) for step in transitions]}
        return self._send(_call(r.TRANSITIONS, slug=bank, body=body))

    @endpoint(r.EXPERIENCES_RETRIEVE)
    def experiences_retrieve(self, bank: str, goal: str, observation: str, *, recent_actions: Iterable[str] = (),
                             domain: Optional[str] = None, client: Optional[str] = None,
                             customer_key: Optional[str] = None) -> m.ExperienceRetrieval:
        body = _given(goal=goal, observation=observation, recent_actions=list(recent_actions),
                      domain=domain, client=client, customer_key=customer_key)
        return self._send(_call(r.EXPERIENCES_RETRIEVE, slug=bank, body=body))

    @endpoint(r.DMRM_SETTINGS)
    def dmrm_settings(self, bank: str) -> m.DMRMSettings:
        return self._send(_call(r.DMRM_SETTINGS, slug=bank))

    @endpoint(r.DMRM_SETTINGS_WRITE)
    def dmrm_settings_update(self, bank: str, changes: m.DMRMSettingsIn) -> m.DMRMSettings:
        return self._send(_call(r.DMRM_SETTINGS_WRITE, slug=bank, body=dict(changes)))

    @endpoint(r.EXPERIENCES)
    def experiences(self, bank: str, *, memory: Optional[str] = None, status: Optional[str] = None,
                    domain: Optional[str] = None, q: Optional[str] = None, page: int = 1,
                    page_size: Optional[int] = None) -> m.ExperiencePage:
        query = {"memory": memory, "status": status, "domain": domain, "q": q, "page": page, "page_size": page_size}
        return self._send(_call(r.EXPERIENCES, slug=bank, query=query))

    @endpoint(r.EXPERIENCE)
    def experience(self, bank: str, experience_id: int) -> m.Experience:
        return self._send(_call(r.EXPERIENCE, slug=bank, experience_id=experience_id))

    # --- evaluation runs ---

    @endpoint(r.RUNS)
    def runs(self, *, status: Optional[str] = None, memory_mode: Optional[str] = None, q: Optional[str] = None,
             limit: Optional[int] = None, offset: Optional[int] = None) -> m.RunPage:
        query = {"status": status, "memory_mode": memory_mode, "q": q, "limit": limit, "offset": offset}
        return self._send(_call(r.RUNS, query=query))

    @endpoint(r.RUN)
    def run(self, run_id: int) -> m.Run:
        return self._send(_call(r.RUN, run_id=run_id))

    @endpoint(r.RUN_TRANSCRIPTS)
    def run_transcripts(self, a: int, b: int, task: str, *, trial: Optional[int] = None) -> m.Transcripts:
        """Runs A and B's transcripts of `task` side by side (by default the first trial whose verdicts differ)."""
        return self._send(_call(r.RUN_TRANSCRIPTS, query={"a": a, "b": b, "task": task, "trial": trial}))

    @endpoint(r.TRACES)
    def traces(self, *, role: Optional[str] = None, model: Optional[str] = None, status: Optional[str] = None,
               min_latency: Optional[int] = None, run: Optional[int] = None, page: Optional[int] = None,
               page_size: Optional[int] = None) -> m.TracePage:
        """The workspace's LLM calls, newest first, with the traces page's filters."""
        query = {"role": role, "model": model, "status": status, "min_latency": min_latency, "run": run,
                 "page": page, "page_size": page_size}
        return self._send(_call(r.TRACES, query=query))

    @endpoint(r.RUN_CREATE)
    def run_create(self, spec: Mapping[str, Any]) -> m.Run:
        """Start an evaluation run from its spec (`name` required; see the API docs for the rest)."""
        return self._send(_call(r.RUN_CREATE, body=dict(spec)))

    @endpoint(r.RUN_CANCEL)
    def run_cancel(self, run_id: int) -> m.Run:
        return self._send(_call(r.RUN_CANCEL, run_id=run_id))

    # --- webhooks ---

    @endpoint(r.WEBHOOKS)
    def webhooks(self) -> list[m.Webhook]:
        return self._send(_call(r.WEBHOOKS))

    @endpoint(r.WEBHOOK_CREATE)
    def webhook_create(self, url: str, events: Iterable[str], *, bank: Optional[str] = None,
                       description: Optional[str] = None) -> m.WebhookCreated:
        body = _given(url=url, events=list(events), bank=bank, description=description)
        return self._send(_call(r.WEBHOOK_CREATE, body=body))

    @endpoint(r.WEBHOOK_SWITCH)
    def webhook_set_active(self, webhook_id: int, active: bool) -> m.Webhook:
        body = {"active": active}
        return self._send(_call(r.WEBHOOK_SWITCH, webhook_id=webhook_id, body=body))

    @endpoint(r.WEBHOOK_DELETE)
    def webhook_delete(self, webhook_id: int) -> None:
        return self._send(_call(r.WEBHOOK_DELETE, webhook_id=webhook_id))

    @endpoint(r.WEBHOOK_TEST)
    def webhook_test(self, webhook_id: int) -> m.Delivery:
        return self._send(_call(r.WEBHOOK_TEST, webhook_id=webhook_id))

    @endpoint(r.DELIVERIES)
    def deliveries(self, *, webhook: Optional[int] = None, page: int = 1,
                   page_size: Optional[int] = None) -> m.DeliveryPage:
        """One page of deliveries, newest first."""
        return self._send(_call(r.DELIVERIES, query={"webhook": webhook, "page": page, "page_size": page_size}))

    @endpoint(r.REDELIVER)
    def redeliver(self, delivery_id: int) -> m.Delivery:
        return self._send(_call(r.REDELIVER, delivery_id=delivery_id))


class _Settings:
    """What both clients are made with. `timeout`: seconds per request; `retry`: see RetryPolicy;
    `poll_interval`: seconds between looks at a queued episode or a job."""

    def _configure(self, base_url: str, api_key: str, timeout: float, retry: Optional[RetryPolicy],
                   poll_interval: float) -> dict[str, Any]:
        self._retry = retry or RetryPolicy()
        self._poll_interval = poll_interval
        return {"base_url": base_url.rstrip("/"), "timeout": timeout,
                "headers": {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}}


class Client(_Endpoints, _Settings):
    """`with Client("http://127.0.0.1:8000", key) as memweb: memweb.retrieve("support", "refund")`."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 30.0, retry: Optional[RetryPolicy] = None,
                 poll_interval: float = 0.5, transport: Optional[httpx.BaseTransport] = None):
        self._http = httpx.Client(transport=transport,
                                  **self._configure(base_url, api_key, timeout, retry, poll_interval))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: _Call) -> Any:
        attempt = 0
        while True:
            outcome = self._attempt(call)
            wait = self._retry.wait_before_retry(attempt, outcome)
            if wait is None:
                return call.answer(outcome)
            time.sleep(wait)
            attempt += 1

    def _attempt(self, call: _Call) -> Union[httpx.Response, httpx.TransportError]:
        try:
            return self._http.request(call.route.method, call.path, json=call.body, params=call.params,
                                      headers=call.headers)
        except httpx.TransportError as failure:
            return failure

    def wait_for_episode(self, ingest_id: int, *, timeout: float = 120.0) -> m.Ingest:
        """Polls until the episode's reflection is done or failed; WaitTimedOut when `timeout` passes first."""
        return self._wait(functools.partial(self.episode_status, ingest_id), f"episode #{ingest_id}", timeout)

    def wait_for_job(self, job_id: int, *, timeout: float = 300.0) -> m.Job:
        """Polls until the job succeeded or failed; WaitTimedOut when `timeout` passes first."""
        return self._wait(functools.partial(self.job, job_id), f"job #{job_id}", timeout)

    def _wait(self, look: Callable[[], Any], what: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            state = look()
            if state.finished:
                return state
            if time.monotonic() > deadline:
                raise WaitTimedOut(f"{what} still {state.status} after {timeout} s", detail=state)
            time.sleep(self._poll_interval)


class AsyncClient(_Endpoints, _Settings):
    """`async with AsyncClient(url, key) as memweb: await memweb.retrieve("support", "refund")`."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 30.0, retry: Optional[RetryPolicy] = None,
                 poll_interval: float = 0.5, transport: Optional[httpx.AsyncBaseTransport] = None):
        self._http = httpx.AsyncClient(transport=transport,
                                       **self._configure(base_url, api_key, timeout, retry, poll_interval))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: _Call) -> Any:
        attempt = 0
        while True:
            outcome = await self._attempt(call)
            wait = self._retry.wait_before_retry(attempt, outcome)
            if wait is None:
                return call.answer(outcome)
            await asyncio.sleep(wait)
            attempt += 1

    async def _attempt(self, call: _Call) -> Union[httpx.Response, httpx.TransportError]:
        try:
            return await self._http.request(call.route.method, call.path, json=call.body, params=call.params,
                                            headers=call.headers)
        except httpx.TransportError as failure:
            return failure

    async def wait_for_episode(self, ingest_id: int, *, timeout: float = 120.0) -> m.Ingest:
        return await self._wait(functools.partial(self.episode_status, ingest_id), f"episode #{ingest_id}", timeout)

    async def wait_for_job(self, job_id: int, *, timeout: float = 300.0) -> m.Job:
        return await self._wait(functools.partial(self.job, job_id), f"job #{job_id}", timeout)

    async def _wait(self, look: Callable[[], Any], what: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            state = await look()
            if state.finished:
                return state
            if time.monotonic() > deadline:
                raise WaitTimedOut(f"{what} still {state.status} after {timeout} s", detail=state)
            await asyncio.sleep(self._poll_interval)
