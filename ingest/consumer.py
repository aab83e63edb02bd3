"""The consumer: claim raw events with a lease, run their normalizer, and write each row's outcome
(decided by ingest.decisions) with its traces through one writer (ingest.store.consumer).

1. claim: a compare-and-set UPDATE takes a lease (next_attempt_at = now + lease()) and counts the
   attempt, so two workers never normalize one row at once and a dead worker's row comes back;
2. normalize: consecutive ordinary rows together in one transaction; a row that must run alone
   (a big body, a row a dead worker held, one at its last claim) in a transaction of its own;
3. write: the outcomes in one statement, each only while its lease holds; if anything in a group
   raised or lost its lease, the group rolls back and each of its rows runs alone, where an
   error becomes that row's own outcome (retry with backoff, parked, or dead).
docs/ingest.md › The consumer tells the whole story.
"""

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DataError, transaction
from django.utils import timezone

from ingest import decisions
from ingest.bodies import drop_body, with_payload
from ingest.decisions import NOT_CLAIMED, Outcome
from ingest.metrics import consumer_counted
from ingest.models import RawEvent
from ingest.normalizers.users import users_prefetched
from ingest.queue import consume_ticket_ensure, consume_ticket_release
from ingest.registry import (
    Normalizer,
    NormalizeResult,
    ValueOutOfRange,
    normalizer_for,
    runs_in_transaction,
)
from ingest.store import consumer as store
from ingest.terra.payload import Unparseable, payload_parse
from ingest.traces import trace_row
from ingest.wiped import SKIPPED as WIPED_USER
from ingest.wiped import delivery_is_wiped, wiped_prefetched
from ops import tracing
from ops.liveness import progress_mark
from ops.request_id import log_fields_reset, log_fields_set, reset_request_id, set_request_id
from ops.tracebacks import bounded

log = logging.getLogger(__name__)

BATCH = 10  # a task for one row also claims this many others
# A shared consume task (ingest.queue tickets) claims this many rows at a time and stops after
# PENDING_BUDGET of work (queueing its successor when rows are left), so it never holds a
# worker for long: workflow wakes and schedules share the cluster.
PENDING_BATCH = 100
PENDING_BUDGET = timedelta(seconds=2)
# Types whose normalizer lives in another app (labs registers them in ready()); until it is
# there, their rows park instead of being skipped as unknown.
NORMALIZER_EXPECTED = frozenset({"body", "lab_report"})
# Errors the same payload raises every time: retrying cannot help, so the row parks at once.
# (DataError: PostgreSQL refusing a value for its column; OverflowError: SQLite's 64-bit limit.)
DETERMINISTIC_ERRORS = (ValueOutOfRange, OverflowError, DataError)


class _LostClaim(Exception):
    """Our lease expired and another consumer took the row: roll back, write nothing."""


def lease() -> timedelta:
    """How long a claim holds its row: a row whose worker died is claimable again after this
    (INGEST_LEASE_SECONDS, 90 s by default: recovered within 2 minutes)."""
    return timedelta(seconds=float(getattr(settings, "INGEST_LEASE_SECONDS", 90)))


# -- entry points ---------------------------------------------------------------------------------


def raw_event_consume(raw_event_id: int, *, now: datetime | None = None) -> str:
    """Claim and normalize one row; returns its new state, or "not_claimed" when it was not
    claimable (already processed, leased by another consumer, or its backoff is not over) —
    which makes re-consuming a processed row a no-op."""
    now = now or timezone.now()
    lease_until = now + lease()
    row = store.claim_one(raw_event_id, now, lease_until)
    if row is None:
        return NOT_CLAIMED
    return _run_alone(row, lease_until, now)


def raw_events_consume_batch(
    raw_event_id: int | None = None,
    *,
    batch: int = BATCH,
    now: datetime | None = None,
    traceparent: str = "",
) -> dict[str, int]:
    """A task for one row (the due poller's, the drain's, replays, Redis): this row, then up to
    `batch` other rows (due again first, then pending). Returns counts per outcome. A row a dead
    worker held runs alone before anything else is claimed: if it is what kills workers, it
    takes no batch-mates' attempts with it. (`traceparent`: accepted from messages queued
    before rows carried their own.)"""
    outcomes: dict[str, int] = {}
    claimed: list[tuple[RawEvent, datetime]] = []
    if raw_event_id is not None:
        at = now or timezone.now()
        row = store.claim_one(raw_event_id, at, at + lease())
        if row is None:
            # Another run took this row in its batch: returning at once keeps no-op tasks at
            # one query.
            return {NOT_CLAIMED: 1}
        if decisions.was_recovered(row.state, row.attempts):
            _tally(outcomes, _consume_claimed([(row, at + lease())], now))
        else:
            claimed.append((row, at + lease()))
    if batch > 0:
        at = now or timezone.now()
        rows = store.claim_batch(batch, at, at + lease(), recovered=False)
        claimed += [(row, at + lease()) for row in rows]
    _tally(outcomes, _consume_claimed(claimed, now))
    return outcomes


