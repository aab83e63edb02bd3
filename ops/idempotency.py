"""Idempotency keys for POST endpoints: the first response to (principal, key, endpoint) is
stored and replayed byte for byte to retries that send a canonically equal JSON body.

How a request is handled (`idempotent` wraps a DRF handler method such as `post`):

1. No `Idempotency-Key` header: 400 `idempotency_required` when the endpoint requires one,
   otherwise the handler runs as usual and nothing is deduplicated.
2. Validate the key (1–255 visible ASCII; `"abc"` is the same key as `abc`) and hash the body
   (sha256 of RFC 8785 canonical JSON, so key order, spacing and 1 vs 1.0 do not matter).
3. In ONE transaction: INSERT the in-flight row first, run the handler, store its response.
   The unique constraint on (principal, key, endpoint) makes a concurrent retry's INSERT wait
   for that transaction (PostgreSQL blocks on the index entry; SQLite's IMMEDIATE transactions
   queue on the write lock) and then fail, after which it reads the committed response. So a
   retry in flight never creates a second resource, and a crash mid-request leaves no orphaned
   in-flight row: the row and the resource commit or roll back together.
4. The handler refused (raised ApiError or a DRF error): the in-flight row is deleted and the
   rest commits — services refuse before writing, and the audit row of the refusal must stay.
   Nothing is stored, so the client may retry with the same key once the cause is fixed
   (Stripe does the same). Any other exception, or a 5xx answer, rolls everything back.
5. Key taken: same body hash → the stored status and bytes (`Idempotent-Replayed: true`);
   different hash → 409 `idempotency_conflict`; expired (24 h) → deleted and treated as new.

`request.idempotency_key` ("" when none) and `request.idempotency_replayed` are set for the
audit writer. Expired rows are deleted by the daily clean-up schedule (ops.tasks.cleanup).
"""

import functools
import hashlib
import json
import time
from datetime import timedelta

import rfc8785
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.http import HttpResponse
from django.utils import timezone
from rest_framework.exceptions import APIException
from rest_framework.renderers import JSONRenderer

from ops.errors import ApiError, ErrorCode
from ops.models import IdempotencyKey
from ops.services import actor_for

HEADER = "Idempotency-Key"
TTL = timedelta(hours=24)
REPLAYED_HEADER = "Idempotent-Replayed"
# A row seen without a stored status belongs to a transaction that has not committed yet
# (only possible on databases whose INSERT doesn't wait); poll this long before giving up.
IN_FLIGHT_WAIT_SECONDS = 10.0
# Deliberate refusals: raised before anything of substance is written.
REFUSALS = (ApiError, APIException)


def normalize_key(raw: str | None) -> str | None:
    """The key as stored, None when absent; raises 400 when malformed."""
    if raw is None:
        return None
    key = raw.strip()
    # RFC draft-ietf-httpapi-idempotency-key-header: the value is a structured-field string.
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not 1 <= len(key) <= 255 or any(not 0x21 <= ord(ch) <= 0x7E for ch in key):
        raise ApiError(
            400,
            ErrorCode.INVALID_REQUEST,
            f"{HEADER} must be 1–255 visible ASCII characters (optionally in double quotes).",
        )
    return key


def canonical_json(data) -> bytes:
    """RFC 8785 (JCS) bytes, so `{"a": 1}` and `{"a": 1.0}` are one request. JCS only knows
    IEEE doubles; a body with an integer beyond ±2^53 falls back to sorted-key JSON, which is
    still deterministic for that body."""
    try:
        return rfc8785.dumps(data)
    except rfc8785.CanonicalizationError:
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def body_hash(data) -> str:
    return hashlib.sha256(canonical_json(data)).hexdigest()


def _request_data(request):
    data = request.data  # parses now: a malformed body fails with 400 before any row is written
    if hasattr(data, "dict"):  # QueryDict from an empty or form body
        data = data.dict()
    return data


class _KeyTaken(Exception):
    """The INSERT hit the unique constraint: another request owns (principal, key, endpoint)."""


class _Discard(Exception):
    """The handler answered 5xx without raising: roll back rather than store a failure."""

    def __init__(self, response):
        self.response = response


def _render(response) -> HttpResponse:
    """Bytes once, so the first answer and every replay are byte-for-byte identical."""
    if isinstance(response, HttpResponse) and not hasattr(response, "data"):
        return response
    content = b"" if response.data is None else JSONRenderer().render(response.data)
    rendered = HttpResponse(content, status=response.status_code, content_type="application/json")
    for name, value in response.items():
        if name.lower() not in ("content-type", "content-length"):
            rendered[name] = value
    return rendered


