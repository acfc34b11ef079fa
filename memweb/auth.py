"""Who may call the JSON API: a signed-in browser session or an agent's API key, then a role check
in the workspace the request acts in. Also the brute-force guard shared by API keys and the sign-in pages
(memweb's and the admin site's).

Use `auth=api_auth(Role.OPERATOR, scope=OrbsScope.MEMORY_WRITE)` on a ninja operation: a key
needs that scope, and its user that role in the key's workspace; `api_auth()` (no roles, no scope)
admits anyone authenticated. `api_auth(Role.REVIEWER, review=True)` marks a route that reviews
memories: no key may call it, only a reviewer's session. `request.auth` and `request.user` are the
User; `request.workspace` the workspace (the key's, or the session's); `request.api_key` the key
when one was used (`request_by_key`).
"""
import ipaddress
import math
import unicodedata
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import wraps

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import F, Q
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.crypto import salted_hmac
from ninja.errors import AuthenticationError, AuthorizationError, HttpError
from ninja.security import APIKeyCookie, APIKeyHeader, HttpBearer
from ninja.utils import check_csrf

from memweb.models import ApiKey, AuthFailure
from memweb.registry import api_scopes
from memweb.roles import has_role, role_required
from memweb.scoping import workspace_scope_switch
from memweb.workspaces import SAFE_METHODS, archived_refusal, workspace_activate

NO_CREDENTIALS = "Authentication required: sign in, or send an API key as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
BAD_KEY = "Invalid or revoked API key"
EXPIRED_KEY = "This API key expired at the end of {day}: ask for a new key"
REVIEW_NEEDS_A_PERSON = ("reviewing memories (approve, edit, reject, merge, delete, restore) is a human action: "
                         "sign in to the dashboard as a reviewer; no API key scope allows it")
TOO_MANY_FAILURES = ("Too many failed attempts from this address or with this key prefix; "
                     "try again in a few minutes")
# last_used_at is for humans auditing keys: minute resolution saves a write per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


# --- brute-force guard: failures per client address, per account for sign-ins and per key prefix for API keys,
# in a fixed window ---
LOGIN, API = "login", "api"
Counter = tuple[str, str, str]  # scope, kind, subject: one memweb.models.AuthFailure row
# One statement, so parallel attempts each get their own number: a lapsed window starts again at 1.
_COUNT_ONE = f"""
INSERT INTO {AuthFailure._meta.db_table} AS t (scope, kind, subject, count, window_started_at)
VALUES (%(scope)s, %(kind)s, %(subject)s, 1, %(now)s)
ON CONFLICT (scope, kind, subject) DO UPDATE SET
    count = CASE WHEN t.window_started_at <= %(lapsed)s THEN 1 ELSE t.count + 1 END,
    window_started_at = CASE WHEN t.window_started_at <= %(lapsed)s THEN %(now)s ELSE t.window_started_at END
RETURNING count, window_started_at"""


def client_ip(request) -> str:
    """REMOTE_ADDR or, when that is a trusted proxy (MEMWEB_TRUSTED_PROXIES), the nearest X-Forwarded-For
    hop that is not one: the hops to its left were written by the client and prove nothing."""
    address = request.META.get("REMOTE_ADDR") or "unknown"
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    while hops and _is_trusted_proxy(address):
        address = hops.pop()
    return address


def _is_trusted_proxy(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in settings.MEMWEB_TRUSTED_PROXIES)


def _counter(scope: str, kind: str, value: str) -> Counter:
    return scope, kind, salted_hmac("memweb.auth.failures", f"{kind}:{value}").hexdigest()


def _address(scope: str, ip: str) -> Counter:
    return _counter(scope, AuthFailure.Kind.ADDRESS, ip)


def _account(username: str) -> Counter:
    # Folded as the sign-in form folds it, and more: "Alice" and "alice" share one counter.
    return _counter(LOGIN, AuthFailure.Kind.ACCOUNT, unicodedata.normalize("NFKC", username).casefold())


def _max_failures() -> int:
    return settings.MEMWEB_AUTH_MAX_FAILURES


