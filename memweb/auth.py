"""Who may call the JSON API: a signed-in browser session or an agent's API key, then a role check
in the workspace the request acts in. Also the brute-force guard shared by API keys and the login page.

Use `auth=api_auth(Role.OPERATOR, scope=ApiKey.Scope.MEMORY_WRITE)` on a ninja operation: a key
needs that scope, and its user that role in the key's workspace; `api_auth()` (no roles, no scope)
admits anyone authenticated. `api_auth(Role.REVIEWER, review=True)` marks a route that reviews
memories: no key may call it, only a reviewer's session. `request.auth` and `request.user` are the
User; `request.workspace` the workspace (the key's, or the session's); `request.api_key` the key
when one was used (`request_by_key`).
"""
import time
from datetime import timedelta
from functools import wraps

from django.conf import settings
from django.core.cache import cache
from django.db.models import Q
from django.http import JsonResponse
from django.utils import timezone
from ninja.errors import AuthenticationError, AuthorizationError, HttpError
from ninja.security import APIKeyCookie, APIKeyHeader, HttpBearer
from ninja.utils import check_csrf

from memweb.models import ApiKey
from memweb.roles import has_role, role_required
from memweb.workspaces import workspace_activate

NO_CREDENTIALS = "Authentication required: sign in, or send an API key as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
BAD_KEY = "Invalid or revoked API key"
REVIEW_NEEDS_A_PERSON = ("reviewing memories (approve, edit, reject, merge, delete, restore) is a human action: "
                         "sign in to the dashboard as a reviewer; no API key scope allows it")
TOO_MANY_FAILURES = "Too many failed attempts from this address; try again in a few minutes"
# last_used_at is for humans auditing keys: minute resolution saves a write per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


# --- brute-force guard: failures per client address in a fixed window (Django's cache) ---
def client_ip(request) -> str:
    # REMOTE_ADDR only: X-Forwarded-For is client-controlled unless a trusted proxy rewrites it.
    return request.META.get("REMOTE_ADDR") or "unknown"


def _failure_key(scope: str, ip: str) -> str:
    return f"memweb:auth-failures:{scope}:{ip}"


def _max_failures() -> int:
    return settings.MEMWEB_AUTH_MAX_FAILURES


def _failure_window() -> int:
    return settings.MEMWEB_AUTH_FAILURE_WINDOW_SECONDS


def auth_failures_exceeded(*, scope: str, ip: str) -> bool:
    return cache.get(_failure_key(scope, ip), 0) >= _max_failures()


def auth_failures_retry_after(*, scope: str, ip: str) -> int:
    """Whole seconds until the failure window of this address ends (the window when unknown)."""
    started = cache.get(_failure_key(scope, ip) + ":since")
    if started is None:
        return _failure_window()
    return max(1, int(started + _failure_window() - time.time()) + 1)


def auth_failure_record(*, scope: str, ip: str) -> None:
    key = _failure_key(scope, ip)
    # add() starts the window at the first failure; incr() keeps that expiry.
    cache.add(key, 0, timeout=_failure_window())
    cache.add(key + ":since", time.time(), timeout=_failure_window())
    try:
        cache.incr(key)
    except ValueError:  # the window expired between add() and incr()
        cache.add(key, 1, timeout=_failure_window())


def auth_failures_reset(*, scope: str, ip: str) -> None:
    cache.delete_many([_failure_key(scope, ip), _failure_key(scope, ip) + ":since"])


class TooManyFailures(HttpError):
    """429 with the seconds until the address may try again (sent as Retry-After)."""

    def __init__(self, retry_after: int):
        self.retry_after = retry_after
        super().__init__(429, TOO_MANY_FAILURES)


# --- API keys ---
def api_key_of(*, request, secret: str) -> ApiKey:
    """The active key whose secret is `secret` (its user active too), or 401/429. Counts failures per address."""
    ip = client_ip(request)
    if auth_failures_exceeded(scope="api", ip=ip):
        raise TooManyFailures(auth_failures_retry_after(scope="api", ip=ip))
    key = (
        ApiKey.objects.select_related("user", "workspace")
        .filter(key_hash=ApiKey.hash_secret(secret.strip()), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if key is None:
        auth_failure_record(scope="api", ip=ip)
        raise AuthenticationError(401, BAD_KEY)
    api_key_touch(key=key)
    return key


def api_key_touch(*, key: ApiKey) -> None:
    now = timezone.now()
    stale = now - LAST_USED_RESOLUTION
    if key.last_used_at is not None and key.last_used_at >= stale:
        return
    # Conditional so concurrent requests write at most once per minute.
    ApiKey.objects.filter(pk=key.pk).filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale)).update(
        last_used_at=now
    )


