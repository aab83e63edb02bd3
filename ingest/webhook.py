"""The Terra webhook endpoint: read the raw body once (our own 50 MB cap, not Django's 2.5 MB),
hand it to raw_event_record, and turn the outcome into Terra's expected answers."""

import logging

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from ingest.errors import IngestError
from ingest.metrics import RAW_EVENTS_RECEIVED, webhook_measured
from ingest.recording import raw_event_record
from ops import tracing
from ops.deadline import DatabaseDeadline, within_deadline
from ops.errors import ErrorCode, error_response

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = "5"


READ_CHUNK = 1024 * 1024


class BodyTooLarge(Exception):
    pass


def read_body(request, limit: int) -> bytearray:
    """The raw body, streamed in 1 MB chunks into one buffer sized from Content-Length, so a
    50 MB delivery costs about 50 MB (a single read() makes the server buffer and copy it
    again). request.body is avoided on purpose: it enforces DATA_UPLOAD_MAX_MEMORY_SIZE
    (2.5 MB). The bytearray is used as is downstream (hmac, hashlib, json and the database
    drivers take it), which saves the final bytes() copy."""
    try:
        declared = max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise BodyTooLarge
    body = bytearray(declared)
    view = memoryview(body)
    filled = 0
    while filled < declared:
        chunk = request.read(min(READ_CHUNK, declared - filled))
        if not chunk:
            break
        view[filled : filled + len(chunk)] = chunk
        filled += len(chunk)
    view.release()
    if filled < declared:
        del body[filled:]  # the client sent less than it announced
    # Anything past the declared length (or a body without one) counts against the cap too.
    while chunk := request.read(READ_CHUNK):
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge
    return body


# Every path Terra's dashboard has been pointed at (ingest.urls routes them all here).
WEBHOOK_PATHS = frozenset({"/webhook/terra", "/webhook", "/terra", "/"})


class WebhookShortcut:
    """Middleware: a POST to a webhook path goes straight to the webhook view, past the
    middleware listed after this one and the URL resolver. Sessions, CSRF (the view is exempt),
    authentication, messages, clickjacking headers and django-axes have nothing to do for a
    signed machine-to-machine delivery, and with URL resolution they were about a quarter of its
    CPU (bench/README.md › Webhook). What the middleware before it does still applies: the
    request id and its X-Request-ID header, SecurityMiddleware's HTTPS redirect and headers.
    The Host header is still checked against ALLOWED_HOSTS (CommonMiddleware did it: 400 on a
    bad one)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method == "POST" and request.path_info in WEBHOOK_PATHS:
            request.get_host()  # raises DisallowedHost (400) like CommonMiddleware
            return terra_webhook(request)
        return self.get_response(request)


@csrf_exempt
@webhook_measured
def terra_webhook(request):
    """The Terra delivery endpoint, inside a `terra.webhook` span when OpenTelemetry is on."""
    attributes = {
        "http.request.method": request.method,
        "request_id": getattr(request, "request_id", None),
    }
    with tracing.span("terra.webhook", attributes, server=True) as span:
        response = _terra_webhook(request)
        tracing.set_attributes(span, {"http.response.status_code": response.status_code})
        return response


def _terra_webhook(request):
    if request.method != "POST":
        return error_response(405, ErrorCode.METHOD_NOT_ALLOWED, "Terra webhooks are POSTed.")
    limit = settings.TERRA_WEBHOOK_MAX_BYTES
    try:
        body = read_body(request, limit)
    except BodyTooLarge:
        return error_response(
            413, ErrorCode.PAYLOAD_TOO_LARGE, f"Deliveries are limited to {limit} bytes."
        )
    request_id = getattr(request, "request_id", "")
    try:
        recorded = within_deadline(
            settings.TERRA_WEBHOOK_DB_DEADLINE_SECONDS,
            raw_event_record,
            body=body,
            headers=request.headers,
            request_id=request_id,
        )
    except IngestError as exc:
        return error_response(exc.status, exc.code, exc.message, **exc.extra)
    except (OperationalError, InterfaceError, DatabaseDeadline) as exc:
        # Terra retries 5xx, not 4xx: a transient database fault must never look like a refusal.
        log.warning("webhook: database unavailable: %r", exc)
        response = error_response(
            503, ErrorCode.DATABASE_UNAVAILABLE, "The database is unavailable; retry shortly."
        )
        response["Retry-After"] = RETRY_AFTER_SECONDS
        return response
    tracing.set_attributes(
        tracing.current(),
        {
            "raw_event.id": recorded.raw_event_id,
            "raw_event.type": recorded.event_type,
            "raw_event.duplicate": bool(recorded.duplicate),
        },
    )
    if recorded.duplicate:
        return JsonResponse({"ok": True, "duplicate": True})
    RAW_EVENTS_RECEIVED.labels(type=recorded.event_type).inc()
    answer = {
        "ok": True,
        "raw_event_id": recorded.raw_event_id,
        "type": recorded.event_type,
        "request_id": request_id,
    }
    if recorded.skipped:
        answer["skipped"] = recorded.skipped  # stored for the operator, never normalized
    return JsonResponse(answer)
