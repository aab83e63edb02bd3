"""Ingest's Prometheus figures (served by ops' /metrics).

Counted as work happens (multiprocess-safe, see ops.metrics): webhook requests by status with a
latency histogram, deliveries received by type, consumer outcomes by state and type (rate() of
it is the consumer's throughput). Computed at scrape time, each from an index: unfinished raw
events by state and type (raw_events_unfinished holds only those rows), the DLQ size, the
oldest pending row's age. Finished rows (processed, skipped) are the big tail: they are counted
by the counters, never by a scan.
"""

import time
from functools import wraps

from django.db.models import Count
from django.utils import timezone
from prometheus_client import Counter, Histogram

from ingest.models import RawEvent, RawEventState
from ingest.selectors import DLQ_STATES
from ops.metrics import gauge

WEBHOOK_REQUESTS = Counter(
    "vitalflow_webhook_requests_total", "Terra webhook requests by HTTP status", ["status"]
)
WEBHOOK_SECONDS = Histogram(
    "vitalflow_webhook_request_seconds",
    "Terra webhook answer time",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
RAW_EVENTS_RECEIVED = Counter(
    "vitalflow_raw_events_received_total", "New deliveries stored, by event type", ["type"]
)
CONSUMER_ROWS = Counter(
    "vitalflow_consumer_rows_total",
    "Rows the consumer finished a claim on, by resulting state and event type",
    ["state", "type"],
)
OPEN_STATES = (
    RawEventState.PENDING,
    RawEventState.PARKED,
    RawEventState.RETRYING,
    RawEventState.DEAD,
)


def webhook_measured(view):
    """Count and time every webhook answer, whatever its status."""

    @wraps(view)
    def measured(request, *args, **kwargs):
        began = time.perf_counter()
        response = view(request, *args, **kwargs)
        WEBHOOK_SECONDS.observe(time.perf_counter() - began)
        WEBHOOK_REQUESTS.labels(status=str(response.status_code)).inc()
        return response

    return measured


def consumer_counted(state: str, event_type: str) -> None:
    CONSUMER_ROWS.labels(state=state, type=event_type).inc()


def ingest_gauges():
    by_state = gauge(
        "raw_events", "Unfinished raw events by state and type (index-backed)", ["state", "type"]
    )
    rows = (
        RawEvent.objects.filter(state__in=OPEN_STATES)
        .values_list("state", "event_type")
        .annotate(n=Count("id"))
        .order_by()
    )
    for state, event_type, n in rows:
        by_state.add_metric([state, event_type], n)
    yield by_state
    dlq = gauge("dlq_size", "Raw events in the DLQ (parked, retrying, dead)")
    dlq.add_metric([], RawEvent.objects.filter(state__in=DLQ_STATES).count())
    yield dlq
    oldest = (
        RawEvent.objects.filter(state=RawEventState.PENDING)
        .order_by("received_at")
        .values_list("received_at", flat=True)
        .first()
    )
    age = gauge("oldest_pending_seconds", "Age of the oldest pending raw event (0: none)")
    age.add_metric([], (timezone.now() - oldest).total_seconds() if oldest else 0.0)
    yield age
