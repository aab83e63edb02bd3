"""Trace rows: one delivery's journey (webhook → queue → consumer → tables) as one query by
request_id. Writing a trace must never break the work it describes."""

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from ingest.models import TraceEvent, TraceLevel
from ops.request_id import get_request_id

log = logging.getLogger(__name__)


def trace_write(
    event: str,
    *,
    raw_event_id: int | None = None,
    user_id: int | None = None,
    level: str = TraceLevel.INFO,
    request_id: str | None = None,
    duration_ms: float | None = None,
    data: dict | None = None,
) -> None:
    rid = request_id if request_id is not None else get_request_id()
    try:
        TraceEvent.objects.create(
            request_id="" if rid == "-" else rid,
            raw_event_id=raw_event_id,
            user_id=user_id,
            level=level,
            event=event,
            duration_ms=duration_ms,
            data=data or {},
        )
    except Exception:  # a trace is diagnostics: losing one beats failing the delivery
        log.exception("could not write trace %s", event)


def traces_delete_expired(*, days: int | None = None) -> int:
    """Delete trace rows older than TRACE_RETENTION_DAYS (the daily clean-up)."""
    keep = settings.TRACE_RETENTION_DAYS if days is None else days
    cutoff = timezone.now() - timedelta(days=keep)
    deleted, _ = TraceEvent.objects.filter(created_at__lt=cutoff).delete()
    return deleted
