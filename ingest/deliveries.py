"""Recording deliveries: verify one Terra webhook, store its row and its first traces, and hand it
to the queue in the same transaction (ingest.queue).

The webhook is the only caller; raw_event_record's keyword-only signature is a contract
(DESIGN §4), keep it stable.
"""

import hashlib
import logging
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, transaction
from django.db.models import Q
from django.utils import timezone

from ingest import queue
from ingest.envelope import Envelope, envelope_read
from ingest.errors import InvalidSignature
from ingest.models import RawEventState, TerraConnection
from ingest.payload import Unparseable
from ingest.queue import orm_message, raw_event_enqueue
from ingest.signature import signature_header, signature_verify
from ingest.traces import trace_columns, trace_row, trace_write, traces_insert
from ops import pgwire, tracing

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
    """Verify one Terra delivery, insert it and enqueue it after commit.

    The signature is checked before the body is parsed (InvalidSignature, 401, with the
    reason). A verified body is always stored as received: one that is not a JSON object is
    recorded as skipped:unparseable:<reason> and not queued (Terra does not retry a 4xx, so
    refusing it would lose it). A byte-identical redelivery of the same (type, Terra user) hits the
    raw_events_dedup constraint and comes back as a duplicate with nothing enqueued. Database
    faults (OperationalError…) propagate: the webhook answers 503 so Terra retries."""
    verdict = signature_verify(header=signature_header(headers), body=body, now=now)
    if not verdict.ok:
        raise InvalidSignature(verdict.reason)
    skipped = None
    try:
        envelope = envelope_read(body)
    except Unparseable as exc:
        envelope, skipped = UNPARSEABLE, f"unparseable:{exc.reason}"
    received_at = timezone.now()
    ordered_at = ordering_time(headers.get(ORDERING_HEADER), received_at)
    return _insert(
        body=body,
        envelope=envelope,
        request_id=request_id,
        received_at=received_at,
        ordered_at=ordered_at,
        skipped=skipped,
    )


def raw_event_record_fetched(
    *, body: bytes, envelope: Envelope | None, skipped: str | None, source
) -> Recorded:
    """Store a payload downloaded for an `s3_payload` ping (ingest.normalizers.s3_payload) as
    if Terra had delivered it inline: the ping's request id and ordering time, deduplicated by
    its bytes, queued after commit. `envelope` None with `skipped` = it did not parse."""
    return _insert(
        body=body,
        envelope=envelope or UNPARSEABLE,
        request_id=source.request_id,
        received_at=timezone.now(),
        ordered_at=source.ordered_at,
        skipped=skipped,
    )


UNPARSEABLE = Envelope("unknown", "", "", "")
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
    skipped: str | None = None,
) -> Recorded:
    fields = {
        "body": body,
        "envelope": envelope,
        "request_id": request_id,
        "received_at": received_at,
        "ordered_at": ordered_at,
        "skipped": skipped,
    }
    if _one_statement(body, skipped):
        pk = _insert_one_statement(**fields)
    else:
        pk = _insert_in_transaction(**fields)
    # A duplicate is a delivery too: Terra is sending for this connection.
    connection_seen(terra_user_id=envelope.terra_user_id, at=received_at)
    if pk is None:
        return Recorded(None, envelope.event_type, duplicate=True)
    return Recorded(pk, envelope.event_type, duplicate=False, skipped=skipped)


def _one_statement(body, skipped: str | None) -> bool:
    """The common case on PostgreSQL with the ORM broker: row, queue message and traces in one
    statement (_insert_queued_postgresql). Skipped bodies, bodies streamed through COPY and
    other brokers (Redis: published after commit) take the transaction below."""
    return (
        connection.vendor == "postgresql"
        and not skipped
        and len(body) <= STREAM_ABOVE_BYTES
        and queue.tickets_used()
    )