def _lapsed(now: datetime) -> datetime:
    """A window that started at or before this has ended."""
    return now - timedelta(seconds=settings.MEMWEB_AUTH_FAILURE_WINDOW_SECONDS)


def _retry_after(started: datetime, now: datetime) -> int:
    return max(1, math.ceil((started - _lapsed(now)).total_seconds()))


def _rows(counter: Counter):
    scope, kind, subject = counter
    return AuthFailure.objects.filter(scope=scope, kind=kind, subject=subject)


def _live(counter: Counter, now: datetime) -> tuple[int, datetime | None]:
    row = _rows(counter).filter(window_started_at__gt=_lapsed(now)).values_list("count", "window_started_at").first()
    return row or (0, None)


def _count_one(counter: Counter, now: datetime) -> tuple[int, datetime]:
    scope, kind, subject = counter
    with connection.cursor() as cursor:
        cursor.execute(_COUNT_ONE, {"scope": scope, "kind": kind, "subject": subject, "now": now,
                                    "lapsed": _lapsed(now)})
        return cursor.fetchone()


def _places_take(counters: list[Counter], now: datetime) -> list[datetime]:
    """Count one attempt in each counter, or, when any is full, in none: then the window starts of the
    full ones. One transaction, always locking the address's row before the account's, so each
    attempt sees every other attempt's places either all taken or not at all."""
    with transaction.atomic():
        taken = [_count_one(counter, now) for counter in counters]
        full = [started for count, started in taken if count > _max_failures()]
        if full:
            transaction.set_rollback(True)
    return full


def _give_back(counters: list[Counter]) -> None:
    for counter in counters:
        _rows(counter).filter(count__gt=0).update(count=F("count") - 1)


def auth_failures_prune() -> int:
    """Worker beat: forget the counters whose window has ended."""
    return AuthFailure.objects.filter(window_started_at__lte=_lapsed(timezone.now())).delete()[0]


def login_limited(request, *, sign_in: Callable[[], HttpResponse], next_url: str = "") -> HttpResponse:
    """Run a sign-in form's view (`sign_in`) under the limits of the client's address and of the account
    it names. Each POST first takes a place in both counters, atomically, and beyond the limit is
    answered 429 without its password being checked, so parallel attempts cannot slip past together.
    A failure keeps its places; anything else gives them back. Signing in clears the account's
    counter, never the address's: signing in to one's own account buys no guesses at another's."""
    if request.method != "POST":
        return sign_in()
    now = timezone.now()
    counters = [_address(LOGIN, client_ip(request)), _account(request.POST.get("username", ""))]
    full = _places_take(counters, now)
    if full:
        return _sign_in_refused(request, max(_retry_after(started, now) for started in full), next_url)
    response = sign_in()
    if response.status_code == 200:  # the form again, with its error: a failed attempt
        return response
    _give_back(counters)
    if request.user.is_authenticated and _account(request.user.get_username()) == counters[1]:
        _rows(counters[1]).delete()
    return response


def _sign_in_refused(request, retry_after: int, next_url: str) -> HttpResponse:
    context = {"form": AuthenticationForm(request), "blocked": True, "next": request.POST.get("next") or next_url}
    response = render(request, "registration/login.html", context, status=429)
    response["Retry-After"] = str(retry_after)
    return response


RESET = "reset"


def reset_requests_over_limit(request, email: str) -> bool:
    """Count a password-reset request against the client's address and the address it names; True
    when either has asked MEMWEB_AUTH_MAX_FAILURES times in the window (then nothing is sent). Every
    request counts, sent or not, so the limit says nothing about which addresses have accounts."""
    counters = [_address(RESET, client_ip(request)), _counter(RESET, AuthFailure.Kind.ACCOUNT, email.strip().casefold())]
    return bool(_places_take(counters, timezone.now()))


class TooManyFailures(HttpError):
    """429 with the seconds until the address may try again (sent as Retry-After)."""

    def __init__(self, retry_after: int):
        self.retry_after = retry_after
        super().__init__(429, TOO_MANY_FAILURES)


# --- API keys ---
def _key_prefix(secret: str) -> Counter:
    return _counter(API, AuthFailure.Kind.KEY_PREFIX, secret[: ApiKey.PREFIX_LENGTH])


