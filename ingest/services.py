"""Writes for raw events: record a verified delivery, enqueue it, replay and drain stuck rows.

The webhook, the admin, the operator API and the commands all go through these functions; their
keyword-only signatures are a contract (DESIGN §4), keep them stable.
"""

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from ingest.envelope import Envelope, NotAnObject, envelope_read
from ingest.models import RawEvent, RawEventState, TraceLevel
from ingest.signature import signature_header, signature_verify
from ingest.traces import trace_row, trace_write, traces_insert
from ops.errors import ErrorCode
from ops.request_id import get_request_id
from ops.services import audit_log_write

log = logging.getLogger(__name__)

CONSUME_TASK = "ingest.tasks.consume_raw_event"
NO_CONNECTION = "no_connection_for_terra_user"
DRAIN_WINDOW = timedelta(hours=24)
DRAIN_MAX_LIMIT = 100


@dataclass(frozen=True)
class Recorded:
    """What raw_event_record did: a new row, or a duplicate of one already stored."""

    raw_event_id: int | None
    event_type: str
    duplicate: bool


class DeliveryRejected(Exception):
    """The delivery is refused: `status` and `code` for the answer, `reason` for signatures."""

    def __init__(self, status: int, code: str, message: str, reason: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.reason = reason


def raw_event_record(
    *, body: bytes | bytearray, headers, request_id: str = "", now: float | None = None
) -> Recorded:
    """Verify one Terra delivery, insert it and enqueue it after commit.

    The signature is checked before the body is parsed (DeliveryRejected 401 invalid_signature
    with the reason), then a verified body that is not a JSON object is refused (400
    invalid_json). A byte-identical redelivery of the same (type, Terra user) hits the
    raw_events_dedup constraint and comes back as a duplicate with nothing enqueued. Database
    faults (OperationalError…) propagate: the webhook answers 503 so Terra retries."""
    verdict = signature_verify(header=signature_header(headers), body=body, now=now)
    if not verdict.ok:
        raise DeliveryRejected(
            401, ErrorCode.INVALID_SIGNATURE, "The Terra signature is not valid.", verdict.reason
        )
    try:
        envelope = envelope_read(body)
    except NotAnObject as exc:
        raise DeliveryRejected(
            400, ErrorCode.INVALID_JSON, f"The body is not a JSON object: {exc}"[:300]
        ) from None
    received_at = timezone.now()
    ordered_at = ordering_time(headers.get(ORDERING_HEADER), received_at)
    return _insert(
        body=body,
        envelope=envelope,
        request_id=request_id,
        received_at=received_at,
        ordered_at=ordered_at,
    )


ORDERING_HEADER = "X-Terra-Ordering-Timestamp"
# A stamp further ahead than this is not believed: it would make its delivery win forever.
ORDERING_MAX_AHEAD = timedelta(days=1)
_EPOCH_2000_MS = 946_684_800_000


def ordering_time(value: str | None, received_at: datetime) -> datetime:
    """Terra's emission time from X-Terra-Ordering-Timestamp (unix milliseconds), or
    `received_at` when the header is absent or not a plausible stamp (not digits, before 2000,
    more than a day ahead of receipt)."""
    text = (value or "").strip()
    if not text.isascii() or not text.isdigit() or len(text) > 15:
        return received_at
    millis = int(text)
    if millis < _EPOCH_2000_MS:
        return received_at
    stamp = datetime.fromtimestamp(millis / 1000, tz=UTC)
    return received_at if stamp > received_at + ORDERING_MAX_AHEAD else stamp


def _insert(
    *,
    body: bytes | bytearray,
    envelope: Envelope,
    request_id: str,
    received_at: datetime,
    ordered_at: datetime,
) -> Recorded:
    with transaction.atomic():
        pk = _insert_row(
            body=body,
            envelope=envelope,
            request_id=request_id,
            received_at=received_at,
            ordered_at=ordered_at,
        )
        if pk is None:
            return Recorded(None, envelope.event_type, duplicate=True)
        received = ("webhook_received", {"type": envelope.event_type, "bytes": len(body)})
        if raw_event_enqueue(raw_event_id=pk, request_id=request_id, trace=False):
            _traces_write(pk, request_id, received, ("queue_published", {"broker": "orm"}))
        else:
            _traces_write(pk, request_id, received)
    return Recorded(pk, envelope.event_type, duplicate=False)


_RAW_EVENT_COLUMNS = (
    "event_type",
    "terra_user_id",
    "reference_id",
    "provider",
    "signature_verified",
    "dedup_key",
    "request_id",
    "received_at",
    "ordered_at",
    "attempts",
    "state",
    "payload",
)


def _insert_row(
    *,
    body: bytes | bytearray,
    envelope: Envelope,
    request_id: str,
    received_at: datetime,
    ordered_at: datetime,
) -> int | None:
    """INSERT … ON CONFLICT DO NOTHING RETURNING id: the id of the new row, or None when
    raw_events_dedup already holds this delivery (a concurrent twin waits for the first
    insert's commit, then does nothing). The payload column gets the body's own bytes: no
    parsed copy is re-serialized, and on PostgreSQL the body travels as one binary parameter
    instead of being escaped into the SQL text (50 MB bodies)."""
    values = [
        envelope.event_type,
        envelope.terra_user_id,
        envelope.reference_id,
        envelope.provider,
        True,
        hashlib.sha256(body).hexdigest(),
        request_id,
        connection.ops.adapt_datetimefield_value(received_at),
        connection.ops.adapt_datetimefield_value(ordered_at),
        0,
        RawEventState.PENDING.value,
    ]
    columns = ", ".join(connection.ops.quote_name(c) for c in _RAW_EVENT_COLUMNS)
    placeholders = ", ".join(["%s"] * (len(_RAW_EVENT_COLUMNS) - 1))
    if connection.vendor == "postgresql":
        return _insert_row_postgresql(columns, placeholders, values, body)
    sql = (
        f"INSERT INTO raw_events ({columns}) VALUES ({placeholders}, CAST(%s AS TEXT)) "
        "ON CONFLICT DO NOTHING RETURNING id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, body])
        found = cursor.fetchone()
    return found[0] if found else None


STREAM_ABOVE_BYTES = 4 * 1024 * 1024
_COPY_CHUNK = 1024 * 1024


def _insert_row_postgresql(columns: str, placeholders: str, values: list, body) -> int | None:
    import psycopg

    connection.ensure_connection()
    # A server-side-binding cursor on Django's own connection (same transaction): the body is
    # one binary parameter, never escaped into the SQL text. wrap_database_errors turns
    # psycopg's errors into Django's, so the webhook's 503/400 handling still applies.
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        if len(body) <= STREAM_ABOVE_BYTES:
            cursor.execute(
                f"INSERT INTO raw_events ({columns}) VALUES ({placeholders}, "
                "convert_from(%b, 'UTF8')::jsonb) ON CONFLICT DO NOTHING RETURNING id",
                [*values, body],
            )
            found = cursor.fetchone()
        else:
            found = _insert_streamed(cursor, columns, placeholders, values, body)
    return found[0] if found else None


def _insert_streamed(cursor, columns: str, placeholders: str, values: list, body):
    """Big bodies go through COPY in 1 MB chunks: libpq would otherwise copy a bound parameter
    into an output buffer that grows by doubling and is never shrunk (+2× the body in the web
    worker, for the connection's lifetime)."""
    cursor.execute(
        "CREATE TEMP TABLE IF NOT EXISTS raw_event_upload (body bytea) ON COMMIT DELETE ROWS"
    )
    view = memoryview(body)
    with cursor.copy("COPY raw_event_upload (body) FROM STDIN (FORMAT BINARY)") as copy:
        # PGCOPY binary stream: signature, flags, header extension, one tuple of one field.
        copy.write(b"PGCOPY\n\xff\r\n\x00" + bytes(8))
        copy.write((1).to_bytes(2, "big") + len(body).to_bytes(4, "big"))
        for start in range(0, len(body), _COPY_CHUNK):
            copy.write(view[start : start + _COPY_CHUNK])
        copy.write((-1).to_bytes(2, "big", signed=True))
    view.release()
    cursor.execute(
        f"INSERT INTO raw_events ({columns}) SELECT {placeholders}, "
        "convert_from(body, 'UTF8')::jsonb FROM raw_event_upload "
        "ON CONFLICT DO NOTHING RETURNING id",
        values,
    )
    found = cursor.fetchone()
    cursor.execute("DELETE FROM raw_event_upload")
    return found


def _traces_write(raw_event_id: int, request_id: str, *events: tuple[str, dict]) -> None:
    """Several trace rows in one plain INSERT (the webhook's hot path: bulk_create cost more
    Python than the statement); like trace_write, a trace that cannot be written is logged,
    never allowed to fail the delivery."""
    try:
        traces_insert(
            [
                trace_row(event, raw_event_id=raw_event_id, request_id=request_id, data=data)
                for event, data in events
            ]
        )
    except Exception:
        log.exception("could not write traces %s", [event for event, _ in events])


def raw_event_enqueue(*, raw_event_id: int, request_id: str = "", trace: bool = True) -> bool:
    """Publish the consume task so that a worker only ever sees it with the row committed.

    On the ORM broker (same database) the task row is inserted in the surrounding transaction:
    both commit or neither does, at the cost of one commit instead of two. On Redis it is
    pushed after commit. A failed publish is logged and traced; the row stays pending for the
    drain. Returns True when the task is already in (the ORM case), False when it is published
    later or failed. trace=False leaves the queue_published trace to the caller (the webhook
    writes it in one insert with its own)."""
    if _broker_shares_the_transaction():
        return queue_publish(raw_event_id, request_id=request_id, in_transaction=True, trace=trace)
    transaction.on_commit(lambda: queue_publish(raw_event_id, request_id=request_id))
    return False


def _broker_shares_the_transaction() -> bool:
    from django_q.conf import Conf

    # Conf.SYNC runs the task inline: that must wait for the commit like a real worker would.
    return (
        Conf.ORM == DEFAULT_DB_ALIAS
        and not Conf.SYNC
        and transaction.get_connection().in_atomic_block
    )


_broker = None


def _get_broker():
    # One broker per process: django-q2 builds a new one (a new Redis pool) for every task.
    global _broker
    if _broker is None:
        from django_q.brokers import get_broker

        _broker = get_broker()
    return _broker


def queue_publish(
    raw_event_id: int, *, request_id: str = "", in_transaction: bool = False, trace: bool = True
) -> bool:
    """Hand one row to django-q2 now. Returns False (and traces why) when that fails. Inside a
    transaction a database error is not swallowed: the transaction is broken and must fail."""
    from django_q.tasks import async_task

    try:
        async_task(
            CONSUME_TASK,
            raw_event_id,
            broker=_get_broker(),
            save=False,  # failures are still saved; successes would only bloat the task table
            task_name=f"consume-{raw_event_id}",
        )
    except DatabaseError:
        if in_transaction:
            raise
        log.exception("could not enqueue raw event %s", raw_event_id)
        return False
    except Exception as exc:
        log.exception("could not enqueue raw event %s", raw_event_id)
        trace_write(
            "queue_publish_failed",
            raw_event_id=raw_event_id,
            request_id=request_id,
            level=TraceLevel.ERROR,
            data={"error": f"{exc.__class__.__name__}: {exc}"[:500]},
        )
        return False
    if trace:
        trace_write("queue_published", raw_event_id=raw_event_id, request_id=request_id)
    return True


def _reset_to_pending(ids: list[int]) -> int:
    return RawEvent.objects.filter(pk__in=ids).update(
        state=RawEventState.PENDING,
        processed_at=None,
        process_error=None,
        next_attempt_at=None,
        attempts=0,
    )


def raw_events_replay(*, ids: list[int], request=None, actor: str | None = None) -> int:
    """Re-run rows whatever their state (operator action): reset each to pending with a fresh
    attempt budget, enqueue after commit, and write one audit row. Normalizers are replay-safe,
    so replaying a processed row converges to the same tables. Returns how many rows exist."""
    ids = sorted({int(i) for i in ids})
    with transaction.atomic():
        found = list(RawEvent.objects.filter(pk__in=ids).values_list("pk", flat=True))
        _reset_to_pending(found)
        for pk in found:
            raw_event_enqueue(raw_event_id=pk, request_id=get_request_id())
        audit_log_write(
            action="raw_events.replay",
            resource=f"raw_events:{','.join(map(str, found[:50]))}",
            request=request,
            actor=actor,
            metadata={"requested": len(ids), "replayed": len(found), "ids": found[:500]},
        )
    return len(found)


@dataclass
class DrainResult:
    """What one drain run picked up and, with inline=True, how each row ended (`outcomes` maps a
    RawEventState value or "not_claimed" to a count)."""

    selected: int = 0
    enqueued: int = 0
    ids: list[int] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "selected": self.selected,
            "enqueued": self.enqueued,
            "ids": self.ids,
            "outcomes": self.outcomes,
        }


def drain_candidates(
    *, include_skipped: bool = False, include_no_connection: bool = False, now=None
):
    """Rows the drain may pick up (DESIGN §4): received in the last 24 h and unprocessed
    (pending or parked, not leased by a consumer right now), excluding rows parked for want of a
    connection (the auth normalizer re-enqueues those) unless asked; plus retrying rows whose
    backoff is over, whatever their age; plus skipped rows of the last 24 h when asked."""
    now = now or timezone.now()
    not_leased = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)
    recent = Q(received_at__gte=now - DRAIN_WINDOW)
    waiting = Q(state__in=[RawEventState.PENDING, RawEventState.PARKED]) & recent & not_leased
    if not include_no_connection:
        waiting &= ~Q(state=RawEventState.PARKED, process_error=NO_CONNECTION)
    wanted = waiting | (Q(state=RawEventState.RETRYING) & not_leased)
    if include_skipped:
        wanted |= Q(state=RawEventState.SKIPPED) & recent
    return RawEvent.objects.filter(wanted).order_by("received_at", "pk")


