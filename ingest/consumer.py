"""The consumer: claim raw events, run their normalizer, and move each row through the state
machine of DESIGN §4 (pending → processed | skipped | parked | retrying → dead).

One consumer run (a django-q2 task for one row) also claims up to BATCH other pending rows, so
throughput is not capped by the queue's per-task overhead. Claims are compare-and-set updates
that take a lease (next_attempt_at = now + LEASE) and count the attempt, so two workers never
normalize the same row at once; on PostgreSQL the batch claim adds FOR UPDATE SKIP LOCKED so
concurrent consumers take different rows instead of queueing on the same ones.

Steps for one claimed row:
1. load it and pick its normalizer (registry; "no_normalizer" parks, unknown types are skipped);
2. in one transaction: normalize, then write the outcome — only if our lease still holds;
3. if the normalizer raised: roll its writes back, then schedule a retry with exponential
   backoff, or mark the row dead after MAX_ATTEMPTS.
"""

import logging
import time
from datetime import datetime, timedelta

from django.db import DataError, connection, transaction
from django.utils import timezone

from ingest.models import RawEvent, RawEventState, TraceEvent, TraceLevel
from ingest.payload import Unparseable, payload_parse
from ingest.registry import Normalizer, NormalizeResult, ValueOutOfRange, normalizer_for
from ingest.traces import trace_columns, trace_row, traces_insert
from ingest.users import users_prefetched
from ops.request_id import reset_request_id, set_request_id

log = logging.getLogger(__name__)

LEASE = timedelta(minutes=5)
MAX_ATTEMPTS = 5
BACKOFF_BASE = timedelta(seconds=30)
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


def backoff(attempts: int) -> timedelta:
    """Delay before the next try after `attempts` failed ones: 30 s, 1 min, 2 min, 4 min."""
    return BACKOFF_BASE * (2 ** max(attempts - 1, 0))


# Claims return the claimed rows themselves (UPDATE … RETURNING): claiming and loading a row is
# one round trip. SQLite has RETURNING since 3.35.
_ROW_COLUMNS = ", ".join(f.column for f in RawEvent._meta.concrete_fields)
_DUE = "(next_attempt_at IS NULL OR next_attempt_at <= %s)"


def _claimed(sql: str, params: list) -> list[RawEvent]:
    return sorted(RawEvent.objects.raw(sql, params), key=lambda row: row.pk)


def _claim_one(pk: int, now: datetime) -> tuple[RawEvent | None, datetime]:
    lease_until = now + LEASE
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


def _claim_batch(limit: int, now: datetime) -> tuple[list[RawEvent], datetime]:
    """Claim up to `limit` pending rows (oldest first) in one statement."""
    lease_until = now + LEASE
    ops = connection.ops
    skip_locked = (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )
    # A CTE, not "id IN (SELECT … LIMIT)": PostgreSQL may re-run such a subquery and claim
    # more than `limit` rows; a locking CTE is evaluated exactly once.
    sql = (
        f"WITH picked AS (SELECT id FROM raw_events WHERE state = %s AND {_DUE} "
        f"ORDER BY id LIMIT %s{skip_locked}) "
        "UPDATE raw_events SET next_attempt_at = %s, attempts = attempts + 1 "
        f"WHERE id IN (SELECT id FROM picked) AND state = %s AND {_DUE} "
        f"RETURNING {_ROW_COLUMNS}"
    )
    stamp = ops.adapt_datetimefield_value(now)
    params = [
        RawEventState.PENDING.value,
        stamp,
        limit,
        ops.adapt_datetimefield_value(lease_until),
        RawEventState.PENDING.value,
        stamp,
    ]
    with transaction.atomic():
        rows = _claimed(sql, params)
    return rows, lease_until


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


def _outcome_fields(result: NormalizeResult, now: datetime) -> dict:
    if result.skipped:
        return {
            "state": RawEventState.SKIPPED.value,
            "processed_at": now,
            "process_error": f"skipped:{result.skipped}"[:2000],
        }
    if result.ok:
        return {"state": RawEventState.PROCESSED.value, "processed_at": now, "process_error": None}
    return {
        "state": RawEventState.PARKED.value,
        "processed_at": None,
        "process_error": (result.error or "not_ok")[:2000],
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


def _process(row: RawEvent, lease_until: datetime, now: datetime) -> str:
    pk = row.pk
    token = set_request_id(row.request_id or "-")
    began = time.perf_counter()
    try:
        try:
            with transaction.atomic():
                result = _normalizer_for_row(row)(row)
                fields = _outcome_fields(result, now)
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
    raw_event_id: int | None = None, *, batch: int = BATCH, now: datetime | None = None
) -> dict[str, int]:
    """The queue task's body: this row, then up to `batch` other pending rows (all claimed
    first, then normalized in that order). Returns counts per outcome."""
    outcomes: dict[str, int] = {}

    def count(outcome: str) -> None:
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    claimed: list[tuple[RawEvent, datetime]] = []
    if raw_event_id is not None:
        row, lease_until = _claim_one(raw_event_id, now or timezone.now())
        if row is None:
            # Another run took this row in its batch; the rows still pending have tasks of
            # their own. Returning at once keeps these no-op tasks at one query.
            return {NOT_CLAIMED: 1}
        claimed.append((row, lease_until))
    if batch > 0:
        rows, lease_until = _claim_batch(batch, now or timezone.now())
        claimed += [(row, lease_until) for row in rows]
    # One user query for the batch, not one per row (rows mostly name their user).
    with users_prefetched(row.reference_id for row, _ in claimed):
        for row, lease_until in claimed:
            count(_process(row, lease_until, now or timezone.now()))
    return outcomes
