"""Every API route the client calls: its method, OpenAPI path, JSON body type, query parameters and
answer types by status. The clients' methods are built on these, and a test in memweb's suite checks
each one against the served OpenAPI document, so the client cannot drift from the server."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Optional

from memweb_client import models as m


@dataclasses.dataclass(frozen=True)
class Route:
    method: str
    path: str  # the OpenAPI path template, e.g. /api/orbs/banks/{slug}
    answers: Mapping[int, Any]  # status -> a dataclass, List[dataclass], or None (body not read)
    body: Optional[type] = None  # the TypedDict of its JSON body
    query: tuple[str, ...] = ()

    @property
    def writes(self) -> bool:
        return self.method != "GET"

    def url(self, **path_params: Any) -> str:
        return self.path.format(**path_params)


def _get(path: str, answer: Any, query: tuple[str, ...] = ()) -> Route:
    return Route("GET", path, {200: answer}, query=query)


ME = _get("/api/me", m.Me)

BANKS = _get("/api/orbs/banks", list[m.Bank], query=("archived",))
BANK = _get("/api/orbs/banks/{slug}", m.Bank)
BANK_CREATE = Route("POST", "/api/orbs/banks", {201: m.Bank}, body=m.BankIn)

EPISODE_WRITE = Route("POST", "/api/orbs/banks/{slug}/episodes", {202: m.EpisodeQueued, 200: m.Ingest, 201: m.Ingest},
                      body=m.EpisodeIn, query=("sync",))
EPISODE_STATUS = _get("/api/orbs/episodes/{ingest_id}", m.Ingest)
REMEMBER = Route("POST", "/api/orbs/banks/{slug}/remember", {200: m.Orb, 201: m.Orb}, body=m.RememberIn)
RETRIEVE = Route("POST", "/api/orbs/banks/{slug}/retrieve", {200: m.Retrieval}, body=m.RetrieveIn)
RETRIEVAL_OUTCOME = Route("POST", "/api/orbs/retrievals/{retrieval_id}/outcome", {200: None},
                          body=m.RetrievalOutcomeIn)

ORBS = _get("/api/orbs/orbs", m.OrbPage, query=("bank", "status", "domain", "emotion", "source", "source_label",
                                                 "customer_key", "q", "page", "page_size"))
ORB = _get("/api/orbs/orbs/{orb_id}", m.OrbDetail)
ORB_REVISIONS = _get("/api/orbs/orbs/{orb_id}/revisions", m.OrbRevisions)
CUSTOMER_ERASURE = Route("POST", "/api/orbs/banks/{slug}/erasures", {202: m.Job}, body=m.ErasureIn)

TRANSITIONS = Route("POST", "/api/orbs/experiences/banks/{slug}/transitions", {201: m.TransitionsWritten},
                    body=m.TransitionsIn)
EXPERIENCES_RETRIEVE = Route("POST", "/api/orbs/experiences/banks/{slug}/retrieve", {200: m.ExperienceRetrieval},
                             body=m.ExperienceRetrieveIn)
DMRM_SETTINGS = _get("/api/orbs/experiences/banks/{slug}/settings", m.DMRMSettings)
DMRM_SETTINGS_WRITE = Route("PUT", "/api/orbs/experiences/banks/{slug}/settings", {200: m.DMRMSettings},
                            body=m.DMRMSettingsIn)
EXPERIENCES = _get("/api/orbs/experiences/banks/{slug}/experiences", m.ExperiencePage,
                   query=("memory", "status", "domain", "q", "page", "page_size"))
EXPERIENCE = _get("/api/orbs/experiences/banks/{slug}/experiences/{experience_id}", m.Experience)

JOB = _get("/api/jobs/{job_id}", m.Job)

RUNS = _get("/api/evaluation/runs/", m.RunPage, query=("status", "memory_mode", "q", "limit", "offset"))
RUN = _get("/api/evaluation/runs/{run_id}", m.Run)
RUN_TRANSCRIPTS = _get("/api/evaluation/runs/compare/transcripts", m.Transcripts, query=("a", "b", "task", "trial"))
TRACES = _get("/api/evaluation/traces", m.TracePage,
              query=("role", "model", "status", "min_latency", "run", "page", "page_size"))
RUN_CREATE = Route("POST", "/api/evaluation/runs/", {201: m.Run, 202: m.Run}, body=dict)  # the whole RunSpec
RUN_CANCEL = Route("POST", "/api/evaluation/runs/{run_id}/cancel", {200: m.Run})

WEBHOOKS = _get("/api/webhooks/", list[m.Webhook])
WEBHOOK_CREATE = Route("POST", "/api/webhooks/", {201: m.WebhookCreated}, body=m.WebhookIn)
WEBHOOK_SWITCH = Route("PATCH", "/api/webhooks/{webhook_id}", {200: m.Webhook}, body=m.WebhookSwitchIn)
WEBHOOK_DELETE = Route("DELETE", "/api/webhooks/{webhook_id}", {204: None})
WEBHOOK_TEST = Route("POST", "/api/webhooks/{webhook_id}/test", {202: m.Delivery})
DELIVERIES = _get("/api/webhooks/deliveries", m.DeliveryPage, query=("webhook", "page", "page_size"))
REDELIVER = Route("POST", "/api/webhooks/deliveries/{delivery_id}/redeliver", {202: m.Delivery})