def raw_events_consume_pending(
    ticket: int | None = None,
    *,
    batch: int = PENDING_BATCH,
    budget: timedelta = PENDING_BUDGET,
    now: datetime | None = None,
) -> dict[str, int]:
    """The shared consume task (ingest.queue): release its ticket, then drain pending and due
    rows `batch` at a time until none is left or `budget` is spent. A full batch makes sure
    another task is queued, so the cluster's other workers join in. Counts per outcome."""
    consume_ticket_release(ticket)
    outcomes: dict[str, int] = {}
    began = time.monotonic()
    while True:
        at = now or timezone.now()
        recovered = store.claim_recovered(at, at + lease())
        if recovered is not None:
            _tally(outcomes, {_run_alone(recovered, at + lease(), at): 1})
        at = now or timezone.now()
        rows = store.claim_batch(batch, at, at + lease(), recovered=False)
        if len(rows) == batch:
            consume_ticket_ensure()
        _tally(outcomes, _consume_claimed([(row, at + lease()) for row in rows], now))
        if not rows and recovered is None:
            return outcomes
        if time.monotonic() - began > budget.total_seconds():
            consume_ticket_ensure()
            return outcomes


def _tally(total: dict[str, int], more: dict[str, int]) -> None:
    for outcome, count in more.items():
        total[outcome] = total.get(outcome, 0) + count


# -- running claimed rows -------------------------------------------------------------------------


def _consume_claimed(claimed: list[tuple[RawEvent, datetime]], now) -> dict[str, int]:
    """Normalize claimed rows in claim order: runs of ordinary rows together, the others alone."""
    outcomes: dict[str, int] = {}
    group: list[tuple[RawEvent, datetime]] = []

    def flush() -> None:
        if group:
            _tally(outcomes, _run_group(group, now or timezone.now()))
            group.clear()

    # One user query for the batch, not one per row (rows mostly name their user); one query
    # for whether any of them names a wiped user.
    rows = [row for row, _ in claimed]
    with users_prefetched(row.reference_id for row in rows), wiped_prefetched(rows):
        for row, lease_until in claimed:
            if _goes_together(row):
                group.append((row, lease_until))
                continue
            flush()
            _tally(outcomes, {_run_alone(row, lease_until, now or timezone.now()): 1})
            drop_body(row)
        flush()
    return outcomes


def _goes_together(row: RawEvent) -> bool:
    return (
        row.body is not None
        and not decisions.is_abandoned(row.attempts)
        and not decisions.was_recovered(row.state, row.attempts)
        and _in_one_transaction(row)
    )


def _in_one_transaction(row: RawEvent) -> bool:
    """False for a normalizer that waits on the network and for a delivery of more items than
    one piece: they run outside a transaction (Pieces commits each piece)."""
    if not runs_in_transaction(row.event_type):
        return False
    data = row.payload.get("data") if isinstance(row.payload, dict) else None
    return not isinstance(data, list) or len(data) <= _piece_items()


def _piece_items() -> int:
    return max(int(getattr(settings, "INGEST_PIECE_ITEMS", 2000)), 1)


