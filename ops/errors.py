"""One place for API errors: the ApiError exception, the error codes, and the handlers that turn
every failure (DRF, Django, database) into `{"code", "message"}` JSON with the right status."""

import logging

from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

log = logging.getLogger(__name__)


class ErrorCode:
    """Codes clients may rely on. Add new ones here, never inline."""

    INVALID_REQUEST = "invalid_request"
    INVALID_JSON = "invalid_json"
    AUTHENTICATION_REQUIRED = "authentication_required"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    NOT_ACCEPTABLE = "not_acceptable"
    THROTTLED = "throttled"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    DATABASE_UNAVAILABLE = "database_unavailable"
    SERVER_ERROR = "server_error"
    INVALID_SIGNATURE = "invalid_signature"
    IDEMPOTENCY_REQUIRED = "idempotency_required"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    INVALID_CURSOR = "invalid_cursor"
    # Lab uploads refused for what is inside them (labs/screening.py).
    IMAGE_TOO_LARGE = "image_too_large"
    PDF_DECODED_TOO_LARGE = "pdf_decoded_too_large"
    PDF_ENCRYPTED = "pdf_encrypted"
    PDF_UNCHECKABLE = "pdf_uncheckable"
    FILE_MALFORMED = "file_malformed"
    # A create naming as its subject a user who does not exist (ops.userdata.subject_user).
    UNKNOWN_SUBJECT = "unknown_subject"


class ApiError(Exception):
    """Raise from services or views; the handler renders it as JSON."""

    # True when the service that refused wrote the refusal's own audit row (with what it knows:
    # a graph answer's run, binding and token), so the handler adds no generic one.
    audited = False

    def __init__(self, status: int, code: str, message: str, **extra):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict:
        return {"code": self.code, "message": self.message, **self.extra}


def error_body(code: str, message: str, **extra) -> dict:
    return {"code": code, "message": message, **extra}


def error_response(status: int, code: str, message: str, **extra) -> JsonResponse:
    """For plain Django views (the webhook) that do not go through DRF."""
    return JsonResponse(error_body(code, message, **extra), status=status)


_DRF_CODES = {
    drf.NotAuthenticated: (401, ErrorCode.AUTHENTICATION_REQUIRED),
    drf.AuthenticationFailed: (401, ErrorCode.AUTHENTICATION_REQUIRED),
    drf.PermissionDenied: (403, ErrorCode.PERMISSION_DENIED),
    drf.NotFound: (404, ErrorCode.NOT_FOUND),
    drf.MethodNotAllowed: (405, ErrorCode.METHOD_NOT_ALLOWED),
    drf.NotAcceptable: (406, ErrorCode.NOT_ACCEPTABLE),
    drf.UnsupportedMediaType: (415, ErrorCode.UNSUPPORTED_MEDIA_TYPE),
    drf.Throttled: (429, ErrorCode.THROTTLED),
    drf.ParseError: (400, ErrorCode.INVALID_JSON),
    drf.ValidationError: (400, ErrorCode.INVALID_REQUEST),
}


def _drf_message(exc: drf.APIException) -> tuple[str, dict]:
    detail = exc.detail
    if isinstance(exc, drf.ValidationError):
        return "The request is not valid.", {"errors": detail}
    if isinstance(detail, dict | list):
        return "The request failed.", {"errors": detail}
    return str(detail), {}


def _audit_if_denied(exc, request) -> None:
    """A 403 is an authorization denial: audited (ops.access), bounded under a flood."""
    status = exc.status if isinstance(exc, ApiError) else 403
    if status != 403 or getattr(exc, "audited", False):
        return
    from ops.access import audit_denied

    audit_denied(
        request, code=exc.code if isinstance(exc, ApiError) else ErrorCode.PERMISSION_DENIED
    )


def api_exception_handler(exc, context):
    """DRF EXCEPTION_HANDLER: every error leaves as {"code", "message", ...}."""
    if isinstance(exc, ApiError | drf.PermissionDenied) and context.get("request") is not None:
        _audit_if_denied(exc, context["request"])
    if isinstance(exc, ApiError):
        return Response(exc.body(), status=exc.status)
    if isinstance(exc, drf.NotAuthenticated) and context.get("request") is not None:
        # DRF checks permissions before throttles, so a request without credentials ends
        # here first: it spends its IP's anonymous budget like any anonymous request.
        from ops.throttling import anon_wait

        wait = anon_wait(context["request"]._request)
        if wait is not None:
            exc = drf.Throttled(wait=wait, detail=f"Too many requests; retry in {wait} s.")
    if isinstance(exc, drf.APIException):
        status, code = next(
            (v for cls, v in _DRF_CODES.items() if isinstance(exc, cls)),
            (
                exc.status_code,
                ErrorCode.INVALID_REQUEST if exc.status_code < 500 else ErrorCode.SERVER_ERROR,
            ),
        )
        message, extra = _drf_message(exc)
        if isinstance(exc, drf.Throttled) and exc.wait is not None:
            extra["retry_after"] = int(exc.wait)
        response = Response(error_body(code, message, **extra), status=status)
        if isinstance(exc, drf.Throttled) and exc.wait is not None:
            response["Retry-After"] = str(int(exc.wait))
        if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
            response["WWW-Authenticate"] = 'Bearer realm="vitalflow"'
        return response
    if isinstance(exc, OperationalError | InterfaceError):
        # Transient (locked, connection lost): 503 so clients and Terra retry.
        log.warning("database unavailable: %s", exc)
        return Response(
            error_body(
                ErrorCode.DATABASE_UNAVAILABLE, "The database is unavailable; retry shortly."
            ),
            status=503,
            headers={"Retry-After": "5"},
        )
    if isinstance(exc, DatabaseError):
        log.exception("database error")
        return Response(error_body(ErrorCode.SERVER_ERROR, "Internal error."), status=500)
    return None  # let Django's handler500 render it as JSON


def json_400(request, exception=None):
    return error_response(400, ErrorCode.INVALID_REQUEST, "Bad request.")


def json_403(request, exception=None):
    from ops.access import audit_denied

    audit_denied(request, code=ErrorCode.PERMISSION_DENIED)
    return error_response(403, ErrorCode.PERMISSION_DENIED, "Forbidden.")


def json_404(request, exception=None):
    return error_response(404, ErrorCode.NOT_FOUND, f"No route for {request.path}.")


def json_500(request):
    return error_response(500, ErrorCode.SERVER_ERROR, "Internal error.")
