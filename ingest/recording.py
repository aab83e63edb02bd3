"""Recording a delivery: verify it, read its envelope, and store its exact bytes once with its first
traces and its place in the queue (the store's one statement on PostgreSQL, one transaction on
SQLite). The webhook is the caller; raw_event_record's keyword-only signature is a contract."""

import hashlib
import logging
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from ingest import queue
from ingest.errors import InvalidSignature
from ingest.models import RawEventState, TerraConnection
from ingest.store import deliveries as store
from ingest.terra.envelope import UNPARSEABLE, Envelope, envelope_read
from ingest.terra.payload import Unparseable
from ingest.terra.signature import signature_header, signature_verify
from ingest.traces import trace_row, trace_write
from ops import tracing

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recorded:
    """What raw_event_record did: a new row, or a duplicate of one already stored."""

    raw_event_id: int | None
    event_type: str
    duplicate: bool
    skipped: str | None = None  # "unparseable:<reason>": stored, acknowledged, never queued


def raw_event_record(
    *, body: bytes | bytearray, headers, request_id: str = "", now: float | None = None
) -> Recorded:
    """Verify one Terra delivery and store it.

    The signature is checked before the body is parsed (InvalidSignature, 401, with the
    reason). A verified body is always stored as received: one that is not a JSON object is
    recorded as skipped:unparseable:<reason> and not queued (Terra does not retry a 4xx, so
    refusing it would lose it). A byte-identical redelivery hits the raw_events_dedup
    constraint and comes back as a duplicate with nothing queued. Database faults
    (OperationalError…) propagate: the webhook answers 503 so Terra retries."""
    verdict = signature_verify(header=signature_header(headers), body=body, now=now)
    if not verdict.ok:
        raise InvalidSignature(verdict.reason)
    skipped = None
    try:
        envelope = envelope_read(body)
    except Unparseable as exc:
        envelope, skipped = UNPARSEABLE, f"unparseable:{exc.reason}"
    received_at = timezone.now()
    return _record(
        body=body,
        envelope=envelope,
        request_id=request_id,
        received_at=received_at,
        ordered_at=ordering_time(headers.get(ORDERING_HEADER), received_at),
        skipped=skipped,
    )


def raw_event_record_fetched(
    *, body: bytes, envelope: Envelope | None, skipped: str | None, source
) -> Recorded:
    """Store a payload downloaded for an `s3_payload` ping (ingest.normalizers.s3_payload) as
    if Terra had delivered it inline: the ping's request id and ordering time, deduplicated by
    its bytes, queued. `envelope` None with `skipped` = it did not parse."""
    return _record(
        body=body,
        envelope=envelope or UNPARSEABLE,
        request_id=source.request_id,
        received_at=timezone.now(),
        ordered_at=source.ordered_at,
        skipped=skipped,
    )


ORDERING_HEADER = "X-Terra-Ordering-Timestamp"
_EPOCH_2000_MS = 946_684_800_000


def ordering_time(value: str | None, received_at: datetime) -> datetime:
    """Terra's emission time from X-Terra-Ordering-Timestamp (unix milliseconds), or
    `received_at` when the header is absent or not a plausible stamp (not digits, before 2000,
    or further ahead of receipt than the trusted clock skew, TERRA_ORDERING_MAX_AHEAD_SECONDS:
    the header is not signed, and a stamp far ahead would make its delivery win for long)."""
    text = (value or "").strip()
    if not text.isascii() or not text.isdigit() or len(text) > 15:
        return received_at
    millis = int(text)
    if millis < _EPOCH_2000_MS:
        return received_at
    stamp = datetime.fromtimestamp(millis / 1000, tz=UTC)
    ahead = timedelta(seconds=settings.TERRA_ORDERING_MAX_AHEAD_SECONDS)
    return received_at if stamp > received_at + ahead else stamp


def _record(*, body, envelope: Envelope, request_id, received_at, ordered_at, skipped) -> Recorded:
    values = _row_values(body, envelope, request_id, received_at, ordered_at, skipped)
    received = ("webhook_received", {"type": envelope.event_type, "bytes": len(body)})
    if envelope.notes:
        received[1]["envelope"] = envelope.notes
    if store.one_statement():
        pk = _insert_postgresql(values, body, request_id, received, skipped)
    else:
        pk = _insert_sqlite(values, body, request_id, received, skipped)
    # A duplicate is a delivery too: Terra is sending for this connection.
    connection_seen(terra_user_id=envelope.terra_user_id, at=received_at)
    if pk is None:
        return Recorded(None, envelope.event_type, duplicate=True)
    return Recorded(pk, envelope.event_type, duplicate=False, skipped=skipped)


