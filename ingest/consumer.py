"""The consumer: claim raw events, run their normalizer, and move each row through the state
machine of DESIGN §4 (pending → processed | skipped | parked | retrying → dead).

Two kinds of task run it. On the ORM broker deliveries share one (ingest.queue tickets):
raw_events_consume_pending claims PENDING_BATCH rows at a time for up to PENDING_BUDGET, so
django-q2's own per-task cost is paid once for hundreds of rows. A task for one row (the due
poller's, the drain's, replays, Redis) also claims up to BATCH other rows. Batch claims take
rows due again first (retries whose backoff is over, then parked rows due on their own
backoff), then pending rows; a row whose worker died holding it is only claimed on its own and
runs before anything else is claimed. Ordinary claimed rows are normalized together: one
transaction, their outcomes in one statement, their traces in one insert; if any of them
raises or a lease was lost, all of that is rolled back and each row runs on its own path
(below). Claims are
compare-and-set updates that take a lease (next_attempt_at = now + lease()) and count the
attempt, so two workers never normalize the same row at once, and a row whose worker died is
claimable again when its lease runs out (ingest.due publishes it within a second). A row
claimed MAX_ATTEMPTS times without an outcome (its worker was killed each time: OOM, segfault)
is dead at its next claim instead of being run again. On PostgreSQL the batch claim adds FOR
UPDATE SKIP LOCKED so concurrent consumers take different rows.

Steps for one claimed row:
1. load it and pick its normalizer (registry; "no_normalizer" parks, unknown types are skipped);
   a body bigger than INLINE_BODY_BYTES whose normalizer declared the paths it reads is parsed
   as a stream keeping only those (ingest.projection), not as a whole document;
2. in one transaction: normalize, then write the outcome — only if our lease still holds;
3. if the normalizer raised: roll its writes back, then schedule a retry with exponential
   backoff, or mark the row dead after MAX_ATTEMPTS.
"""

import functools
import logging
import time
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DataError, connection, transaction
from django.utils import timezone

from ingest.metrics import consumer_counted
from ingest.models import RawEvent, RawEventState, TraceEvent, TraceLevel
from ingest.payload import Unparseable, payload_parse
from ingest.projection import payload_projected, payload_trie, reads_trie
from ingest.queue import consume_ticket_ensure, consume_ticket_release
from ingest.registry import (
    Normalizer,
    NormalizeResult,
    ValueOutOfRange,
    item_reads_for,
    normalizer_for,
)
from ingest.traces import trace_columns, trace_row, traces_insert
from ingest.users import users_prefetched
from ops import tracing
from ops.request_id import log_fields_reset, log_fields_set, reset_request_id, set_request_id

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
BACKOFF_BASE = timedelta(seconds=30)
# Parked rows (the normalizer said not ok) are tried again on a backoff that grows with their
# age (half of it, from 30 s to 1 h) while they are younger than PARK_WINDOW; after that they
# wait for an operator.
PARK_BACKOFF_MIN = timedelta(seconds=30)
PARK_BACKOFF_MAX = timedelta(hours=1)
PARK_WINDOW = timedelta(hours=24)
NO_CONNECTION = "no_connection_for_terra_user"  # released by the auth event, not by time
BATCH = 10
CLAIMABLE = (RawEventState.PENDING, RawEventState.PARKED, RawEventState.RETRYING)
# Types whose normalizer lives in another app (labs registers them in ready()); until it is
# there, their rows park instead of being skipped as unknown.
NORMALIZER_EXPECTED = frozenset({"body", "lab_report"})
NOT_CLAIMED = "not_claimed"
# Errors the same payload raises every time: retrying cannot help, so the row parks at once.
# (DataError: PostgreSQL refusing a value for its column; OverflowError: SQLite's 64-bit limit.)
DETERMINISTIC_ERRORS = (ValueOutOfRange, OverflowError, DataError)


class _LostClaim(Exception):
    """Our lease expired and another consumer took the row: roll back, write nothing."""


def lease() -> timedelta:
    """How long a claim holds its row: a row whose worker died is claimable again after this
    (INGEST_LEASE_SECONDS, 90 s by default: recovered within 2 minutes)."""
    return timedelta(seconds=float(getattr(settings, "INGEST_LEASE_SECONDS", 90)))


def backoff(attempts: int) -> timedelta:
    """Delay before the next try after `attempts` failed ones: 30 s, 1 min, 2 min, 4 min."""
    return BACKOFF_BASE * (2 ** max(attempts - 1, 0))


