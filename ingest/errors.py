"""Ingest's domain errors: every refusal is an IngestError with a stable `code` and an HTTP
`status` hint, like workflows.errors.

IngestError derives from ops.errors.ApiError, so the shared DRF exception handler (and the
webhook, which is a plain Django view) render it as `{"code", "message", ...}` with its status;
callers outside HTTP (commands, tasks) catch the class they care about.
"""

from ops.errors import ApiError, ErrorCode


class IngestError(ApiError):
    code = "ingest_error"
    status = 400

    def __init__(self, message: str, **extra):
        super().__init__(self.status, self.code, message, **extra)


class InvalidSignature(IngestError):
    """The Terra signature did not verify; `reason` says why (signature.Reason)."""

    code = ErrorCode.INVALID_SIGNATURE
    status = 401

    def __init__(self, reason: str | None):
        extra = {"reason": reason} if reason else {}
        super().__init__("The Terra signature is not valid.", **extra)
        self.reason = reason


class InvalidJson(IngestError):
    code = ErrorCode.INVALID_JSON


class InvalidDays(IngestError):
    code = "invalid_days"


class InvalidSince(IngestError):
    code = "invalid_since"


class InvalidCursor(IngestError):
    code = "invalid_cursor"


class InvalidLimit(IngestError):
    code = "invalid_limit"


class InvalidFilter(IngestError):
    code = "invalid_filter"


class BulkJobNotFound(IngestError):
    code = "bulk_job_not_found"
    status = 404


class RawEventNotFound(IngestError):
    code = "raw_event_not_found"
    status = 404


class UserNotFound(IngestError):
    code = "user_not_found"
    status = 404


class NoActiveConnection(IngestError):
    code = "no_active_connection"
    status = 409


class TerraUnavailable(IngestError):
    code = "terra_unavailable"
    status = 502