def _replay(row: IdempotencyKey) -> HttpResponse:
    response = HttpResponse(
        bytes(row.response_body or b""), status=row.status_code, content_type="application/json"
    )
    response[REPLAYED_HEADER] = "true"
    return response


def _run_first(request, handler, args, kwargs, *, principal, key, endpoint, digest):
    refusal = None
    with transaction.atomic():
        try:
            with transaction.atomic():  # savepoint: the INSERT may fail on the unique key
                row = IdempotencyKey.objects.create(
                    principal=principal,
                    key=key,
                    endpoint=endpoint,
                    body_hash=digest,
                    status_code=None,
                    expires_at=timezone.now() + TTL,
                )
        except IntegrityError:
            raise _KeyTaken from None
        try:
            response = _render(handler(request, *args, **kwargs))
        except REFUSALS as exc:
            if transaction.get_rollback():
                raise  # the transaction is broken: roll back all of it
            row.delete()
            refusal = exc
        else:
            if response.status_code >= 500:
                raise _Discard(response)
            row.status_code = response.status_code
            row.response_body = response.content
            row.save(update_fields=["status_code", "response_body"])
    if refusal is not None:
        raise refusal  # outside the block: the refusal's own writes commit
    return response


def _existing(principal: str, key: str, endpoint: str, digest: str) -> HttpResponse | None:
    """The stored answer for a taken key; None when the key is free again (rolled back/expired)."""
    deadline = time.monotonic() + IN_FLIGHT_WAIT_SECONDS
    while True:
        row = IdempotencyKey.objects.filter(principal=principal, key=key, endpoint=endpoint).first()
        if row is None:
            return None
        if row.expires_at <= timezone.now():
            IdempotencyKey.objects.filter(pk=row.pk, expires_at=row.expires_at).delete()
            return None
        if row.body_hash != digest:
            raise ApiError(
                409,
                ErrorCode.IDEMPOTENCY_CONFLICT,
                f"This {HEADER} was already used with a different request body.",
            )
        if row.status_code is not None:
            return _replay(row)
        if time.monotonic() >= deadline:
            raise ApiError(
                409,
                ErrorCode.IDEMPOTENCY_CONFLICT,
                f"A request with this {HEADER} is still in progress; retry shortly.",
                in_progress=True,
            )
        time.sleep(0.05)


def idempotent(*, required: bool):
    """Decorator for a DRF handler method (`def post(self, request, ...)`)."""

    def decorate(method):
        @functools.wraps(method)
        def wrapper(view, request, *args, **kwargs):
            key = normalize_key(request.headers.get(HEADER))
            request.idempotency_key = key or ""
            request.idempotency_replayed = False
            if key is None:
                if required:
                    raise ApiError(
                        400,
                        ErrorCode.IDEMPOTENCY_REQUIRED,
                        f"This endpoint needs an {HEADER} header (1–255 visible ASCII).",
                    )
                return method(view, request, *args, **kwargs)
            principal = actor_for(request)
            endpoint = f"{request.method} {request.path}"[:300]
            digest = body_hash(_request_data(request))
            handler = functools.partial(method, view)
            for _ in range(5):  # a freed key (rolled back, expired) is simply claimed again
                try:
                    return _run_first(
                        request,
                        handler,
                        args,
                        kwargs,
                        principal=principal,
                        key=key,
                        endpoint=endpoint,
                        digest=digest,
                    )
                except _Discard as discarded:
                    return discarded.response
                except _KeyTaken:
                    replay = _existing(principal, key, endpoint, digest)
                    if replay is not None:
                        request.idempotency_replayed = True
                        return replay
            raise ApiError(
                409, ErrorCode.IDEMPOTENCY_CONFLICT, f"Could not claim this {HEADER}; retry."
            )

        return wrapper

    return decorate


def idempotency_keys_of(subject) -> QuerySet[IdempotencyKey]:
    """Stored answers that belong to a user (ops.userdata): to their own requests, or naming
    them or one of their records. Keys live TTL, so the bodies scanned are a day's worth."""
    username = subject.user.get_username()
    needles = [json.dumps(username).encode(), json.dumps(username, ensure_ascii=False).encode()]
    needles += [v.encode() for v in subject.all_identifiers() - {username}]
    rows = IdempotencyKey.objects.only("pk", "response_body").iterator(chunk_size=200)
    naming = [
        row.pk
        for row in rows
        if row.response_body and any(n in bytes(row.response_body) for n in needles)
    ]
    return IdempotencyKey.objects.filter(Q(principal=f"user:{username}") | Q(pk__in=naming))