def park_backoff(age: timedelta) -> timedelta:
    """Delay before a parked row is tried again: half its age, within 30 s … 1 h."""
    return min(max(age / 2, PARK_BACKOFF_MIN), PARK_BACKOFF_MAX)


# Claims return the claimed rows themselves (UPDATE … RETURNING): claiming and loading a row is
# one round trip. SQLite has RETURNING since 3.35.
# A claim returns bodies up to INLINE_BODY_BYTES with its rows; a bigger body is left out
# (NULL) and loaded when its row's turn comes, so a batch holds at most one big body at a time
# however many big rows are pending (memory bounded by bytes, not by the row count).
INLINE_BODY_BYTES = 1024 * 1024
# A batch claim's inline bodies add up to at most this: each row's body travels with the claim
# only up to BATCH_BYTES / rows claimed (a 100-row batch holds ≤ 8 MiB of bodies, plus the one
# big body being worked on).
BATCH_BYTES = 8 * 1024 * 1024


def _row_columns(inline: int) -> str:
    return ", ".join(
        f"CASE WHEN length(body) <= {int(inline)} THEN body END AS body"
        if f.column == "body"
        else f.column
        for f in RawEvent._meta.concrete_fields
    )


_ROW_COLUMNS = _row_columns(INLINE_BODY_BYTES)
_DUE = "(next_attempt_at IS NULL OR next_attempt_at <= %s)"


def _claimed(sql: str, params: list) -> list[RawEvent]:
    return sorted(RawEvent.objects.raw(sql, params), key=lambda row: row.pk)


def _with_body(row: RawEvent) -> RawEvent:
    """Load a body the claim left out (too big to travel with the batch)."""
    if row.body is None:
        row.body = RawEvent.objects.filter(pk=row.pk).values_list("body", flat=True).get()
    return row


@functools.lru_cache(maxsize=64)
def _trie(reads: tuple[str, ...]) -> dict:
    return payload_trie(reads_trie(reads))


# A big body is read in pieces of this size (≥ INLINE_BODY_BYTES): few enough queries
# (PostgreSQL decompresses a compressed body from its start up to each piece), small enough
# that memory stays flat.
BODY_PIECE_BYTES = 2 * 1024 * 1024


