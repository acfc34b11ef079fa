"""memweb-client: a typed Python client for memweb's memory API, sync (`Client`) and async (`AsyncClient`).

It depends on httpx alone; nothing of memweb's server stack is imported.
"""
from memweb_client.client import AsyncClient, Client, RetryPolicy
from memweb_client.errors import (
    BadRequest,
    Conflict,
    FieldProblem,
    Forbidden,
    MemwebConnectionError,
    MemwebError,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    RequestInProgress,
    ServerError,
    StaleVersion,
    Unauthorized,
    ValidationFailed,
    WaitTimedOut,
)
from memweb_client.models import (
    Bank,
    Delivery,
    DMRMSettings,
    EpisodeQueued,
    Experience,
    ExperienceHit,
    ExperiencePage,
    ExperienceRetrieval,
    Hit,
    Ingest,
    Job,
    Me,
    Orb,
    OrbDetail,
    OrbPage,
    OrbRevisions,
    Retrieval,
    Run,
    RunPage,
    RunSummary,
    Trace,
    TracePage,
    Transcripts,
    Transition,
    TransitionsWritten,
    Webhook,
    WebhookCreated,
)

__all__ = [
    "AsyncClient", "BadRequest", "Bank", "Client", "Conflict", "DMRMSettings", "Delivery", "EpisodeQueued",
    "Experience", "ExperienceHit", "ExperiencePage", "ExperienceRetrieval", "FieldProblem", "Forbidden", "Hit",
    "Ingest", "Job", "Me", "MemwebConnectionError", "MemwebError", "NotFound", "Orb", "OrbDetail", "OrbPage",
    "OrbRevisions", "PayloadTooLarge", "RateLimited", "RequestInProgress", "Retrieval", "RetryPolicy", "Run",
    "RunPage", "RunSummary", "ServerError", "StaleVersion", "Trace", "TracePage", "Transcripts",
    "Transition", "TransitionsWritten", "Unauthorized",
    "ValidationFailed", "WaitTimedOut", "Webhook", "WebhookCreated",
]
