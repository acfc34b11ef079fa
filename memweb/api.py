"""The NinjaAPI root: every app's Router is mounted here under /api/.

Every operation needs a signed-in session or an API key unless it says
otherwise (`auth=api_auth(...)` to require roles, `auth=None` to be public).
"""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from ninja import NinjaAPI
from ninja.errors import HttpError, ValidationError
from ninja.parser import Parser
from ninja.responses import Status

from annotation.api import router as annotation_router
from evaluation.api import router as evaluation_router
from evaluation.memory_layers.contract_api import router as memory_layer_router
from memweb.auth import TooManyFailures, api_auth, request_by_key, schema_access
from memweb.errors import validation_body
from memweb.health import health_report, liveness
from memweb.job_api import router as jobs_router
from memweb.json_input import JsonTooDeep, json_loads_bounded
from memweb.openapi import errors_declare
from memweb.roles import user_roles
from memweb.schemas import HealthOut, LivenessOut, MeOut
from memweb.services import unstorable_at
from memweb.webhooks_api import router as webhooks_router
from orbs.api import router as orbs_router


def _refuse_unstorable(value, where: tuple) -> None:
    found = unstorable_at(value, where)
    if found:
        raise ValidationError([{"type": "unstorable", "loc": list(found[0]), "msg": found[1]}])


class StorableParser(Parser):
    """Refuses, as a 422 naming the field, values the database would reject deep inside a service
    with a 500: PostgreSQL's text and jsonb hold no NUL, unpaired surrogate, NaN or Infinity."""

    def parse_body(self, request):
        try:
            data = json_loads_bounded(request.body)  # Python's reader recurses: a deep body would be a 500
        except JsonTooDeep as too_deep:
            raise ValidationError([{"type": "too_deep", "loc": ["body"], "msg": str(too_deep)}]) from None
        _refuse_unstorable(data, ("body",))
        return data

    def parse_querydict(self, data, list_fields, request):
        parsed = super().parse_querydict(data, list_fields, request)
        _refuse_unstorable(parsed, ("query" if data is request.GET else "form",))
        return parsed


class MemwebAPI(NinjaAPI):
    def create_response(self, request, data, *, status=None, temporal_response=None):
        # Every 422, whichever route or handler made it, in one shape (memweb.errors).
        if (temporal_response.status_code if temporal_response else status) == 422:
            data = validation_body(data)
        return super().create_response(request, data, status=status, temporal_response=temporal_response)

    def get_openapi_schema(self, *args, **kwargs):
        schema = super().get_openapi_schema(*args, **kwargs)
        return errors_declare(schema, body_limit_kb=settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024)


api = MemwebAPI(
    title="memweb API",
    version="1",
    urls_namespace="api",
    description="Agents authenticate with an API key: `Authorization: Bearer <key>` or `X-API-Key: <key>`. "
                "This schema (`/api/openapi.json`) answers any valid key, so code generators can read it. Every error "
                "is `{\"detail\": ...}`: a sentence, or for every 422 a list of refused fields, each with its `loc` and "
                "`msg` (an import's 422 also carries its report beside it). Text "
                "fields refuse NUL characters and unpaired surrogates, numbers refuse NaN and Infinity.",
    auth=api_auth(),
    docs_decorator=schema_access,
    parser=StorableParser(),
)
api.add_router("/orbs/", orbs_router)
api.add_router("/evaluation/", evaluation_router)
api.add_router("/annotation/", annotation_router)
api.add_router("/memory-layer/", memory_layer_router)
api.add_router("/webhooks/", webhooks_router)
api.add_router("/jobs/", jobs_router)


@api.exception_handler(HttpError)
def http_error(request, exc: HttpError):
    # django-ninja answers any failure of the body parser with 400 "Cannot parse request body";
    # say what failed instead: a refused value is a 422 naming the field, bad JSON says where.
    if isinstance(exc.__cause__, ValidationError):
        return api.on_exception(request, exc.__cause__)
    if isinstance(exc.__cause__, ValueError):  # JSONDecodeError, UnicodeDecodeError
        return api.create_response(request, {"detail": f"the request body is not valid JSON: {exc.__cause__}"},
                                   status=400)
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


@api.exception_handler(TooManyFailures)
def too_many_failures(request, exc: TooManyFailures):
    response = api.create_response(request, {"detail": str(exc)}, status=429)
    response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(RequestDataTooBig)
def body_too_big(request, exc: RequestDataTooBig):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024
    return api.create_response(request, {"detail": f"the request body is larger than {limit} KB"}, status=413)


@api.get("/health", auth=None, response={200: LivenessOut, 503: LivenessOut}, tags=["health"])
def health_live(request):
    """Liveness for load balancers: no credentials, no details."""
    return Status(200, {"status": "ok"}) if liveness() else Status(503, {"status": "database unavailable"})


@api.get("/health/details", response=HealthOut, tags=["health"])
def health_details(request):
    return health_report()


@api.get("/me", response=MeOut, tags=["auth"])
def me(request):
    """Who this key or session acts as: the user, their roles in the workspace it acts in, and, for a key,
    its name and scopes."""
    key = request.api_key if request_by_key(request) else None
    return {"username": request.auth.get_username(), "roles": sorted(user_roles(request.auth)),
            "workspace": request.workspace, "credential": "api_key" if key else "session",
            "key_name": key.name if key else None, "key_prefix": key.prefix if key else None,
            "scopes": sorted(key.scopes) if key else None}
