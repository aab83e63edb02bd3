"""Deliveries acknowledged on purpose and not stored (`skipped:<type>`): informational events
and data types vitalflow does not keep."""

from ingest.models import RawEvent
from ingest.registry import NormalizeResult, register

SKIPPED_TYPES = (
    "athlete",
    "menstruation",
    "nutrition",
    "large_request_processing",
    "large_request_sending",
    "request_processing",
    "permission_change",
    "connection_error",
    "healthcheck",
)


@register(*SKIPPED_TYPES)
def skip_by_type(raw_event: RawEvent) -> NormalizeResult:
    return NormalizeResult(ok=True, skipped=raw_event.event_type)