def role_check(*, request, user, roles: tuple[str, ...]):
    if roles and not has_role(user, *roles):
        raise AuthorizationError(403, f"needs one of the roles: {', '.join(roles)}")
    request.user = user
    return user


class RouteAccess:
    """What a route asks of its caller; the authorisation-matrix tests read it."""

    def __init__(self, roles: tuple[str, ...], scope: str | None, review: bool):
        self.roles, self.scope, self.review = roles, scope, review

    def key_check(self, *, request, secret: str):
        """The key's user, acting in the key's workspace, if the key may call this route."""
        key = api_key_of(request=request, secret=secret)
        if self.review:
            raise AuthorizationError(403, REVIEW_NEEDS_A_PERSON)
        if self.scope and self.scope not in key.scopes:
            raise AuthorizationError(403, f"this API key lacks the scope {self.scope!r} this route needs")
        request.workspace = key.workspace
        request.api_key = key  # what a program may do can differ from what its user may do signed in
        workspace_activate(user=key.user, workspace=key.workspace)
        return role_check(request=request, user=key.user, roles=self.roles)


def request_by_key(request) -> bool:
    """Whether the request was authenticated by an API key (a program) rather than a session."""
    return getattr(request, "api_key", None) is not None


# --- the three ways in; each carries `.roles` (and `.access`) for the authorisation-matrix test ---
class ApiKeyBearer(HttpBearer):
    def __init__(self, access: RouteAccess):
        self.access, self.roles = access, access.roles
        super().__init__()

    def authenticate(self, request, token):
        return self.access.key_check(request=request, secret=token)


class ApiKeyHeader(APIKeyHeader):
    param_name = "X-API-Key"

    def __init__(self, access: RouteAccess):
        self.access, self.roles = access, access.roles
        super().__init__()

    def authenticate(self, request, key):
        if not key:
            return None
        return self.access.key_check(request=request, secret=key)


class SessionRoleAuth(APIKeyCookie):
    """Django's session, with CSRF on unsafe methods (as ninja's SessionAuth).
    Runs last, so reaching it without a session means no credentials at all."""

    param_name = settings.SESSION_COOKIE_NAME

    def __init__(self, access: RouteAccess):
        self.access, self.roles = access, access.roles
        super().__init__(csrf=True)

    def __call__(self, request):
        if not request.user.is_authenticated:
            raise AuthenticationError(401, NO_CREDENTIALS)
        if not getattr(request, "_ninja_csrf_exempt", False) and check_csrf(request):
            raise HttpError(403, "CSRF check failed: send the X-CSRFToken header with the csrftoken cookie's value")
        return self.authenticate(request, None)

    def authenticate(self, request, key):
        return role_check(request=request, user=request.user, roles=self.roles)


class ApiAuth(list):
    """The value for ninja's `auth=`: key schemes first, so agents never hit the CSRF check."""

    def __init__(self, access: RouteAccess):
        self.access, self.roles = access, access.roles
        super().__init__([ApiKeyBearer(access), ApiKeyHeader(access), SessionRoleAuth(access)])


def api_auth(*roles: str, scope: str | None = None, review: bool = False) -> ApiAuth:
    """`scope`: the ApiKey.Scope a key needs (None: any key); `review`: no key at all."""
    return ApiAuth(RouteAccess(tuple(str(role) for role in roles), str(scope) if scope else None, review))


# --- the OpenAPI schema and its docs page ---
def _presented_key(request) -> str:
    bearer = request.headers.get("Authorization", "")
    if bearer[:7].lower() == "bearer ":
        return bearer[7:].strip()
    return request.headers.get("X-API-Key", "").strip()


SCHEMA_URL_NAME = "openapi-json"


def schema_access(view):
    """The schema for code generators and test tools: any valid API key, whatever its roles, or
    a signed-in user. Its docs page is a page like any other: signed-in users only."""
    signed_in_view = role_required()(view)

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        secret = _presented_key(request)
        is_schema = request.resolver_match.url_name == SCHEMA_URL_NAME
        if not secret or not is_schema or request.user.is_authenticated:
            return signed_in_view(request, *args, **kwargs)
        try:
            api_key_of(request=request, secret=secret)
        except HttpError as exc:
            response = JsonResponse({"detail": str(exc)}, status=exc.status_code)
            if isinstance(exc, TooManyFailures):
                response["Retry-After"] = str(exc.retry_after)
            return response
        return view(request, *args, **kwargs)

    wrapped.required_roles = signed_in_view.required_roles
    return wrapped