def _row_values(body, envelope, request_id, received_at, ordered_at, skipped) -> list:
    """raw_events values in store.RAW_EVENT_COLUMNS order, the body left out."""
    adapt = connection.ops.adapt_datetimefield_value
    return [
        envelope.event_type,
        envelope.terra_user_id,
        envelope.reference_id,
        envelope.provider,
        True,
        hashlib.sha256(body).hexdigest(),
        request_id,
        adapt(received_at),
        adapt(ordered_at),
        0,
        (RawEventState.SKIPPED if skipped else RawEventState.PENDING).value,
        adapt(received_at) if skipped else None,
        f"skipped:{skipped}" if skipped else None,
        tracing.traceparent() or "",  # OpenTelemetry changes what is recorded, not the route
    ]


ORM = {"broker": "orm"}


def _insert_postgresql(values, body, request_id, received, skipped) -> int | None:
    """The store's one statement; the queue's part of it is the fresh ticket it joins (ORM
    broker), or, when none is fresh or the broker is elsewhere, a task queued after it."""
    shared = queue.tickets_used() and not skipped
    second = ("skipped", {"reason": skipped}) if skipped else ("queue_published", ORM)
    traces = [_trace(request_id, *received), _trace(request_id, *second)]
    pk, joined = store.delivery_insert(
        values,
        body,
        join_ticket=shared,
        fresh_since=timezone.now() - queue.TICKET_FRESH,
        traces=traces,
    )
    if pk is not None and not skipped and not joined:
        if shared:
            _ticket_after_commit(pk, request_id)
        else:
            transaction.on_commit(lambda: queue.queue_publish(pk, request_id=request_id))
    return pk


def _trace(request_id: str, event: str, data: dict) -> list:
    """A trace_row() as DELIVERY_INSERT's VALUES take it: (request_id, level, event, data, at)."""
    row = trace_row(event, request_id=request_id, data=data)
    return [row[0], row[3], row[4], row[6], row[7]]


def _ticket_after_commit(pk: int, request_id: str) -> None:
    """No fresh ticket to join: make one (and its task) now that the row is committed; the task
    will see the row. A failure leaves the row pending for the next task or the drain, as a
    failed publish does."""
    try:
        with transaction.atomic():
            queue.consume_ticket_join()
    except DatabaseError:
        log.warning("could not queue raw event %s; it stays pending", pk, exc_info=True)
        return
    except Exception as exc:
        queue.publish_failed(pk, request_id, exc)
        return
    trace_write("queue_published", raw_event_id=pk, request_id=request_id, data=ORM)


def _insert_sqlite(values, body, request_id, received, skipped) -> int | None:
    """One IMMEDIATE transaction: the row, its place in the queue and its traces."""
    with transaction.atomic():
        pk = store.delivery_insert_sqlite(values, body)
        if pk is None:
            return None
        events = [received]
        if skipped:
            events.append(("skipped", {"reason": skipped}))
        elif queue.raw_event_enqueue(raw_event_id=pk, request_id=request_id, trace=False):
            events.append(("queue_published", ORM))
        _traces_write(pk, request_id, events)
    return pk


def _traces_write(raw_event_id: int, request_id: str, events: list[tuple[str, dict]]) -> None:
    """Like trace_write, a trace that cannot be written is logged, never allowed to fail the
    delivery (SQLite: a failed statement leaves the transaction usable)."""
    try:
        store.traces_insert(
            [
                trace_row(e, raw_event_id=raw_event_id, request_id=request_id, data=d)
                for e, d in events
            ]
        )
    except Exception:
        log.exception("could not write traces %s", [event for event, _ in events])


LAST_WEBHOOK_EVERY = timedelta(minutes=1)
_last_seen: dict[str, float] = {}  # terra_user_id → time.monotonic() of this process's stamp


def connection_seen(*, terra_user_id: str, at: datetime) -> None:
    """terra_connections.last_webhook_at = `at`, at most once a minute per connection: a
    conditional UPDATE (which holds across processes) behind a per-process memo (so a busy
    connection costs no statement per delivery). After the delivery's commit and never allowed
    to fail it: it is a diagnostic (README › When data is missing)."""
    if not terra_user_id:
        return
    now = time.monotonic()
    if now - _last_seen.get(terra_user_id, -math.inf) < LAST_WEBHOOK_EVERY.total_seconds():
        return
    if len(_last_seen) > 100_000:
        _last_seen.clear()
    _last_seen[terra_user_id] = now
    try:
        TerraConnection.objects.filter(terra_user_id=terra_user_id).filter(
            Q(last_webhook_at__isnull=True) | Q(last_webhook_at__lte=at - LAST_WEBHOOK_EVERY)
        ).update(last_webhook_at=at)
    except DatabaseError:
        log.warning("could not stamp last_webhook_at for %s", terra_user_id, exc_info=True)