def api_key_of(*, request, secret: str) -> ApiKey:
    """The active key whose secret is `secret` (its user active too, not expired), or 401/429.

    A valid key is always served: the key is looked up before any counter is read, so nobody's bad
    keys (from the same address behind a proxy, or with the same prefix) lock a working agent out.
    A bad key is counted twice, per client address and per presented key prefix, and answered 429
    instead of 401 once either counter is full: a client retrying a wrong or revoked key is told to
    stop. Unlike a sign-in, a key takes no place in a counter before it is checked: that would cost
    every agent call writes, and a 256-bit key is not guessed by a few attempts in parallel."""
    secret = secret.strip()
    key = (
        ApiKey.all_workspaces.select_related("user", "workspace")  # the key itself names the workspace
        .filter(key_hash=ApiKey.hash_secret(secret), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if key is not None and not key.has_expired:
        api_key_touch(key=key)
        return key
    # An expired key is refused, and counted, as a revoked one, but told why.
    refusal = EXPIRED_KEY.format(day=key.expires_on.isoformat()) if key is not None else BAD_KEY
    now = timezone.now()
    counters = [_address(API, client_ip(request)), _key_prefix(secret)]
    full = [started for count, started in (_live(counter, now) for counter in counters) if count >= _max_failures()]
    if full:
        raise TooManyFailures(max(_retry_after(started, now) for started in full))
    for counter in counters:
        _count_one(counter, now)
    raise AuthenticationError(401, refusal)


def api_key_touch(*, key: ApiKey) -> None:
    now = timezone.now()
    stale = now - LAST_USED_RESOLUTION
    if key.last_used_at is not None and key.last_used_at >= stale:
        return
    # Conditional so concurrent requests write at most once per minute.
    ApiKey.all_workspaces.filter(pk=key.pk).filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale)).update(
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
        if key.workspace.is_archived and request.method not in SAFE_METHODS:
            raise HttpError(409, archived_refusal(key.workspace))
        request.workspace = key.workspace
        request.api_key = key  # what a program may do can differ from what its user may do signed in
        workspace_activate(user=key.user, workspace=key.workspace)
        workspace_scope_switch(key.workspace)
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
    """`scope`: the scope a key needs, one an app declares (memweb.registry.api_scopes; None: any
    key); `review`: no key at all."""
    if scope is not None and scope not in {declared.value for declared in api_scopes()}:
        raise ImproperlyConfigured(f"API scope {scope!r} is declared by no app (memweb.registry.api_scopes)")
    return ApiAuth(RouteAccess(tuple(str(role) for role in roles), str(scope) if scope else None, review))


# --- the OpenAPI schema and its docs page ---
def presented_key(request) -> str:
    bearer = request.headers.get("Authorization", "")
    if bearer[:7].lower() == "bearer ":
        return bearer[7:].strip()
    return request.headers.get("X-API-Key", "").strip()


SCHEMA_URL_NAME = "openapi-json"


def schema_access(view):
    """The schema and its docs page: any valid API key, whatever its roles, or a signed-in user.
    Without either, the schema, which programs read, answers a JSON 401; the docs page, which people
    read, sends the browser to sign in. A bad key answers JSON (401, or 429) on both."""
    signed_in_view = role_required()(view)

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        secret = presented_key(request)
        if request.user.is_authenticated:
            return signed_in_view(request, *args, **kwargs)
        if not secret:
            if request.resolver_match.url_name == SCHEMA_URL_NAME:
                return _refused(AuthenticationError(401, NO_CREDENTIALS))
            return signed_in_view(request, *args, **kwargs)
        try:
            api_key_of(request=request, secret=secret)
        except HttpError as exc:
            return _refused(exc)
        return view(request, *args, **kwargs)

    wrapped.required_roles = signed_in_view.required_roles
    return wrapped


def _refused(exc: HttpError) -> JsonResponse:
    response = JsonResponse({"detail": str(exc)}, status=exc.status_code)
    if isinstance(exc, TooManyFailures):
        response["Retry-After"] = str(exc.retry_after)
    elif exc.status_code == 401:
        response["WWW-Authenticate"] = "Bearer"
    return response