def _body_piece(pk: int, start: int) -> tuple[bytes, int]:
    """(BODY_PIECE_BYTES of the stored body from byte `start` (1-based), the body's length)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT substr(body, CAST(%s AS integer), CAST(%s AS integer)), length(body) "
            "FROM raw_events WHERE id = %s",
            [start, BODY_PIECE_BYTES, pk],
        )
        found = cursor.fetchone()
    if found is None:
        raise RawEvent.DoesNotExist(f"raw event {pk}")
    return bytes(found[0] or b""), found[1] or 0


def _body_pieces(pk: int, first: bytes, length: int) -> Iterator[bytes]:
    """The stored body piece by piece, one query each, so a big body streams through the
    parser without ever being whole in this process (nor hex-encoded whole in a PostgreSQL
    result: loading a 40 MB body at once peaks at +245 MB). Bodies never change once stored."""
    yield first
    start = len(first) + 1
    while start <= length:
        piece, _ = _body_piece(pk, start)
        if not piece:
            return
        yield piece
        start += len(piece)


def _with_payload(row: RawEvent) -> bool:
    """Make the row's payload readable; True when its body was parsed as a stream.

    A body over INLINE_BODY_BYTES of a type whose normalizer declared the paths it reads
    streams from the database through ingest.projection, which keeps only those: a 40 MB
    delivery of samples never becomes hundreds of MB of Python objects. Any other body is
    loaded and parsed whole; so is one the stream cannot parse, which is then classified
    (skipped:unparseable:<reason>) as any other."""
    reads = item_reads_for(row.event_type)
    if row.body is not None or reads is None:
        _with_body(row)
        return False
    first, length = _body_piece(row.pk, 1)
    if length <= INLINE_BODY_BYTES:
        row.body = first  # the whole body (a piece holds more than INLINE_BODY_BYTES)
        return False
    try:
        row.payload_provide(payload_projected(_body_pieces(row.pk, first, length), _trie(reads)))
        return True
    except ValueError:
        log.info("raw event %s: not one JSON object for the stream parse", row.pk)
    del first
    _with_body(row)
    return False


def _claim_one(pk: int, now: datetime) -> tuple[RawEvent | None, datetime]:
    lease_until = now + lease()
    ops = connection.ops
    states = ", ".join(["%s"] * len(CLAIMABLE))
    rows = _claimed(
        "UPDATE raw_events SET next_attempt_at = %s, attempts = attempts + 1 "
        f"WHERE id = %s AND state IN ({states}) AND {_DUE} RETURNING {_ROW_COLUMNS}",
        [
            ops.adapt_datetimefield_value(lease_until),
            pk,
            *(state.value for state in CLAIMABLE),
            ops.adapt_datetimefield_value(now),
        ],
    )
    return (rows[0] if rows else None), lease_until


def _claim_batch(
    limit: int, now: datetime, *, recovered: bool = True
) -> tuple[list[RawEvent], datetime]:
    """Claim up to `limit` rows in one statement: rows due again first (retries, then expired
    leases, then parked rows, oldest due first), then pending rows oldest first. Due rows are
    few and come first so a backlog of new deliveries never delays a retry. recovered=False
    leaves out rows whose last claim ended without an outcome (_claim_recovered takes them)."""
    lease_until = now + lease()
    ops = connection.ops
    skip_locked = (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )
    states = ", ".join(["%s"] * len(CLAIMABLE))
    not_recovered = "" if recovered else "AND state <> 'pending' "
    # CTEs, not "id IN (SELECT … LIMIT)": PostgreSQL may re-run such a subquery and claim
    # more than `limit` rows; a locking CTE is evaluated exactly once.
    sql = (
        f"WITH again AS (SELECT id FROM raw_events WHERE state IN ({states}) {not_recovered}"
        "AND next_attempt_at IS NOT NULL AND next_attempt_at <= %s "
        "ORDER BY CASE state WHEN %s THEN 0 WHEN %s THEN 1 ELSE 2 END, next_attempt_at, id "
        f"LIMIT %s{skip_locked}), "
        "fresh AS (SELECT id FROM raw_events WHERE state = %s AND next_attempt_at IS NULL "
        f"ORDER BY id LIMIT %s{skip_locked}), "
        "picked AS (SELECT id FROM again UNION ALL SELECT id FROM fresh) "
        "UPDATE raw_events SET next_attempt_at = %s, attempts = attempts + 1 "
        f"WHERE id IN (SELECT id FROM picked LIMIT %s) AND state IN ({states}) AND {_DUE} "
        f"RETURNING {_row_columns(min(INLINE_BODY_BYTES, BATCH_BYTES // max(limit, 1)))}"
    )
    stamp = ops.adapt_datetimefield_value(now)
    claimable = [state.value for state in CLAIMABLE]
    params = [
        *claimable,
        stamp,
        RawEventState.RETRYING.value,
        RawEventState.PENDING.value,
        limit,
        RawEventState.PENDING.value,
        limit,
        ops.adapt_datetimefield_value(lease_until),
        limit,
        *claimable,
        stamp,
    ]
    with transaction.atomic():
        rows = _claimed(sql, params)
    return rows, lease_until


def _claim_recovered(now: datetime) -> tuple[RawEvent | None, datetime]:
    """Claim one pending row whose lease ran out (its worker died holding it: maybe because of
    it), to be run alone: a row that kills its worker then takes no batch-mates' attempts with
    it."""
    lease_until = now + lease()
    ops = connection.ops
    skip_locked = (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )
    sql = (
        "WITH picked AS (SELECT id FROM raw_events WHERE state = %s "
        "AND next_attempt_at IS NOT NULL AND next_attempt_at <= %s "
        f"ORDER BY next_attempt_at, id LIMIT 1{skip_locked}) "
        "UPDATE raw_events SET next_attempt_at = %s, attempts = attempts + 1 "
        f"WHERE id IN (SELECT id FROM picked) AND state = %s AND {_DUE} RETURNING {_ROW_COLUMNS}"
    )
    stamp = ops.adapt_datetimefield_value(now)
    params = [
        RawEventState.PENDING.value,
        stamp,
        ops.adapt_datetimefield_value(lease_until),
        RawEventState.PENDING.value,
        stamp,
    ]
    with transaction.atomic():
        rows = _claimed(sql, params)
    return (rows[0] if rows else None), lease_until


def _recovered(row: RawEvent) -> bool:
    """A claimed row that was claimed before without an outcome being written (a pending row
    never leaves pending but through an outcome; its attempts count claims)."""
    return row.state == RawEventState.PENDING and row.attempts > 1


def _unparseable(raw_event: RawEvent) -> NormalizeResult:
    try:
        payload_parse(raw_event.body)
    except Unparseable as exc:
        return NormalizeResult(ok=True, skipped=f"unparseable:{exc.reason}")
    return NormalizeResult(ok=False, error="unparseable_body_parsed_on_retry")


def _normalizer_for_row(row: RawEvent) -> Normalizer:
    # A replayed delivery whose body is not a JSON object ends skipped again, with its reason.
    if row.payload is None:
        return _unparseable
    return _normalizer(row.event_type)


def _normalizer(event_type: str) -> Normalizer:
    found = normalizer_for(event_type)
    if found is not None:
        return found
    if event_type in NORMALIZER_EXPECTED:
        return lambda raw_event: NormalizeResult(ok=False, error="no_normalizer")
    return lambda raw_event: NormalizeResult(ok=True, skipped=f"unknown_type:{event_type}")


def _parked_until(row: RawEvent, error: str, now: datetime) -> datetime | None:
    """When a parked row is tried again: on its own backoff while it is younger than a day;
    never by time when it waits for a connection (the auth event releases it) or is older."""
    age = now - row.received_at
    if error == NO_CONNECTION or age >= PARK_WINDOW:
        return None
    return now + park_backoff(age)


def _outcome_fields(result: NormalizeResult, row: RawEvent, now: datetime) -> dict:
    if result.skipped:
        return {
            "state": RawEventState.SKIPPED.value,
            "processed_at": now,
            "process_error": f"skipped:{result.skipped}"[:2000],
        }
    if result.ok:
        return {"state": RawEventState.PROCESSED.value, "processed_at": now, "process_error": None}
    error = (result.error or "not_ok")[:2000]
    return {
        "state": RawEventState.PARKED.value,
        "processed_at": None,
        "process_error": error,
        # An outcome, not a failure: the next claims start a fresh count towards dead.
        "attempts": 0,
        "next_attempt_at": _parked_until(row, error, now),
    }


_TRACE_FOR_STATE = {
    RawEventState.PROCESSED.value: "normalized",
    RawEventState.SKIPPED.value: "skipped",
    RawEventState.PARKED.value: "parked",
}


def _outcome_traces(
    row: RawEvent, event: str, *, began: float, level: str, data: dict
) -> list[list]:
    """consume_event and the outcome trace as trace_row()s. Like trace_write, a trace that
    cannot be encoded is logged and left out, never allowed to fail the row."""
    common = {"request_id": row.request_id, "raw_event_id": row.pk, "user_id": row.user_id}
    step = {"type": row.event_type, "attempt": row.attempts}
    try:
        return [
            trace_row("consume_event", data=step, **common),
            trace_row(
                event,
                level=level,
                duration_ms=round((time.perf_counter() - began) * 1000, 2),
                data={**step, **data},
                **common,
            ),
        ]
    except Exception:
        log.exception("could not encode the traces of raw event %s", row.pk)
        return []


def _outcome_statement(values: dict, lease_until: datetime, pk: int) -> tuple[str, list]:
    """UPDATE raw_events SET `values` (column: value) only while our lease holds."""
    ops = connection.ops
    assignments = ", ".join(f"{column} = %s" for column in values)
    params = [
        ops.adapt_datetimefield_value(value) if isinstance(value, datetime) else value
        for value in values.values()
    ]
    sql = f"UPDATE raw_events SET {assignments} WHERE id = %s AND next_attempt_at = %s"
    return sql, [*params, pk, ops.adapt_datetimefield_value(lease_until)]


def _traces_after_update_sql(update: str, rows: int) -> str:
    """PostgreSQL: the outcome UPDATE in a CTE and the trace rows inserted only if it changed
    the row, so the statement returns as many rows as traces when our lease held, else none.
    The casts type the VALUES list (an untyped NULL there would be text)."""
    user_type = TraceEvent._meta.get_field("user").db_type(connection)
    one = (
        f"(%s, CAST(%s AS bigint), CAST(%s AS {user_type}), %s, %s, "
        "CAST(%s AS double precision), CAST(%s AS jsonb), CAST(%s AS timestamptz))"
    )
    columns = trace_columns()
    return (
        f"WITH outcome AS ({update} RETURNING id) "
        f"INSERT INTO trace_events ({columns}) SELECT * FROM (VALUES {', '.join([one] * rows)}) "
        f"AS t ({columns}) WHERE EXISTS (SELECT 1 FROM outcome) RETURNING id"
    )


def _write_outcome(pk: int, lease_until: datetime, values: dict, traces: list[list]) -> bool:
    """Write the row's outcome (only while our lease holds) and its traces; False means
    another consumer took the row and nothing was written. Plain SQL: it runs for every row
    and the ORM's update() cost more than the statement. On PostgreSQL it is one statement:
    a 2-worker cluster spends its time waiting on round trips, so one less per row counts."""
    update, params = _outcome_statement(values, lease_until, pk)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql" and traces:
            cursor.execute(
                _traces_after_update_sql(update, len(traces)),
                [*params, *(value for trace in traces for value in trace)],
            )
            return cursor.rowcount == len(traces)
        cursor.execute(update, params)
        if cursor.rowcount != 1:
            return False
    if traces:
        try:
            traces_insert(traces)
        except Exception:
            log.exception("could not write the traces of raw event %s", pk)
    return True


def _process(row: RawEvent, lease_until: datetime, now: datetime, *, links=()) -> str:
    """Normalize one claimed row, inside an `ingest.consume` span when OpenTelemetry is on (its
    request id matches the webhook span's; `links` point at that span when known)."""
    attributes = {
        "raw_event.id": row.pk,
        "raw_event.type": row.event_type,
        "raw_event.attempts": row.attempts,
        "request_id": row.request_id if row.request_id not in ("", "-") else None,
    }
    with tracing.span("ingest.consume", attributes, links=links) as span:
        state = _process_row(row, lease_until, now)
        if state != NOT_CLAIMED:
            consumer_counted(state, row.event_type)  # /metrics: consumer throughput by outcome
        tracing.set_attributes(span, {"raw_event.outcome": state})
        return state


def _process_row(row: RawEvent, lease_until: datetime, now: datetime) -> str:
    pk = row.pk
    token = set_request_id(row.request_id or "-")
    fields_token = log_fields_set(raw_event_id=pk)  # log lines name the row (LOG_FORMAT=json)
    began = time.perf_counter()
    try:
        if row.attempts > MAX_ATTEMPTS:
            return _abandoned(row, lease_until, now, began)
        streamed = _with_payload(row)
        try:
            with transaction.atomic():
                result = _normalizer_for_row(row)(row)
                fields = _outcome_fields(result, row, now)
                traces = _outcome_traces(
                    row,
                    _TRACE_FOR_STATE[fields["state"]],
                    began=began,
                    level=TraceLevel.WARNING
                    if fields["state"] == RawEventState.PARKED.value
                    else TraceLevel.INFO,
                    data={
                        "rows": result.rows,
                        # typed rows' `raw` then hold only the fields the normalizer read
                        **({"stream_parsed": True} if streamed else {}),
                        **(result.detail or {}),
                        **({"error": fields["process_error"]} if fields["process_error"] else {}),
                    },
                )
                values = {"next_attempt_at": None, "user_id": row.user_id, **fields}
                if not _write_outcome(pk, lease_until, values, traces):
                    raise _LostClaim
            return fields["state"]
        except _LostClaim:
            log.warning("raw event %s: lease lost, another consumer has it", pk)
            return NOT_CLAIMED
        except DETERMINISTIC_ERRORS as exc:
            log.warning("raw event %s: %s cannot be stored: %s", pk, row.event_type, exc)
            return _parked_at_once(row, exc, lease_until, now, began)
        except Exception as exc:
            log.exception("raw event %s: normalizer for %s raised", pk, row.event_type)
            return _failed(row, exc, lease_until, now, began)
    finally:
        log_fields_reset(fields_token)
        reset_request_id(token)


def _parked_at_once(
    row: RawEvent, exc: Exception, lease_until: datetime, now: datetime, began: float
) -> str:
    """A deterministic error: park the row with a clear message (no retries with backoff)."""
    error = f"value_out_of_range: {exc}"[:2000]
    traces = _outcome_traces(
        row, "parked", began=began, level=TraceLevel.ERROR, data={"error": error[:500]}
    )
    values = {
        "state": RawEventState.PARKED.value,
        "process_error": error,
        "processed_at": None,
        "next_attempt_at": None,
    }
    with transaction.atomic():
        if not _write_outcome(row.pk, lease_until, values, traces):
            return NOT_CLAIMED
    return RawEventState.PARKED.value


def _failed(
    row: RawEvent, exc: Exception, lease_until: datetime, now: datetime, began: float
) -> str:
    """Retry with backoff, or give up after MAX_ATTEMPTS (the row is then dead: the DLQ)."""
    error = f"{exc.__class__.__name__}: {exc}"[:2000]
    dead = row.attempts >= MAX_ATTEMPTS
    state = RawEventState.DEAD if dead else RawEventState.RETRYING
    next_at = None if dead else now + backoff(row.attempts)
    traces = _outcome_traces(
        row,
        "dead" if dead else "retry_scheduled",
        began=began,
        level=TraceLevel.ERROR if dead else TraceLevel.WARNING,
        data={
            "error": error[:500],
            **({"next_attempt_at": next_at.isoformat()} if next_at else {}),
        },
    )
    values = {
        "state": state.value,
        "process_error": error,
        "processed_at": None,
        "next_attempt_at": next_at,
    }
    with transaction.atomic():
        if not _write_outcome(row.pk, lease_until, values, traces):
            return NOT_CLAIMED
    return state.value


def _abandoned(row: RawEvent, lease_until: datetime, now: datetime, began: float) -> str:
    """Claimed MAX_ATTEMPTS times with no outcome written: each time its worker died (killed for
    memory, a segfault, a timeout). Running it again would kill another worker: dead."""
    error = (
        f"claimed {MAX_ATTEMPTS} times without an outcome: its worker died each time "
        "(out of memory, crash or timeout)"
    )
    traces = _outcome_traces(
        row, "dead", began=began, level=TraceLevel.ERROR, data={"error": error}
    )
    values = {
        "state": RawEventState.DEAD.value,
        "process_error": error,
        "processed_at": None,
        "next_attempt_at": None,
    }
    with transaction.atomic():
        if not _write_outcome(row.pk, lease_until, values, traces):
            return NOT_CLAIMED
    return RawEventState.DEAD.value


def raw_event_consume(raw_event_id: int, *, now: datetime | None = None) -> str:
    """Claim and normalize one row; returns its new state, or "not_claimed" when it was not
    claimable (already processed, leased by another consumer, or its backoff is not over) —
    which makes re-consuming a processed row a no-op."""
    now = now or timezone.now()
    row, lease_until = _claim_one(raw_event_id, now)
    if row is None:
        return NOT_CLAIMED
    return _process(row, lease_until, now)


def raw_events_consume_batch(
    raw_event_id: int | None = None,
    *,
    batch: int = BATCH,
    now: datetime | None = None,
    traceparent: str = "",
) -> dict[str, int]:
    """The queue task's body: this row, then up to `batch` other rows (due again first, then
    pending; all claimed first, then normalized in that order). Returns counts per outcome.
    `traceparent`: the webhook span that enqueued this row (OpenTelemetry link).

    Rows whose last claim ended without an outcome (their worker died holding them) are only
    claimed by their own task, and such a row runs before anything else is claimed: if it is
    what kills workers, it takes no batch-mates' attempts with it."""
    outcomes: dict[str, int] = {}
    claimed: list[tuple[RawEvent, datetime]] = []
    if raw_event_id is not None:
        row, lease_until = _claim_one(raw_event_id, now or timezone.now())
        if row is None:
            # Another run took this row in its batch; the rows still pending have tasks of
            # their own. Returning at once keeps these no-op tasks at one query.
            return {NOT_CLAIMED: 1}
        if _recovered(row):
            _tally(
                outcomes,
                _consume_claimed(
                    [(row, lease_until)], now=now, traceparent=traceparent, linked=raw_event_id
                ),
            )
        else:
            claimed.append((row, lease_until))
    if batch > 0:
        rows, lease_until = _claim_batch(batch, now or timezone.now(), recovered=False)
        claimed += [(row, lease_until) for row in rows]
    _tally(
        outcomes, _consume_claimed(claimed, now=now, traceparent=traceparent, linked=raw_event_id)
    )
    return outcomes


def _consume_claimed(
    claimed: list[tuple[RawEvent, datetime]],
    *,
    now: datetime | None = None,
    traceparent: str = "",
    linked: int | None = None,
) -> dict[str, int]:
    """Normalize claimed rows in their claim order: runs of ordinary rows together (one
    transaction, one outcome statement, one trace insert); a big body, a row at its last claim
    or the row a webhook span links to on its own path (_process)."""
    outcomes: dict[str, int] = {}
    group: list[tuple[RawEvent, datetime]] = []

    def flush() -> None:
        if group:
            _tally(outcomes, _consume_group(group, now))
            group.clear()

    # One user query for the batch, not one per row (rows mostly name their user).
    with users_prefetched(row.reference_id for row, _ in claimed):
        for row, lease_until in claimed:
            if _goes_together(row) and row.pk != linked:
                group.append((row, lease_until))
                continue
            flush()
            links = tracing.links_from(traceparent) if row.pk == linked else ()
            _tally(outcomes, {_process(row, lease_until, now or timezone.now(), links=links): 1})
            _drop_body(row)
        flush()
    return outcomes


def _drop_body(row: RawEvent) -> None:
    """Done with a row: drop its body and parsed payload before the next row's."""
    row.body = None
    row.__dict__.pop("_payload_cache", None)


def _goes_together(row: RawEvent) -> bool:
    return row.body is not None and row.attempts <= MAX_ATTEMPTS


def _consume_group(group: list[tuple[RawEvent, datetime]], now: datetime | None) -> dict[str, int]:
    """Rows normalized together, or — when any of them raised, or a lease was lost — each on
    its own path, which retries, parks or leaves exactly that row (the group's writes were all
    rolled back, so nothing is written twice)."""
    if len(group) > 1:
        states = _together(group, now or timezone.now())
        if states is not None:
            for (row, _), state in zip(group, states, strict=True):
                consumer_counted(state, row.event_type)
                _drop_body(row)
            return {state: states.count(state) for state in set(states)}
    outcomes: dict[str, int] = {}
    for row, lease_until in group:
        _tally(outcomes, {_process(row, lease_until, now or timezone.now()): 1})
        _drop_body(row)
    return outcomes


def _together(group: list[tuple[RawEvent, datetime]], now: datetime) -> list[str] | None:
    """One transaction for the group's normalizers, their outcomes in one UPDATE (each only
    while our lease holds) and their traces in one INSERT. Returns each row's state, or None
    after rolling everything back."""
    try:
        with transaction.atomic():
            outcomes, traces = [], []
            for row, lease_until in group:
                fields, row_traces = _normalized(row, now)
                values = {"next_attempt_at": None, "user_id": row.user_id, **fields}
                values.setdefault("attempts", row.attempts)
                outcomes.append((row.pk, lease_until, values))
                traces += row_traces
            if _outcomes_write(outcomes) != len(outcomes):
                raise _LostClaim
            if traces:
                _traces_write(traces)
    except Exception:
        log.info("a batch of %s rows rolled back: each runs on its own", len(group), exc_info=True)
        return None
    return [values["state"] for _, _, values in outcomes]


def _normalized(row: RawEvent, now: datetime) -> tuple[dict, list[list]]:
    """Run one row's normalizer (request id, log fields and span as on _process's path):
    its outcome columns and traces. Raises what the normalizer raises."""
    token = set_request_id(row.request_id or "-")
    fields_token = log_fields_set(raw_event_id=row.pk)
    attributes = {
        "raw_event.id": row.pk,
        "raw_event.type": row.event_type,
        "raw_event.attempts": row.attempts,
        "request_id": row.request_id if row.request_id not in ("", "-") else None,
    }
    began = time.perf_counter()
    try:
        with tracing.span("ingest.consume", attributes) as span:
            result = _normalizer_for_row(row)(row)
            fields = _outcome_fields(result, row, now)
            tracing.set_attributes(span, {"raw_event.outcome": fields["state"]})
        traces = _outcome_traces(
            row,
            _TRACE_FOR_STATE[fields["state"]],
            began=began,
            level=TraceLevel.WARNING
            if fields["state"] == RawEventState.PARKED.value
            else TraceLevel.INFO,
            data={
                "rows": result.rows,
                **(result.detail or {}),
                **({"error": fields["process_error"]} if fields["process_error"] else {}),
            },
        )
        return fields, traces
    finally:
        log_fields_reset(fields_token)
        reset_request_id(token)


_OUTCOME_COLUMNS = (
    "id",
    "state",
    "processed_at",
    "process_error",
    "attempts",
    "next_attempt_at",
    "user",
)


def _outcomes_sql(vendor: str, rows: int) -> str:
    """UPDATE raw_events … FROM v: every row's outcome in one statement, each only where
    next_attempt_at still equals its lease. On PostgreSQL v is unnest() of one typed array
    per column: a statement of fixed text and 8 parameters, whatever the batch size (psycopg
    re-parses a statement of hundreds of placeholders on every call); elsewhere a VALUES
    list."""
    fields = [RawEvent._meta.get_field(name) for name in _OUTCOME_COLUMNS]
    names = [*(field.column for field in fields), "lease"]
    sets = ", ".join(f"{name} = v.{name}" for name in names[1:-1])
    where = "WHERE raw_events.id = v.id AND raw_events.next_attempt_at = v.lease"
    if vendor == "postgresql":
        types = [*(field.db_type(connection) for field in fields), "timestamp with time zone"]
        arrays = ", ".join(f"CAST(%s AS {kind}[])" for kind in types)
        return (
            f"UPDATE raw_events SET {sets} FROM unnest({arrays}) AS v ({', '.join(names)}) " + where
        )
    one = "(" + ", ".join(["%s"] * len(names)) + ")"
    return (
        f"WITH v ({', '.join(names)}) AS (VALUES {', '.join([one] * rows)}) "
        f"UPDATE raw_events SET {sets} FROM v " + where
    )


def _outcomes_write(outcomes: list[tuple[int, datetime, dict]]) -> int:
    """Write each (pk, lease_until, values) outcome; returns how many rows were still ours."""
    adapt = connection.ops.adapt_datetimefield_value
    rows = [
        [
            pk,
            values["state"],
            adapt(values["processed_at"]),
            values["process_error"],
            values["attempts"],
            adapt(values["next_attempt_at"]),
            values["user_id"],
            adapt(lease_until),
        ]
        for pk, lease_until, values in outcomes
    ]
    vendor = connection.vendor
    params = (
        [list(column) for column in zip(*rows, strict=True)]
        if vendor == "postgresql"
        else [value for row in rows for value in row]
    )
    with connection.cursor() as cursor:
        cursor.execute(_outcomes_sql(vendor, len(rows)), params)
        if cursor.rowcount >= 0:
            return cursor.rowcount
        # Python < 3.12's sqlite3 reports -1 for a statement that starts with WITH.
        cursor.execute("SELECT changes()")
        return cursor.fetchone()[0]


def _traces_write(traces: list[list]) -> None:
    """trace_row()s in one INSERT; on PostgreSQL from unnest() of one array per column (fixed
    text, 8 parameters), elsewhere traces_insert's VALUES list."""
    if connection.vendor != "postgresql":
        traces_insert(traces)
        return
    types = [
        TraceEvent._meta.get_field(name).db_type(connection)
        for name in ("request_id", "raw_event", "user", "level", "event", "duration_ms", "data")
    ]
    arrays = ", ".join(f"CAST(%s AS {kind}[])" for kind in [*types, "timestamp with time zone"])
    columns = trace_columns()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO trace_events ({columns}) SELECT * FROM unnest({arrays})",
            [list(column) for column in zip(*traces, strict=True)],
        )