def _insert_in_transaction(*, body, envelope, request_id, received_at, ordered_at, skipped):
    with transaction.atomic():
        pk = _insert_row(
            body=body,
            envelope=envelope,
            request_id=request_id,
            received_at=received_at,
            ordered_at=ordered_at,
            skipped=skipped,
        )
        if pk is not None:
            received = ("webhook_received", {"type": envelope.event_type, "bytes": len(body)})
            if skipped:
                _traces_write(pk, request_id, received, ("skipped", {"reason": skipped}))
            elif raw_event_enqueue(raw_event_id=pk, request_id=request_id, trace=False):
                _traces_write(pk, request_id, received, ("queue_published", {"broker": "orm"}))
            else:
                _traces_write(pk, request_id, received)
    return pk


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
    "processed_at",
    "process_error",
    "body",
)


def _row_values(
    *,
    body: bytes | bytearray,
    envelope: Envelope,
    request_id: str,
    received_at: datetime,
    ordered_at: datetime,
    skipped: str | None = None,
) -> list:
    """raw_events values in _RAW_EVENT_COLUMNS order, the body left out."""
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
    ]


def _insert_row(*, body: bytes | bytearray, **fields) -> int | None:
    """INSERT … ON CONFLICT DO NOTHING RETURNING id: the id of the new row, or None when
    raw_events_dedup already holds this delivery (a concurrent twin waits for the first
    insert's commit, then does nothing). The body column gets the body's own bytes, so
    sha256(body) == dedup_key; on PostgreSQL it travels as one binary parameter (or COPY)."""
    values = _row_values(body=body, **fields)
    columns = ", ".join(connection.ops.quote_name(c) for c in _RAW_EVENT_COLUMNS)
    placeholders = ", ".join(["%s"] * (len(_RAW_EVENT_COLUMNS) - 1))
    if connection.vendor == "postgresql":
        return _insert_row_postgresql(columns, placeholders, values, body)
    sql = (
        f"INSERT INTO raw_events ({columns}) VALUES ({placeholders}, %s) "
        "ON CONFLICT DO NOTHING RETURNING id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, bytes(body)])
        found = cursor.fetchone()
    return found[0] if found else None


# trace_events' columns but raw_event (taken from the inserted row), typed for a VALUES list.
_TRACE_VALUES = (
    ("request_id", "varchar"),
    ("user_id", "bigint"),
    ("level", "varchar"),
    ("event", "varchar"),
    ("duration_ms", "float8"),
    ("data", "jsonb"),
    ("created_at", "timestamptz"),
)
_sql: dict[tuple[str, bool], str] = {}


def _statement_sql(queue_cte: str, *, with_id: bool = False) -> str:
    """One statement for a new delivery: `queue_cte` (the consume ticket it locks, or its own
    queue message), the row (deduplicated by raw_events_dedup; `with_id`: its id is the first
    parameter) and, only if the row went in, its traces: webhook_received, and queue_published
    when it is queued. It runs in autocommit, so it is its own transaction: all or nothing. It
    answers the new row's id (None for a duplicate) and whether it was queued. A message of the
    row's own (`with_id`) selects from the row's insert, so a duplicate queues nothing; it then
    follows the row, and so do its parameters (_insert_one_statement)."""
    key = (queue_cte, with_id)
    if key not in _sql:
        q = connection.ops.quote_name
        columns = ", ".join(q(c) for c in ("id",) * with_id + _RAW_EVENT_COLUMNS)
        # The body (last) goes as one binary parameter (bytes do, through ops.pgwire), never
        # escaped into the SQL text.
        placeholders = ", ".join(["%s"] * (with_id + len(_RAW_EVENT_COLUMNS)))
        names = ", ".join(name for name, _ in _TRACE_VALUES)
        first = ", ".join(f"%s::{cast}" for _, cast in _TRACE_VALUES)
        second = ", ".join(["%s"] * len(_TRACE_VALUES))
        picked = ", ".join(["v.request_id", "ev.id", *(f"v.{n}" for n, _ in _TRACE_VALUES[1:])])
        row = (
            f"ev AS (INSERT INTO raw_events ({columns}) VALUES ({placeholders}) "
            "ON CONFLICT ON CONSTRAINT raw_events_dedup DO NOTHING RETURNING id)"
        )
        queued = f"queued AS ({queue_cte})"
        _sql[key] = (f"WITH {row}, {queued}, " if with_id else f"WITH {queued}, {row}, ") + (
            f"traced AS (INSERT INTO trace_events ({trace_columns()}) SELECT {picked} "
            f"FROM ev, (VALUES ({first}), ({second})) AS v ({names}) "
            "WHERE v.event = 'webhook_received' OR EXISTS (SELECT FROM queued)) "
            "SELECT (SELECT id FROM ev), EXISTS (SELECT FROM queued)"
        )
    return _sql[key]


_OWN_TASK_CTE = (
    'INSERT INTO django_q_ormq ("key", payload, lock) '
    "SELECT %s::varchar, %s::text, %s::timestamptz FROM ev RETURNING id"
)


def _insert_one_statement(*, body, envelope, request_id, received_at, ordered_at, skipped):
    """_insert's path on PostgreSQL with the ORM broker: the row, its traces and its place in
    the queue in one statement, no BEGIN/COMMIT (the statement is its own transaction) and no
    per-request health check (SELECT 1: the webhook retries work that failed on a connection
    cut while idle, ingest.deadline). The statement is prepared once per connection
    (ops.pgwire): PostgreSQL parsing and planning its five parts for every delivery was most of
    its CPU per delivery. Its place in the queue is the fresh consume ticket it locks, as
    ingest.queue.consume_ticket_join does in a transaction; without one, the ticket (and its
    task) is made after the row's commit (_queue_after_commit). With OpenTelemetry on, the row
    gets a task of its own whose message carries the webhook span (ingest.queue.orm_message):
    its id is drawn first, as the signed message names it (two round trips)."""
    row = {
        "body": body,
        "envelope": envelope,
        "request_id": request_id,
        "received_at": received_at,
        "ordered_at": ordered_at,
    }
    db = connections[DEFAULT_DB_ALIAS]
    received = trace_row("webhook_received", request_id=request_id, data=_received(row))
    published = trace_row("queue_published", request_id=request_id, data=ORM)
    del received[1], published[1]  # raw_event: the inserted row's id
    # psycopg's errors as Django's, so the webhook's 503 handling and retry still apply.
    with db.wrap_database_errors:
        if tracing.traceparent():
            (pk,) = pgwire.execute(_NEXT_ID_SQL, (), db)
            try:
                message = orm_message(pk)
            except Exception:
                # As a failed publish in the transaction path (tried, and traced, there): the
                # row is stored all the same and stays pending for the drain.
                log.exception("could not build the queue message for raw event %s", pk)
                return _insert_in_transaction(**row, skipped=None)
            sql = _statement_sql(_OWN_TASK_CTE, with_id=True)
            # The row's parameters first: its own task selects from the row's insert.
            params = [pk, *_row_values(**row), body, *message, *received, *published]
        else:
            ticket_cte, ticket_params = queue.ticket_join_sql()
            sql = _statement_sql(ticket_cte)
            params = [*ticket_params, *_row_values(**row), body, *received, *published]
        pk, queued = pgwire.execute(sql, params, db)
    if pk is not None and not queued:
        _queue_after_commit(pk, request_id)
    return pk


def _received(row: dict) -> dict:
    return {"type": row["envelope"].event_type, "bytes": len(row["body"])}


def _queue_after_commit(pk: int, request_id: str) -> None:
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


ORM = {"broker": "orm"}
_NEXT_ID_SQL = "SELECT nextval(pg_get_serial_sequence('raw_events', 'id'))"


STREAM_ABOVE_BYTES = 4 * 1024 * 1024
_COPY_CHUNK = 1024 * 1024


def _insert_row_postgresql(columns: str, placeholders: str, values: list, body) -> int | None:
    import psycopg

    connection.ensure_connection()
    # A server-side-binding cursor on Django's own connection (same transaction): the body is
    # one binary parameter, never escaped into the SQL text. wrap_database_errors turns
    # psycopg's errors into Django's, so the webhook's 503 handling still applies.
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        if len(body) <= STREAM_ABOVE_BYTES:
            cursor.execute(
                f"INSERT INTO raw_events ({columns}) VALUES ({placeholders}, %b) "
                "ON CONFLICT DO NOTHING RETURNING id",
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
        f"INSERT INTO raw_events ({columns}) SELECT {placeholders}, body "
        "FROM raw_event_upload ON CONFLICT DO NOTHING RETURNING id",
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
