"""SQL of the consumer: claiming rows with a lease, writing their outcomes and traces, committing
the pieces of a big delivery, per-host download slots, reading big bodies in pieces, and finding
rows due again."""

import functools
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from ingest.decisions import CLAIMABLE
from ingest.models import RawEvent
from ingest.store.deliveries import TRACE_COLUMNS

_STATES = ", ".join(f"'{state.value}'" for state in CLAIMABLE)  # fixed values, never input
_DUE = "(next_attempt_at IS NULL OR next_attempt_at <= %s)"
# A claim returns its rows (UPDATE … RETURNING: claiming and loading is one round trip), bodies
# up to INLINE_BODY_BYTES with them; a bigger body is left out (NULL) and loaded or streamed
# when its row's turn comes, so a batch holds at most one big body at a time.
INLINE_BODY_BYTES = 1024 * 1024


def _returning(inline: int) -> str:
    return ", ".join(
        f"CASE WHEN length(body) <= {int(inline)} THEN body END AS body"
        if field.column == "body"
        else field.column
        for field in RawEvent._meta.concrete_fields
    )


def _skip_locked() -> str:
    return (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )


def _dt(value: datetime | None):
    return connection.ops.adapt_datetimefield_value(value)


def _claimed(sql: str, params: list) -> list[RawEvent]:
    return sorted(RawEvent.objects.raw(sql, params), key=lambda row: row.pk)


# Claim one row by id: a lease (next_attempt_at = lease end) and one more attempt, only while it
# is claimable and not leased by someone else.
CLAIM_ONE = (
    "UPDATE raw_events SET next_attempt_at = %s, attempts = attempts + 1 "
    f"WHERE id = %s AND state IN ({_STATES}) AND {_DUE} RETURNING {_returning(INLINE_BODY_BYTES)}"
)


def claim_one(pk: int, now: datetime, lease_until: datetime) -> RawEvent | None:
    rows = _claimed(CLAIM_ONE, [_dt(lease_until), pk, _dt(now)])
    return rows[0] if rows else None


@functools.lru_cache(maxsize=8)
def _claim_batch_sql(inline: int, recovered: bool, skip_locked: str) -> str:
    """Claim up to N rows: due again first (retries, then expired leases, then parked rows,
    oldest due first), then pending rows oldest first. CTEs, not "id IN (SELECT … LIMIT)":
    PostgreSQL may run such a subquery again and claim more than N; a locking CTE runs once.
    `recovered` False leaves out pending rows whose lease ran out (claim_recovered takes them)."""
    not_recovered = "" if recovered else "AND state <> 'pending' "
    return (
        f"WITH again AS (SELECT id FROM raw_events WHERE state IN ({_STATES}) {not_recovered}"
        "AND next_attempt_at IS NOT NULL AND next_attempt_at <= %s "
        "ORDER BY CASE state WHEN 'retrying' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END, "
        f"next_attempt_at, id LIMIT %s{skip_locked}), "
        "fresh AS (SELECT id FROM raw_events WHERE state = 'pending' AND next_attempt_at IS NULL "
        f"ORDER BY id LIMIT %s{skip_locked}), "
        "picked AS (SELECT id FROM again UNION ALL SELECT id FROM fresh) "
        "UPDATE raw_events SET next_attempt_at = %s, attempts = attempts + 1 "
        f"WHERE id IN (SELECT id FROM picked LIMIT %s) AND state IN ({_STATES}) AND {_DUE} "
        f"RETURNING {_returning(inline)}"
    )


# A batch's inline bodies add up to at most this: a 100-row claim holds ≤ 8 MiB of bodies.
BATCH_BYTES = 8 * 1024 * 1024


