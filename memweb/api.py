"""The NinjaAPI root: every app's Router is mounted here under /api/.

Every operation needs a signed-in session or an API key unless it says
otherwise (`auth=api_auth(...)` to require roles, `auth=None` to be public).
"""
from datetime import datetime

from ninja import NinjaAPI, Schema

from annotation.api import router as annotation_router
from evaluation.api import router as evaluation_router
from memweb.auth import api_auth
from memweb.health import health_report, liveness
from memweb.roles import role_required, user_roles
from orbs.api import router as orbs_router

api = NinjaAPI(
    title="memweb API",
    version="1",
    urls_namespace="api",
    description="Agents authenticate with an API key: `Authorization: Bearer <key>` or `X-API-Key: <key>`.",
    auth=api_auth(),
    docs_decorator=role_required(),
)
api.add_router("/orbs/", orbs_router)
api.add_router("/evaluation/", evaluation_router)
api.add_router("/annotation/", annotation_router)


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
    pid: int
    started_at: datetime
    seen_at: datetime


class EmbeddingOut(Schema):
    model: str
    dimension: int
    loaded: bool


class LLMRoleOut(Schema):
    role: str
    offline: bool
    backend: str
    model: str
    base_url: str
    last_status: str | None
    last_error: str
    last_at: datetime | None


class HealthOut(Schema):
    database: DatabaseOut
    broker: BrokerOut
    workers: list[WorkerOut]
    embedding: EmbeddingOut
    llm_roles: list[LLMRoleOut]


class MeOut(Schema):
    username: str
    roles: list[str]


@api.get("/health", auth=None, response={200: LivenessOut, 503: LivenessOut}, tags=["health"])
def health_live(request):
    """Liveness for load balancers: no credentials, no details."""
    return (200, {"status": "ok"}) if liveness() else (503, {"status": "database unavailable"})


@api.get("/health/details", response=HealthOut, tags=["health"])
def health_details(request):
    return health_report()


@api.get("/me", response=MeOut, tags=["auth"])
def me(request):
    """Who this key or session acts as, and its roles."""
    return {"username": request.auth.get_username(), "roles": sorted(user_roles(request.auth))}
