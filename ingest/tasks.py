"""django-q2 task entry points for ingest (the names are what the queue stores: keep them)."""

from ingest.consumer import raw_events_consume_batch, raw_events_consume_pending


def consume_raw_event(raw_event_id: int, traceparent: str = "") -> dict[str, int]:
    """Normalize one raw event, plus up to 10 other pending rows while we are here.
    `traceparent` is only sent with OpenTelemetry on (ops.tracing): the webhook's span."""
    return raw_events_consume_batch(raw_event_id, traceparent=traceparent)


def consume_pending(ticket: int | None = None) -> dict[str, int]:
    """The shared consume task of the ORM broker (ingest.queue tickets): drain pending rows,
    many per task."""
    return raw_events_consume_pending(ticket)
