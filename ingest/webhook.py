"""The Terra webhook endpoint: read the raw body once (our own 50 MB cap, not Django's 2.5 MB),
hand it to raw_event_record, and turn the outcome into Terra's expected answers."""

import logging

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from ingest.services import DeliveryRejected, raw_event_record
from ops.errors import ErrorCode, error_response

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = "5"


class BodyTooLarge(Exception):
    pass


def read_body(request, limit: int) -> bytes:
    """The raw body, read straight from the stream in one call so only one copy is held.
    request.body is avoided on purpose: it enforces DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB)."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise BodyTooLarge
    body = request.read(limit + 1)
    if len(body) > limit:
        raise BodyTooLarge
    return body


@csrf_exempt
def terra_webhook(request):
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
        recorded = raw_event_record(body=body, headers=request.headers, request_id=request_id)
    except DeliveryRejected as exc:
        extra = {"reason": exc.reason} if exc.reason else {}
        return error_response(exc.status, exc.code, exc.message, **extra)
    except (OperationalError, InterfaceError) as exc:
        # Terra retries 5xx, not 4xx: a transient database fault must never look like a refusal.
        log.warning("webhook: database unavailable: %s", exc)
        response = error_response(
            503, ErrorCode.DATABASE_UNAVAILABLE, "The database is unavailable; retry shortly."
        )
        response["Retry-After"] = RETRY_AFTER_SECONDS
        return response
    if recorded.duplicate:
        return JsonResponse({"ok": True, "duplicate": True})
    return JsonResponse(
        {
            "ok": True,
            "raw_event_id": recorded.raw_event_id,
            "type": recorded.event_type,
            "request_id": request_id,
        }
    )