# A shared consume task (ingest.queue tickets) claims this many rows at a time and stops after
# PENDING_BUDGET of work (queueing its successor when rows are left), so it never holds a
# worker for long: workflow wakes and schedules share the cluster.
PENDING_BATCH = 100
PENDING_BUDGET = timedelta(seconds=2)


def raw_events_consume_pending(
    ticket: int | None = None,
    *,
    batch: int = PENDING_BATCH,
    budget: timedelta = PENDING_BUDGET,
    now: datetime | None = None,
) -> dict[str, int]:
    """The shared consume task's body (ingest.queue): release its ticket, then drain pending
    and due rows `batch` at a time until none is left or `budget` is spent. A full batch
    makes sure another task is queued, so the cluster's other workers join in and the work
    goes on after this one stops. Returns counts per outcome."""
    consume_ticket_release(ticket)
    outcomes: dict[str, int] = {}
    began = time.monotonic()
    while True:
        recovered, lease_until = _claim_recovered(now or timezone.now())
        if recovered is not None:
            _tally(outcomes, {_process(recovered, lease_until, now or timezone.now()): 1})
        rows, lease_until = _claim_batch(batch, now or timezone.now(), recovered=False)
        if len(rows) == batch:
            consume_ticket_ensure()
        _tally(outcomes, _consume_claimed([(row, lease_until) for row in rows], now=now))
        if not rows and recovered is None:
            return outcomes
        if time.monotonic() - began > budget.total_seconds():
            consume_ticket_ensure()
            return outcomes


def _tally(total: dict[str, int], more: dict[str, int]) -> None:
    for outcome, count in more.items():
        total[outcome] = total.get(outcome, 0) + count