class Pieces:
    """A big delivery's items in pieces — INGEST_PIECE_ITEMS items, or a third of the lease,
    whichever comes first — each in a transaction that commits with the row's progress and a
    renewed lease (compare-and-set: a lost lease stops the work), so a delivery too big for one
    lease finishes; the items an earlier attempt committed are skipped. MappingReport.items()
    hands its items through it."""

    def __init__(self, row: RawEvent, lease_until: datetime):
        self.row, self.lease_until = row, lease_until
        self._open: Iterator | None = None

    def __call__(self, items: list) -> Iterator:
        self._open = self._pieces(items)
        return self._open

    def _pieces(self, items: list) -> Iterator:
        start, size = min(self.row.progress, len(items)), _piece_items()
        budget = lease().total_seconds() / 3
        while start < len(items):
            began, end = time.monotonic(), start
            with transaction.atomic():
                while end < len(items) and end - start < size:
                    yield items[end]
                    end += 1
                    if time.monotonic() - began > budget:
                        break
                renewed = timezone.now() + lease()
                if not store.progress_write(self.row.pk, end, self.lease_until, renewed):
                    raise _LostClaim
            self.lease_until, self.row.progress, start = renewed, end, end
            progress_mark()  # a committed piece is progress (ops.liveness)

    def close(self) -> None:
        """Roll back a piece the normalizer left unfinished (it raised mid-way)."""
        if self._open is not None:
            self._open.close()


def _run_group(group: list[tuple[RawEvent, datetime]], now: datetime) -> dict[str, int]:
    """Rows normalized in one transaction with one outcome write; when any of them raised or a
    lease was lost, all of it is rolled back and each row runs alone."""
    if len(group) > 1:
        try:
            with transaction.atomic():
                written = []
                for row, lease_until in group:
                    with _row_context(row):
                        written.append((row, lease_until, *_normalized(row, now)))
                if _write(written) != len(written):
                    raise _LostClaim
        except Exception:
            log.info("a batch of %s rows rolled back: each runs alone", len(group), exc_info=True)
        else:
            progress_mark()  # rows finished: this worker progresses (ops.liveness)
            for row, _, outcome, _ in written:
                consumer_counted(outcome.state, row.event_type)
                drop_body(row)
            states = [outcome.state for _, _, outcome, _ in written]
            return {state: states.count(state) for state in set(states)}
    outcomes: dict[str, int] = {}
    for row, lease_until in group:
        _tally(outcomes, {_run_alone(row, lease_until, now): 1})
        drop_body(row)
    return outcomes


def _run_alone(row: RawEvent, lease_until: datetime, now: datetime) -> str:
    """One row in a transaction of its own; an error becomes its outcome."""
    claimed_user = row.user_id  # a failure's outcome keeps it: the normalizer's writes roll back
    with _row_context(row) as span:
        began = time.perf_counter()
        if decisions.is_abandoned(row.attempts):
            outcome = decisions.outcome_of_abandoned(
                attempts=row.attempts,
                last_error=row.process_error,
                last_traceback=row.process_traceback,
            )
            state = _write_one(row, lease_until, outcome, {"error": outcome.process_error}, began)
        else:
            pieces = Pieces(row, lease_until)
            try:
                streamed = with_payload(row)
                if _in_one_transaction(row):
                    with transaction.atomic():
                        outcome, traces = _normalized(row, now, streamed=streamed)
                        if _write([(row, lease_until, outcome, traces)]) != 1:
                            raise _LostClaim
                else:
                    # Waits on the network, or commits piece by piece: outside a transaction.
                    row.pieces = pieces
                    try:
                        outcome, traces = _normalized(row, now, streamed=streamed)
                    finally:
                        pieces.close()
                    with transaction.atomic():
                        if _write([(row, pieces.lease_until, outcome, traces)]) != 1:
                            raise _LostClaim
                state = outcome.state
            except _LostClaim:
                log.warning("raw event %s: lease lost, another consumer has it", row.pk)
                state = NOT_CLAIMED
            except Exception as exc:
                state = _failed(row, pieces.lease_until, exc, claimed_user, now, began)
        if state != NOT_CLAIMED:
            progress_mark()  # a row finished: this worker progresses (ops.liveness)
            consumer_counted(state, row.event_type)  # /metrics: consumer throughput by outcome
        tracing.set_attributes(span, {"raw_event.outcome": state})
        return state


def _failed(row, lease_until, exc: Exception, user_id, now: datetime, began: float) -> str:
    deterministic = isinstance(exc, DETERMINISTIC_ERRORS)
    if deterministic:
        log.warning("raw event %s: %s cannot be stored: %s", row.pk, row.event_type, exc)
        error = str(exc)
    else:
        log.exception("raw event %s: normalizer for %s raised", row.pk, row.event_type)
        error = f"{exc.__class__.__name__}: {exc}"
    outcome = decisions.outcome_of_failure(
        error=error,
        deterministic=deterministic,
        attempts=row.attempts,
        received_at=row.received_at,
        now=now,
        traceback=bounded(exc),
    )
    data = {"error": outcome.process_error[:500]}
    if outcome.next_attempt_at is not None:
        data["next_attempt_at"] = outcome.next_attempt_at.isoformat()
    row.user_id = user_id
    return _write_one(row, lease_until, outcome, data, began)


