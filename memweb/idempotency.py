"""A retried client call changes nothing: a write under /api/ sent with an `Idempotency-Key` header
runs once per caller and key; a retry with the same key gets the first answer back (with
`Idempotent-Replayed: true`) instead of writing again.

- The key belongs to the credential that sent it: one API key, or one user's session in one
  workspace. A replay therefore only repeats an answer that very credential was given; another key
  of the same user (with other scopes) has keys of its own, and its request runs and meets the
  route's own checks. A request without valid credentials passes through to the route's 401.
- The key is recorded in the transaction of the request's effect: the request runs inside one
  database transaction that also writes the stored answer, so both commit or neither does (a
  database crash or a dropped connection leaves no effect without its key, and no key without its
  effect). While it runs, the key is held by a transaction-level advisory lock: a concurrent retry
  is a 409 with Retry-After, and a request whose transaction died (its process or connection gone)
  holds nothing, so its retry runs at once.
- The same key with another method, path (query string included) or body is a 422.
- Stored and replayed: 2xx and 4xx answers. A 5xx rolls the request back and stores nothing, so a
  retry runs again; 401/403/429 judge the credentials or the rate, not the request, and are not stored.
- Keys are forgotten after MEMWEB_IDEMPOTENCY_TTL_SECONDS; expired rows are deleted when a key is
  used, so no periodic job is needed.
"""
import hashlib
import json
import re
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import connection, transaction
from django.http import HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.utils import timezone

from memweb.auth import presented_key
from memweb.middleware import API_PREFIX
from memweb.models import ApiKey, IdempotentRequest

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
KEY_FORMAT = re.compile(r"[\x21-\x7e]{1,255}")  # visible ASCII, as a header value carries it intact
KEY_FORMAT_TEXT = "1 to 255 visible ASCII characters (no spaces)"
NOT_STORED = frozenset({401, 403, 429})
RETRY_AFTER_SECONDS = 1
# pg_try_advisory_xact_lock's first key: names this lock among the others memweb takes
# (orbs.services.history has its own).
_LOCK_CLASS = 0x6964  # "id"


class IdempotencyKeys:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        key = request.headers.get(HEADER)
        if key is None or request.method not in WRITE_METHODS or not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        caller = _caller(request)
        if caller is None:
            return self.get_response(request)
        if not KEY_FORMAT.fullmatch(key):
            return _header_refusal(f"{HEADER} must be {KEY_FORMAT_TEXT}; got {key!r}")
        body_hash = _body_hash(request)
        if body_hash is None:
            return self.get_response(request)
        request_fields = {"method": request.method, "path": request.get_full_path(), "body_hash": body_hash}
        _forget_expired()
        return self._once(request, owner={**caller, "key": key}, request_fields=request_fields)

    def _once(self, request, *, owner: dict, request_fields: dict) -> HttpResponse:
        """Run the request and record its answer in one transaction, or answer from the record."""
        with transaction.atomic():
            if not _lock(owner):
                return _in_progress(owner["key"])
            row = IdempotentRequest.objects.filter(**owner).first()
            if row is not None:
                return _answer_from(row, key=owner["key"], request_fields=request_fields)
            response = self.get_response(request)
            _settle(response, owner=owner, request_fields=request_fields)
            return response


def _caller(request) -> dict | None:
    """Whose key space this is (the user and which of their credentials), or None for a request the
    route will refuse with 401."""
    secret = presented_key(request)
    if secret:
        # A look-up only, not api_key_user(): the route authenticates again, and must count a bad
        # key as one failed attempt, not two.
        found = (ApiKey.all_workspaces.filter(key_hash=ApiKey.hash_secret(secret), revoked_at__isnull=True,
                                       user__is_active=True)
                 .values_list("pk", "user_id").first())
        return None if found is None else {"user_id": found[1], "caller": f"key:{found[0]}"}
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    workspace = getattr(request, "workspace", None)
    return {"user_id": user.pk, "caller": f"session:{workspace.pk if workspace else ''}"}


