"""A retried client call changes nothing: a write under /api/ sent with an `Idempotency-Key` header
runs once per caller and key; a retry with the same key gets the first answer back (with
`Idempotent-Replayed: true`) instead of writing again.

- The key belongs to the caller (the API key's user, or the session's): two users may use one key.
  A request without credentials passes through, so the route answers its own 401.
- The same key with another method, path (query string included) or body is a 422; a key whose
  first request is still running is a 409 with Retry-After.
- Stored and replayed: 2xx and 4xx answers. Never stored, so a retry runs again: 5xx (a server fault
  may have written nothing), and 401/403/429, which judge the credentials or the rate, not the request.
- Keys are forgotten after MEMWEB_IDEMPOTENCY_TTL_SECONDS; expired rows are deleted when a new key
  is claimed, so no periodic job is needed.
"""
import hashlib
import json
import re
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import IntegrityError, transaction
from django.http import HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.utils import timezone

from memweb.auth import _presented_key
from memweb.middleware import API_PREFIX
from memweb.models import ApiKey, IdempotentRequest

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
KEY_FORMAT = re.compile(r"[\x21-\x7e]{1,255}")  # visible ASCII, as a header value carries it intact
KEY_FORMAT_TEXT = "1 to 255 visible ASCII characters (no spaces)"
NOT_STORED = frozenset({401, 403, 429})
# A request still "in progress" after this long died with its process (no request runs this long):
# the next retry takes the key over instead of being refused until the key expires.
ABANDONED_AFTER = timedelta(minutes=10)
RETRY_AFTER_SECONDS = 1


class IdempotencyKeys:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        key = request.headers.get(HEADER)
        if key is None or request.method not in WRITE_METHODS or not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        user_id = _caller_id(request)
        if user_id is None:
            return self.get_response(request)
        if not KEY_FORMAT.fullmatch(key):
            return _header_refusal(f"{HEADER} must be {KEY_FORMAT_TEXT}; got {key!r}")
        body_hash = _body_hash(request)
        if body_hash is None:
            return self.get_response(request)
        request_fields = {"method": request.method, "path": request.get_full_path(), "body_hash": body_hash}
        row, claimed = _claim(user_id=user_id, key=key, request_fields=request_fields)
        if not claimed:
            return _answer_from(row, key=key, request_fields=request_fields)
        response = self.get_response(request)
        _settle(row, response)
        return response


def _caller_id(request) -> int | None:
    """The user whose key space this is, or None for a request the route will refuse with 401."""
    secret = _presented_key(request)
    if secret:
        # A look-up only, not api_key_user(): the route authenticates again, and must count a bad
        # key as one failed attempt, not two.
        return (ApiKey.objects.filter(key_hash=ApiKey.hash_secret(secret), revoked_at__isnull=True,
                                      user__is_active=True)
                .values_list("user_id", flat=True).first())
    user = getattr(request, "user", None)
    return user.pk if user is not None and user.is_authenticated else None


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


def _claim(*, user_id: int, key: str, request_fields: dict) -> tuple[IdempotentRequest | None, bool]:
    """(the key's row, whether this request claimed it). The unique (user, key) constraint lets one
    of two concurrent first uses claim it; the other finds the row in progress."""
    _forget_expired()
    try:
        with transaction.atomic():
            return IdempotentRequest.objects.create(user_id=user_id, key=key, **request_fields), True
    except IntegrityError:
        row = IdempotentRequest.objects.filter(user_id=user_id, key=key).first()
    if row is not None and _abandoned(row) and _matches(row, request_fields):
        taken_over = IdempotentRequest.objects.filter(pk=row.pk, created_at=row.created_at).update(
            created_at=timezone.now())
        return row, taken_over == 1
    return row, False


def _forget_expired() -> None:
    cutoff = timezone.now() - timedelta(seconds=settings.MEMWEB_IDEMPOTENCY_TTL_SECONDS)
    IdempotentRequest.objects.filter(created_at__lt=cutoff).delete()


def _abandoned(row: IdempotentRequest) -> bool:
    return row.state == IdempotentRequest.State.IN_PROGRESS and row.created_at < timezone.now() - ABANDONED_AFTER


def _matches(row: IdempotentRequest, request_fields: dict) -> bool:
    return all(getattr(row, name) == value for name, value in request_fields.items())


def _answer_from(row: IdempotentRequest | None, *, key: str, request_fields: dict) -> HttpResponse:
    if row is not None and not _matches(row, request_fields):
        return _header_refusal(f"{HEADER} {key!r} was used with a different request (first {row.method} "
                               f"{row.path}, with its own body); send a new key for a new request")
    if row is None or row.state == IdempotentRequest.State.IN_PROGRESS:
        # None: the first request failed and released the key between our insert and our read.
        response = JsonResponse({"detail": f"A request with {HEADER} {key!r} is still in progress; "
                                           f"retry after it has finished"}, status=409)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return _replay(row)


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


def _settle(row: IdempotentRequest, response) -> None:
    """Keep the answer for replay, or release the key so that a retry runs the request again."""
    body = _storable_body(response)
    if body is None:
        IdempotentRequest.objects.filter(pk=row.pk).delete()
        return
    IdempotentRequest.objects.filter(pk=row.pk).update(
        state=IdempotentRequest.State.DONE, status_code=response.status_code, body=body,
        content_type=response.get("Content-Type", ""), location=response.get("Location", ""))


def _storable_body(response) -> str | None:
    final = 200 <= response.status_code < 300 or 400 <= response.status_code < 500
    if not final or response.status_code in NOT_STORED or response.streaming:
        return None
    try:
        return response.content.decode()
    except UnicodeDecodeError:  # a binary answer is not kept: a retry runs again
        return None