def _write_one(row, lease_until, outcome: Outcome, data: dict, began: float) -> str:
    with transaction.atomic():
        written = _write([(row, lease_until, outcome, _traces(row, outcome, data, began))])
    return outcome.state if written else NOT_CLAIMED


@contextmanager
def _row_context(row: RawEvent):
    """The row's request id and log fields (LOG_FORMAT=json names the row) and its
    `ingest.consume` span, linked to the webhook span that recorded it when known."""
    token = set_request_id(row.request_id or "-")
    fields_token = log_fields_set(raw_event_id=row.pk)
    attributes = {
        "raw_event.id": row.pk,
        "raw_event.type": row.event_type,
        "raw_event.attempts": row.attempts,
        "request_id": row.request_id if row.request_id not in ("", "-") else None,
    }
    links = tracing.links_from(row.traceparent) if row.traceparent else ()
    try:
        with tracing.span("ingest.consume", attributes, links=links) as span:
            yield span
    finally:
        log_fields_reset(fields_token)
        reset_request_id(token)


def _normalized(row: RawEvent, now: datetime, *, streamed: bool = False) -> tuple[Outcome, list]:
    """Run the row's normalizer: its outcome and traces. Raises what the normalizer raises."""
    began = time.perf_counter()
    result = _normalizer_for_row(row)(row)
    if result.defer:
        outcome = decisions.outcome_of_deferral(
            error=result.error or "deferred", attempts=row.attempts, now=now
        )
        return outcome, _traces(row, outcome, {"error": outcome.process_error}, began)
    outcome = decisions.outcome_of_result(
        ok=result.ok,
        skipped=result.skipped,
        error=result.error,
        attempts=row.attempts,
        received_at=row.received_at,
        now=now,
    )
    data = {
        "rows": result.rows,
        # typed rows' `raw` then hold only the fields the normalizer read
        **({"stream_parsed": True} if streamed else {}),
        **(result.detail or {}),
        **({"error": outcome.process_error} if outcome.process_error else {}),
    }
    return outcome, _traces(row, outcome, data, began)


def _traces(row: RawEvent, outcome: Outcome, data: dict, began: float) -> list[list]:
    """consume_event and the outcome trace. A trace that cannot be encoded is logged and left
    out, never allowed to fail the row."""
    common = {"request_id": row.request_id, "raw_event_id": row.pk, "user_id": row.user_id}
    step = {"type": row.event_type, "attempt": row.attempts}
    try:
        return [
            trace_row("consume_event", data=step, **common),
            trace_row(
                outcome.trace,
                level=outcome.level,
                duration_ms=round((time.perf_counter() - began) * 1000, 2),
                data={**step, **data},
                **common,
            ),
        ]
    except Exception:
        log.exception("could not encode the traces of raw event %s", row.pk)
        return []


def _write(written: list[tuple[RawEvent, datetime, Outcome, list]]) -> int:
    """The one outcome writer: how many rows were still ours."""
    outcomes = [
        [
            row.pk,
            outcome.state,
            outcome.processed_at,
            outcome.process_error,
            outcome.attempts,
            outcome.next_attempt_at,
            row.user_id,
            decisions.progress_kept(outcome.state, row.progress),
            outcome.traceback,
            lease_until,
        ]
        for row, lease_until, outcome, _ in written
    ]
    return store.outcomes_write(outcomes, [t for *_, traces in written for t in traces])


# -- which normalizer -----------------------------------------------------------------------------


def _of_wiped_user(raw_event: RawEvent) -> NormalizeResult:
    return NormalizeResult(ok=True, skipped=WIPED_USER)


def _unparseable(raw_event: RawEvent) -> NormalizeResult:
    try:
        payload_parse(raw_event.body)
    except Unparseable as exc:
        return NormalizeResult(ok=True, skipped=f"unparseable:{exc.reason}")
    return NormalizeResult(ok=False, error="unparseable_body_parsed_on_retry")


def _normalizer_for_row(row: RawEvent) -> Normalizer:
    # Stored, not stored from: its user was wiped (and is not coming back to claim it).
    if delivery_is_wiped(row):
        return _of_wiped_user
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
