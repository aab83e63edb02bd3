"""Error codes of the ingest API (the shared ones live in ops.errors.ErrorCode)."""


class IngestErrorCode:
    INVALID_DAYS = "invalid_days"
    INVALID_SINCE = "invalid_since"
    INVALID_CURSOR = "invalid_cursor"
    INVALID_LIMIT = "invalid_limit"
    INVALID_FILTER = "invalid_filter"
    RAW_EVENT_NOT_FOUND = "raw_event_not_found"
    USER_NOT_FOUND = "user_not_found"
    NO_ACTIVE_CONNECTION = "no_active_connection"
    TERRA_UNAVAILABLE = "terra_unavailable"
    NOTHING_SELECTED = "nothing_selected"
