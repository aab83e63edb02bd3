"""django-q2 task entry points for ingest (the names are what the queue stores: keep them)."""

from ingest.consumer import raw_events_consume_batch


def consume_raw_event(raw_event_id: int, traceparent: str = "") -> dict[str, int]:
    """Normalize one raw event, plus up to 10 other pending rows while we are here.
    `traceparent` is only sent with OpenTelemetry on (ops.tracing): the webhook's span."""
    return raw_events_consume_batch(raw_event_id, traceparent=traceparent)
