"""SQL of recording a delivery: the raw_events row with its first traces and its place in the
queue, consume tickets, and trace rows."""

import uuid
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, connection, connections

from ops import pgwire

# raw_events' columns as the webhook writes them, the body last.
RAW_EVENT_COLUMNS = (
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
    "traceparent",
    "body",
)
_COLUMNS = ", ".join(RAW_EVENT_COLUMNS)
_VALUES = ", ".join(["%s"] * (len(RAW_EVENT_COLUMNS) - 1))

# trace_events' columns in ingest.traces.trace_row() order.
TRACE_COLUMNS = (
    "request_id",
    "raw_event_id",
    "user_id",
    "level",
    "event",
    "duration_ms",
    "data",
    "created_at",
)
_TRACE_COLUMNS = ", ".join(TRACE_COLUMNS)
_TRACE_TYPES = (
    "varchar",
    "bigint",
    "bigint",
    "varchar",
    "varchar",
    "float8",
    "jsonb",
    "timestamptz",
)

# A new delivery on PostgreSQL, one statement in autocommit (its own transaction): the fresh
# consume ticket it joins (FOR KEY SHARE until it commits; none when the first parameter is
# false: skipped bodies, a broker outside the database), the row (deduplicated by
# raw_events_dedup), and, only if the row went in, its two traces — the second one
# (queue_published) only when it joined a ticket. The body is the parameter, or, when that is
# NULL, the staged upload named by the last parameter (big bodies, see delivery_insert).
# Answers the new row's id (NULL for a duplicate) and whether it joined a ticket.
DELIVERY_INSERT = f"""WITH queued AS (
    SELECT id FROM ingest_consume_tickets
    WHERE %s AND created_at > %s LIMIT 1 FOR KEY SHARE
), ev AS (
    INSERT INTO raw_events ({_COLUMNS})
    VALUES ({_VALUES}, COALESCE(%s::bytea, (SELECT body FROM raw_event_uploads WHERE token = %s)))
    ON CONFLICT ON CONSTRAINT raw_events_dedup DO NOTHING RETURNING id
), traced AS (
    INSERT INTO trace_events ({_TRACE_COLUMNS})
    SELECT v.request_id, ev.id, NULL, v.level, v.event, NULL, v.data, v.created_at
    FROM ev, (VALUES (%s::varchar, %s::varchar, %s::varchar, %s::jsonb, %s::timestamptz),
                     (%s, %s, %s, %s, %s)) AS v (request_id, level, event, data, created_at)
    WHERE v.event <> 'queue_published' OR EXISTS (SELECT FROM queued)
)
SELECT (SELECT id FROM ev), EXISTS (SELECT FROM queued)"""

# A new delivery on SQLite (inside the caller's IMMEDIATE transaction): the row or, for a
# duplicate, nothing.
DELIVERY_INSERT_SQLITE = f"INSERT INTO raw_events ({_COLUMNS}) VALUES ({_VALUES}, %s) ON CONFLICT DO NOTHING RETURNING id"

# Stage a big body (PostgreSQL): streamed by COPY in pieces, read by DELIVERY_INSERT, deleted.
UPLOAD_COPY = "COPY raw_event_uploads (token, body) FROM STDIN (FORMAT BINARY)"
UPLOAD_DELETE = "DELETE FROM raw_event_uploads WHERE token = %s"

# Bodies above this are staged by COPY instead of travelling as a parameter: libpq copies a
# parameter into a send buffer that grows by doubling and is never shrunk (+2x the body in the
# web worker for the connection's lifetime); COPY sends it in STAGE_PIECE_BYTES pieces.
STAGE_ABOVE_BYTES = 4 * 1024 * 1024
STAGE_PIECE_BYTES = 1024 * 1024


def one_statement() -> bool:
    """Whether this database records a delivery in one statement (DELIVERY_INSERT: PostgreSQL)
    or in one transaction of several (SQLite)."""
    return connection.vendor == "postgresql"


def delivery_insert(
    values: list, body, *, join_ticket: bool, fresh_since: datetime, traces: list[list]
) -> tuple[int | None, bool]:
    """PostgreSQL: run DELIVERY_INSERT; (the new row's id or None, whether it joined a ticket).
    `values`: RAW_EVENT_COLUMNS but the body; `traces`: the two trace_row()s (webhook_received,
    then queue_published or skipped) without their raw_event_id. A big body is staged first, in
    one transaction with the insert; the others need none (the statement is its own)."""
    db = connections[DEFAULT_DB_ALIAS]
    first, second = traces
    with db.wrap_database_errors:  # psycopg's errors as Django's: the webhook's 503 applies
        if len(body) <= STAGE_ABOVE_BYTES:
            params = [join_ticket, fresh_since, *values, body, None, *first, *second]
            return tuple(pgwire.execute(DELIVERY_INSERT, params, db))
        from django.db import transaction

        token = uuid.uuid4()
        with transaction.atomic():
            _stage(db, token, body)
            params = [join_ticket, fresh_since, *values, None, token, *first, *second]
            found = tuple(pgwire.execute(DELIVERY_INSERT, params, db))
            with db.cursor() as cursor:
                cursor.execute(UPLOAD_DELETE, [token])
        return found