def claim_batch(
    limit: int, now: datetime, lease_until: datetime, *, recovered: bool = True
) -> list[RawEvent]:
    inline = min(INLINE_BODY_BYTES, BATCH_BYTES // max(limit, 1))
    sql = _claim_batch_sql(inline, recovered, _skip_locked())
    stamp = _dt(now)
    with transaction.atomic():
        return _claimed(sql, [stamp, limit, limit, _dt(lease_until), limit, stamp])


@functools.lru_cache(maxsize=2)
def _claim_recovered_sql(skip_locked: str) -> str:
    # One pending row whose lease ran out (its worker died holding it), to run alone.
    return (
        "WITH picked AS (SELECT id FROM raw_events WHERE state = 'pending' "
        "AND next_attempt_at IS NOT NULL AND next_attempt_at <= %s "
        f"ORDER BY next_attempt_at, id LIMIT 1{skip_locked}) "
        "UPDATE raw_events SET next_attempt_at = %s, attempts = attempts + 1 "
        f"WHERE id IN (SELECT id FROM picked) AND state = 'pending' AND {_DUE} "
        f"RETURNING {_returning(INLINE_BODY_BYTES)}"
    )


def claim_recovered(now: datetime, lease_until: datetime) -> RawEvent | None:
    stamp = _dt(now)
    with transaction.atomic():
        rows = _claimed(_claim_recovered_sql(_skip_locked()), [stamp, _dt(lease_until), stamp])
    return rows[0] if rows else None


# -- outcomes -------------------------------------------------------------------------------------

# (column, PostgreSQL array type) of one outcome, the lease it is written under last.
_OUTCOME = (
    ("id", "bigint"),
    ("state", "varchar"),
    ("processed_at", "timestamptz"),
    ("process_error", "text"),
    ("attempts", "integer"),
    ("next_attempt_at", "timestamptz"),
    ("user_id", "bigint"),
    ("progress", "integer"),
    ("process_traceback", "text"),
    ("lease", "timestamptz"),
)
_NAMES = ", ".join(name for name, _ in _OUTCOME)
_SETS = ", ".join(f"{name} = v.{name}" for name, _ in _OUTCOME[1:-1])
_WHERE = "WHERE raw_events.id = v.id AND raw_events.next_attempt_at = v.lease"

# Every row's outcome, each only where next_attempt_at still equals its lease, and the traces of
# the rows written (PostgreSQL: one statement of fixed text, one array per column, whatever the
# batch size). Answers how many rows were still ours.
OUTCOMES_WRITE = (
    f"WITH o AS (UPDATE raw_events SET {_SETS} FROM unnest("
    + ", ".join(f"%s::{kind}[]" for _, kind in _OUTCOME)
    + f") AS v ({_NAMES}) {_WHERE} RETURNING raw_events.id), "
    f"t AS (INSERT INTO trace_events ({', '.join(TRACE_COLUMNS)}) SELECT * FROM unnest("
    + "%s::varchar[], %s::bigint[], %s::bigint[], %s::varchar[], %s::varchar[], %s::float8[], "
    "%s::jsonb[], %s::timestamptz[]) AS x "
    f"({', '.join(TRACE_COLUMNS)}) WHERE x.raw_event_id IN (SELECT id FROM o)) "
    "SELECT count(*) FROM o"
)


@functools.lru_cache(maxsize=128)
def _outcomes_write_sqlite(rows: int) -> str:
    """OUTCOMES_WRITE's UPDATE for SQLite, as a VALUES list, answering the ids written."""
    one = "(" + ", ".join(["%s"] * len(_OUTCOME)) + ")"
    return (
        f"WITH v ({_NAMES}) AS (VALUES {', '.join([one] * rows)}) "
        f"UPDATE raw_events SET {_SETS} FROM v {_WHERE} RETURNING raw_events.id"
    )


def outcomes_write(outcomes: list[list], traces: list[list]) -> int:
    """Write outcomes (each: _OUTCOME's values in order, datetimes as datetimes) and the traces
    (ingest.traces.trace_row()s) of the rows still ours; returns how many were."""
    rows = [[*o[:2], _dt(o[2]), *o[3:5], _dt(o[5]), *o[6:9], _dt(o[9])] for o in outcomes]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            columns = [list(c) for c in zip(*rows, strict=True)]
            trace_columns = [list(c) for c in zip(*traces, strict=True)] or [[]] * 8
            cursor.execute(OUTCOMES_WRITE, [*columns, *trace_columns])
            return cursor.fetchone()[0]
        cursor.execute(_outcomes_write_sqlite(len(rows)), [v for row in rows for v in row])
        written = {found[0] for found in cursor.fetchall()}
    mine = [trace for trace in traces if trace[1] in written]
    if mine:
        from ingest.store.deliveries import traces_insert

        traces_insert(mine)
    return len(written)


# A piece of a big delivery committed: its progress, and the lease renewed (compare-and-set on
# the lease it held).
PROGRESS_WRITE = "UPDATE raw_events SET progress = %s, next_attempt_at = %s WHERE id = %s AND next_attempt_at = %s"


def progress_write(pk: int, progress: int, lease_until: datetime, renewed: datetime) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(PROGRESS_WRITE, [progress, _dt(renewed), pk, _dt(lease_until)])
        return cursor.rowcount == 1


# -- download slots (one download at a time per bucket host) -------------------------------------

# Take the host's slot until a time, unless another worker holds it; answers a row if taken.
SLOT_TAKE = (
    "INSERT INTO ingest_download_slots (host, held_until) VALUES (%s, %s) "
    "ON CONFLICT (host) DO UPDATE SET held_until = excluded.held_until "
    "WHERE ingest_download_slots.held_until < %s RETURNING id"
)
# Give it back: only the slot as we took it (a slot that lapsed and was taken since is not ours).
SLOT_GIVE_BACK = (
    "UPDATE ingest_download_slots SET held_until = %s WHERE host = %s AND held_until = %s"
)
_slots: dict[str, datetime] = {}  # host -> held_until this process took


def download_slot_take(host: str, *, seconds: float) -> bool:
    now = timezone.now()
    until = now + timedelta(seconds=seconds)
    with connection.cursor() as cursor:
        cursor.execute(SLOT_TAKE, [host, _dt(until), _dt(now)])
        taken = cursor.fetchone() is not None
    if taken:
        _slots[host] = until
    return taken


def download_slot_give_back(host: str) -> None:
    until = _slots.pop(host, None)
    if until is not None:
        with connection.cursor() as cursor:
            cursor.execute(SLOT_GIVE_BACK, [_dt(timezone.now()), host, _dt(until)])


# -- bodies ---------------------------------------------------------------------------------------

# A piece of a stored body from byte %s (1-based), and the body's length.
BODY_PIECE = (
    "SELECT substr(body, CAST(%s AS integer), CAST(%s AS integer)), length(body) "
    "FROM raw_events WHERE id = %s"
)


def body_piece(pk: int, start: int, size: int) -> tuple[bytes, int] | None:
    with connection.cursor() as cursor:
        cursor.execute(BODY_PIECE, [start, size, pk])
        found = cursor.fetchone()
    if found is None:
        return None
    return bytes(found[0] or b""), found[1] or 0


# -- rows due again -------------------------------------------------------------------------------

# (id, next_attempt_at) of rows due again: retries first, then expired leases, then parked
# rows, each oldest due first, so a crowd of parked rows never holds up a retry.
DUE_ROWS = (
    f"SELECT id, next_attempt_at FROM raw_events WHERE state IN ({_STATES}) "
    "AND next_attempt_at IS NOT NULL AND next_attempt_at <= %s "
    "ORDER BY CASE state WHEN 'retrying' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END, "
    "next_attempt_at, id LIMIT %s"
)
# One due poller per database (PostgreSQL): a session-level advisory lock, released if it dies.
DUE_POLLER_LOCK = "SELECT pg_try_advisory_lock(%s)"


def due_rows(now: datetime, limit: int) -> list[tuple[int, object]]:
    with connection.cursor() as cursor:
        cursor.execute(DUE_ROWS, [_dt(now), limit])
        return [(pk, due) for pk, due in cursor.fetchall()]


def due_poller_lock(key: int) -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute(DUE_POLLER_LOCK, [key])
        return bool(cursor.fetchone()[0])
