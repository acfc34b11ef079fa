"""memweb's API schemas, the one error answer every app's API declares (`ErrorOut`), and request
bodies that take what they say and nothing else (`StrictBody`).

pydantic's lax mode turns `k: true` into 1 and `success: "yes"` into True, and ignores unknown
fields (a misspelt `kk` falls back to the default silently). A body model inheriting StrictBody
refuses both with a 422 naming the field. Only scalar fields (bool, int, float and their optional
forms) are made strict: enums, dates and UUIDs still arrive as JSON strings and must be parsed.
"""
import types
import typing
from datetime import datetime
from typing import Literal
from uuid import UUID

from ninja import Field, Schema
from pydantic import BaseModel, ConfigDict, Strict

from memweb.models import Job, Webhook
from memweb.webhooks import webhook_event_values

_STRICT_SCALARS = (bool, int, float)


class ErrorOut(Schema):
    """Every refusal of every app's API: {"detail": a sentence} (docs/ARCHITECTURE.md, API errors)."""

    detail: str


class FieldProblemOut(Schema):
    loc: list[str | int]
    msg: str


class FieldProblemsOut(Schema):
    """A 422 caused by input: one {"loc", "msg"} entry per refused field."""

    detail: list[FieldProblemOut]


def _is_scalar(annotation) -> bool:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return len(inner) == 1 and inner[0] in _STRICT_SCALARS
    return annotation in _STRICT_SCALARS


class StrictBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs):
        super().__pydantic_init_subclass__(**kwargs)
        loose = [field for field in cls.model_fields.values()
                 if _is_scalar(field.annotation) and not any(isinstance(m, Strict) for m in field.metadata)]
        for field in loose:
            field.metadata.append(Strict())
        if loose:
            cls.model_rebuild(force=True)


class LivenessOut(Schema):
    status: str


class DatabaseOut(Schema):
    ok: bool
    postgres: str
    pgvector: str
    error: str


class BrokerOut(Schema):
    ok: bool
    url: str
    latency_ms: int
    waiting: int | None
    error: str


class WorkerOut(Schema):
    hostname: str
    instance: str
    pid: int
    processes: list[int]
    started_at: datetime
    seen_at: datetime


class EmbeddingOut(Schema):
    model: str
    dimension: int
    loaded: bool
    backend: str  # onnx (ONNX Runtime, its export checked against torch) or torch; empty when it cannot load
    backend_note: str  # why all-MiniLM-L6-v2 embeds with torch, when it does
    error: str  # why the model cannot be loaded, when it cannot


class LLMRoleOut(Schema):
    role: str
    offline: bool
    backend: str
    model: str
    base_url: str
    json_mode_setting: str
    capabilities: dict
    last_status: str | None
    last_error: str
    last_at: datetime | None
    last_error_at: datetime | None


class HealthOut(Schema):
    database: DatabaseOut
    broker: BrokerOut
    workers: list[WorkerOut]
    embedding: EmbeddingOut
    llm_roles: list[LLMRoleOut]


class WorkspaceRefOut(Schema):
    slug: str
    name: str


class MeOut(Schema):
    username: str
    roles: list[str] = Field(description="The user's roles in the workspace the request acts in.")
    workspace: WorkspaceRefOut = Field(description="Where this key (or the signed-in session) acts.")
    credential: Literal["api_key", "session"]
    key_name: str | None = Field(description="The API key's name; null for a session.")
    key_prefix: str | None = Field(description="The key's first characters, as the API keys page shows them.")
    scopes: list[str] | None = Field(description="What the API key may do; null for a session, which its roles "
                                                 "decide alone.")


class WebhookIn(StrictBody, Schema):
    url: str = Field(min_length=1, max_length=Webhook._meta.get_field("url").max_length,
                     description="Where to POST events: an http:// or https:// URL (redirects are not followed).")
    events: list[str] = Field(min_length=1, description=f"Event types to receive: {', '.join(webhook_event_values())}.")
    bank: str = Field("", max_length=Webhook._meta.get_field("bank").max_length,
                      description="A memory bank's slug: only that bank's events. Empty: every event.")
    description: str = Field("", max_length=Webhook._meta.get_field("description").max_length)


class WebhookSwitchIn(StrictBody, Schema):
    active: bool = Field(description="false pauses the webhook (its deliveries, and the events it misses, wait), "
                                     "true resumes it.")
    replay_missed: bool = Field(default=True, description="On resume: send the events that happened while it was "
                                                          "paused (true), or give them up unsent (false).")


class WebhookOut(Schema):
    id: int
    url: str
    description: str
    events: list[str]
    bank: str
    active: bool
    paused_at: datetime | None
    created_by: str | None
    created_at: datetime

    @staticmethod
    def resolve_created_by(webhook: Webhook) -> str | None:
        return webhook.created_by.get_username() if webhook.created_by else None


class WebhookCreatedOut(WebhookOut):
    secret: str = Field(description="Verifies X-Memweb-Signature. Shown only in this answer: keep it now.")


class WebhookAttemptOut(Schema):
    at: datetime
    status_code: int | None
    error: str


class WebhookDeliveryOut(Schema):
    id: int
    uuid: UUID = Field(description="The X-Memweb-Delivery header: the same on every retry and redelivery.")
    webhook_id: int
    event: str
    status: str
    attempts: int
    attempt_log: list[WebhookAttemptOut]
    last_status_code: int | None
    last_error: str
    next_attempt_at: datetime | None
    created_at: datetime
    delivered_at: datetime | None
    payload: dict


class JobOut(Schema):
    id: int
    kind: str
    title: str
    status: Job.Status = Field(description="queued, running, succeeded or failed; poll until it is one of the last two")
    done: int
    total: int | None = Field(description="Empty until the job knows its size")
    progress_percent: int
    message: str = Field(description="What the job is doing or did")
    error: str = Field(description="Why it failed (empty unless failed)")
    result: dict = Field(description="What it made (e.g. the bank's slug); `url` is its page")
    result_url: str | None = Field(description="The page of what it made, once succeeded")
    status_url: str = Field(description="This job in the API: poll it")
    url: str = Field(description="The job's page, with its progress card")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