def _stage(db, token: uuid.UUID, body) -> None:
    """COPY one (token, body) row in PostgreSQL's binary format: signature, flags, header
    extension, then one tuple of two fields, the body written piece by piece."""
    view = memoryview(body)
    with db.connection.cursor() as cursor, cursor.copy(UPLOAD_COPY) as copy:
        copy.write(b"PGCOPY\n\xff\r\n\x00" + bytes(8))
        copy.write((2).to_bytes(2, "big") + (16).to_bytes(4, "big") + token.bytes)
        copy.write(len(body).to_bytes(4, "big"))
        for start in range(0, len(body), STAGE_PIECE_BYTES):
            copy.write(view[start : start + STAGE_PIECE_BYTES])
        copy.write((-1).to_bytes(2, "big", signed=True))
    view.release()


def delivery_insert_sqlite(values: list, body) -> int | None:
    """SQLite: insert the row in the caller's transaction; its id, or None for a duplicate."""
    with connection.cursor() as cursor:
        cursor.execute(DELIVERY_INSERT_SQLITE, [*values, bytes(body)])
        found = cursor.fetchone()
    return found[0] if found else None


# -- consume tickets ------------------------------------------------------------------------------

# The fresh ticket a delivery joins (locked FOR KEY SHARE on PostgreSQL until it commits).
TICKET_FRESH = "SELECT id FROM ingest_consume_tickets WHERE created_at > %s LIMIT 1"
TICKET_FRESH_LOCKED = TICKET_FRESH + " FOR KEY SHARE"
# A new ticket (its task is queued in the same transaction).
TICKET_INSERT = "INSERT INTO ingest_consume_tickets (created_at) VALUES (%s) RETURNING id"
# A ticket whose task could not be queued.
TICKET_DELETE = "DELETE FROM ingest_consume_tickets WHERE id = %s"
# A task's first act: its own ticket and any too old to be joined (their tasks may be lost).
TICKETS_RELEASE = "DELETE FROM ingest_consume_tickets WHERE id = %s OR created_at < %s"


def _dt(value: datetime | None):
    return connection.ops.adapt_datetimefield_value(value)


def ticket_fresh(since: datetime) -> int | None:
    """The id of a ticket younger than `since`, locked until the transaction ends (PostgreSQL)."""
    sql = TICKET_FRESH_LOCKED if connection.vendor == "postgresql" else TICKET_FRESH
    with connection.cursor() as cursor:
        cursor.execute(sql, [_dt(since)])
        found = cursor.fetchone()
    return found[0] if found else None


def ticket_insert(now: datetime) -> int:
    with connection.cursor() as cursor:
        cursor.execute(TICKET_INSERT, [_dt(now)])
        return cursor.fetchone()[0]


def ticket_delete(ticket: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(TICKET_DELETE, [ticket])


def tickets_release(ticket: int | None, stale_before: datetime) -> None:
    """On PostgreSQL this waits for the deliveries that joined the tickets to commit."""
    with connection.cursor() as cursor:
        cursor.execute(TICKETS_RELEASE, [ticket, _dt(stale_before)])


# -- trace rows ----------------------------------------------------------------------------------

# Trace rows from one array per column (PostgreSQL): one text whatever the row count.
TRACES_INSERT_ARRAYS = f"INSERT INTO trace_events ({_TRACE_COLUMNS}) SELECT * FROM unnest(" + (
    ", ".join(f"%s::{kind}[]" for kind in _TRACE_TYPES) + ")"
)


def _traces_values_sql(rows: int) -> str:
    """Trace rows as a VALUES list (SQLite)."""
    one = "(" + ", ".join(["%s"] * len(TRACE_COLUMNS)) + ")"
    return f"INSERT INTO trace_events ({_TRACE_COLUMNS}) VALUES {', '.join([one] * rows)}"


def traces_insert(rows: list[list]) -> None:
    """ingest.traces.trace_row()s in one INSERT. Raises like any statement; callers decide."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                TRACES_INSERT_ARRAYS, [list(column) for column in zip(*rows, strict=True)]
            )
        else:
            cursor.execute(_traces_values_sql(len(rows)), [value for row in rows for value in row])