def _body_hash(request) -> str | None:
    """None when the body cannot be read here: the route then answers it (413, 400) as without a key."""
    try:
        return hashlib.sha256(request.body).hexdigest()
    except RequestDataTooBig:
        if request.content_type != "multipart/form-data":
            return None
    # An upload larger than DATA_UPLOAD_MAX_MEMORY_SIZE, which only the multipart parser may read.
    try:
        return _upload_hash(request)
    except (MultiPartParserError, TooManyFieldsSent, TooManyFilesSent):
        return None


def _upload_hash(request) -> str:
    digest = hashlib.sha256()
    for name, values in sorted(request.POST.lists()):
        digest.update(json.dumps([name, values]).encode())
    for name, uploads in sorted(request.FILES.lists()):
        for upload in uploads:
            digest.update(json.dumps([name, upload.name]).encode())
            for chunk in upload.chunks():
                digest.update(chunk)
            upload.seek(0)  # the route reads the file again
    return digest.hexdigest()


def _lock(owner: dict) -> bool:
    """Hold the key until this transaction ends; False while another live transaction holds it. A
    transaction that dies (its process, its connection or the database gone) releases it at once."""
    digest = hashlib.sha256(f"{owner['user_id']}:{owner['caller']}:{owner['key']}".encode()).digest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)",
                       [_LOCK_CLASS, int.from_bytes(digest[:4], "big", signed=True)])
        return cursor.fetchone()[0]


def _forget_expired() -> None:
    # Before the request's transaction: a delete there would hold the expired rows until it ends.
    cutoff = timezone.now() - timedelta(seconds=settings.MEMWEB_IDEMPOTENCY_TTL_SECONDS)
    IdempotentRequest.objects.filter(created_at__lt=cutoff).delete()


def _matches(row: IdempotentRequest, request_fields: dict) -> bool:
    return all(getattr(row, name) == value for name, value in request_fields.items())


def _answer_from(row: IdempotentRequest, *, key: str, request_fields: dict) -> HttpResponse:
    if not _matches(row, request_fields):
        return _header_refusal(f"{HEADER} {key!r} was used with a different request (first {row.method} "
                               f"{row.path}, with its own body); send a new key for a new request")
    return _replay(row)


def _in_progress(key: str) -> JsonResponse:
    response = JsonResponse({"detail": f"A request with {HEADER} {key!r} is still in progress; "
                                       f"retry after it has finished"}, status=409)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def _replay(row: IdempotentRequest) -> HttpResponse:
    response = HttpResponse(row.body, status=row.status_code, content_type=row.content_type or None)
    if row.location:
        response["Location"] = row.location
    response[REPLAYED_HEADER] = "true"
    return response


def _header_refusal(message: str) -> JsonResponse:
    # The shape of every 422 caused by input: the field's location and what is wrong with it.
    return JsonResponse({"detail": [{"loc": ["header", HEADER], "msg": message, "type": "idempotency_key"}]},
                        status=422)


def _settle(response, *, owner: dict, request_fields: dict) -> None:
    """Keep the answer for replay beside the request's effect; after a server fault, roll the effect
    back so that the retry runs on a clean slate."""
    if response.status_code >= 500:
        transaction.set_rollback(True)
        return
    body = _storable_body(response)
    if body is not None:
        IdempotentRequest.objects.create(
            **owner, **request_fields, status_code=response.status_code, body=body,
            content_type=response.get("Content-Type", ""), location=response.get("Location", ""))


def _storable_body(response) -> str | None:
    final = 200 <= response.status_code < 300 or 400 <= response.status_code < 500
    if not final or response.status_code in NOT_STORED or response.streaming:
        return None
    try:
        return response.content.decode()
    except UnicodeDecodeError:  # a binary answer is not kept: a retry runs again
        return None