def raw_events_drain(
    *,
    limit: int = 50,
    include_skipped: bool = False,
    include_no_connection: bool = False,
    inline: bool = False,
    request=None,
    actor: str | None = None,
) -> DrainResult:
    """Pick up to `limit` (1…100) stuck rows and enqueue them — or, with inline=True, consume
    them in this process and count outcomes. Skipped rows it selects are reset to pending first.
    Writes an audit row when an operator (request/actor) asked for it."""
    from ingest.consumer import raw_event_consume

    limit = max(1, min(int(limit), DRAIN_MAX_LIMIT))
    rows = list(
        drain_candidates(
            include_skipped=include_skipped, include_no_connection=include_no_connection
        ).values_list("pk", "state")[:limit]
    )
    result = DrainResult(selected=len(rows), ids=[pk for pk, _ in rows])
    skipped = [pk for pk, state in rows if state == RawEventState.SKIPPED]
    if skipped:
        _reset_to_pending(skipped)
    if inline:
        for pk in result.ids:
            outcome = raw_event_consume(pk)
            result.outcomes[outcome] = result.outcomes.get(outcome, 0) + 1
    else:
        for pk in result.ids:
            result.enqueued += queue_publish(pk, request_id=get_request_id())
    if request is not None or actor is not None:
        audit_log_write(
            action="raw_events.drain",
            resource="raw_events",
            request=request,
            actor=actor,
            metadata={
                "limit": limit,
                "include_skipped": include_skipped,
                "include_no_connection": include_no_connection,
                **result.as_dict(),
                "ids": result.ids[:500],
            },
        )
    return result


def raw_events_requeue_for_terra_user(*, terra_user_id: str) -> int:
    """A connection for this Terra user now exists: give its rows parked for want of one
    another go at once (after commit). Returns how many were re-enqueued."""
    ids = list(
        RawEvent.objects.filter(
            terra_user_id=terra_user_id, state=RawEventState.PARKED, process_error=NO_CONNECTION
        ).values_list("pk", flat=True)
    )
    if ids:
        _reset_to_pending(ids)
        for pk in ids:
            raw_event_enqueue(raw_event_id=pk, request_id=get_request_id())
    return len(ids)
