"""The consumer's rules as pure decisions: what a claimed row's outcome is, when it runs again and
when it is dead. No database, no clock: callers pass what they know (`now` included)."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from ingest.models import RawEventState, TraceLevel

MAX_ATTEMPTS = 5  # claims without success before a row is dead (the DLQ)
BACKOFF_BASE = timedelta(seconds=30)
# Parked rows (the normalizer said not ok) are tried again on a backoff that grows with their
# age (half of it, from 30 s to 1 h) while they are younger than PARK_WINDOW; after that they
# wait for an operator.
PARK_BACKOFF_MIN = timedelta(seconds=30)
PARK_BACKOFF_MAX = timedelta(hours=1)
PARK_WINDOW = timedelta(hours=24)
NO_CONNECTION = "no_connection_for_terra_user"  # released by the auth event, not by time
CLAIMABLE = (RawEventState.PENDING, RawEventState.PARKED, RawEventState.RETRYING)
NOT_CLAIMED = "not_claimed"
ERROR_MAX_CHARS = 2000
DEFER_WAIT = timedelta(seconds=5)  # a row whose normalizer could not run now goes again after


@dataclass(frozen=True)
class Outcome:
    """The columns a row's outcome writes, and the trace that says so."""

    state: str
    process_error: str | None
    processed_at: datetime | None
    attempts: int
    next_attempt_at: datetime | None
    trace: str  # the outcome trace's event
    level: str  # and its level
    traceback: str | None = None  # process_traceback: kept only while the error is the row's


def backoff(attempts: int) -> timedelta:
    """Delay before the next try after `attempts` failed ones: 30 s, 1 min, 2 min, 4 min."""
    return BACKOFF_BASE * (2 ** max(attempts - 1, 0))


def park_backoff(age: timedelta) -> timedelta:
    """Delay before a parked row is tried again: half its age, within 30 s … 1 h."""
    return min(max(age / 2, PARK_BACKOFF_MIN), PARK_BACKOFF_MAX)


def parked_until(error: str, *, received_at: datetime, now: datetime) -> datetime | None:
    """When a parked row is tried again: on its own backoff while it is younger than a day;
    never by time when it waits for a connection (the auth event releases it) or is older."""
    age = now - received_at
    if error == NO_CONNECTION or age >= PARK_WINDOW:
        return None
    return now + park_backoff(age)


def outcome_of_result(
    *,
    ok: bool,
    skipped: str | None,
    error: str | None,
    attempts: int,
    received_at: datetime,
    now: datetime,
) -> Outcome:
    """A normalizer answered: processed, skipped on purpose, or parked (not ok)."""
    if skipped:
        reason = f"skipped:{skipped}"[:ERROR_MAX_CHARS]
        return Outcome(
            RawEventState.SKIPPED, reason, now, attempts, None, "skipped", TraceLevel.INFO
        )
    if ok:
        return Outcome(
            RawEventState.PROCESSED, None, now, attempts, None, "normalized", TraceLevel.INFO
        )
    error = (error or "not_ok")[:ERROR_MAX_CHARS]
    # An outcome, not a failure: the next claims start a fresh count towards dead.
    again = parked_until(error, received_at=received_at, now=now)
    return Outcome(RawEventState.PARKED, error, None, 0, again, "parked", TraceLevel.WARNING)


def outcome_of_failure(
    *,
    error: str,
    deterministic: bool,
    attempts: int,
    received_at: datetime,
    now: datetime,
    traceback: str | None = None,
) -> Outcome:
    """A normalizer raised. A deterministic error (a value its column can never hold) parks the
    row at once, like a normalizer's "not ok": an outcome (no step towards dead), tried again on
    the parked rows' backoff for a day, in case a deploy fixed it. Anything else is retried with
    backoff until MAX_ATTEMPTS, then dead."""
    if deterministic:
        error = f"value_out_of_range: {error}"[:ERROR_MAX_CHARS]
        again = parked_until(error, received_at=received_at, now=now)
        return Outcome(
            RawEventState.PARKED, error, None, 0, again, "parked", TraceLevel.ERROR, traceback
        )
    error = error[:ERROR_MAX_CHARS]
    if attempts >= MAX_ATTEMPTS:
        return Outcome(
            RawEventState.DEAD, error, None, attempts, None, "dead", TraceLevel.ERROR, traceback
        )
    again = now + backoff(attempts)
    return Outcome(
        RawEventState.RETRYING,
        error,
        None,
        attempts,
        again,
        "retry_scheduled",
        TraceLevel.WARNING,
        traceback,
    )


ABANDONED = (
    f"claimed {MAX_ATTEMPTS} times without an outcome: its worker died or lost its lease each "
    "time (out of memory, crash, timeout, or work longer than INGEST_LEASE_SECONDS)"
)


def outcome_of_abandoned(
    *, attempts: int, last_error: str | None, last_traceback: str | None = None
) -> Outcome:
    """A claim past MAX_ATTEMPTS: the claims since the last outcome ended with their worker dead.
    Running it again would kill another worker: dead. The last real error, when an attempt
    recorded one, stays the row's error; "its worker died" is said only when none did."""
    if last_error:
        error = f"{last_error[:1800]} (then its worker died or lost its lease before writing an outcome)"
    else:
        error, last_traceback = ABANDONED, None
    return Outcome(
        RawEventState.DEAD, error, None, attempts, None, "dead", TraceLevel.ERROR, last_traceback
    )


def outcome_of_deferral(*, error: str, attempts: int, now: datetime) -> Outcome:
    """The normalizer did not run (what it needs is busy elsewhere): the row goes again in a few
    seconds and the claim does not count as an attempt."""
    error = error[:ERROR_MAX_CHARS]
    return Outcome(
        RawEventState.RETRYING,
        error,
        None,
        max(attempts - 1, 0),
        now + DEFER_WAIT,
        "deferred",
        TraceLevel.INFO,
    )


def progress_kept(state: str, progress: int) -> int:
    """Items a row's earlier pieces committed are skipped by its next attempt only after a
    failure; any other outcome (or a replay) starts the next run from the first item."""
    return progress if state == RawEventState.RETRYING else 0


def is_abandoned(attempts: int) -> bool:
    """A claim past MAX_ATTEMPTS: the row is not run again (outcome_of_abandoned)."""
    return attempts > MAX_ATTEMPTS


def was_recovered(state: str, attempts: int) -> bool:
    """A claimed row that was claimed before without an outcome being written (a pending row
    never leaves pending but through an outcome; its attempts count claims): it runs alone."""
    return state == RawEventState.PENDING and attempts > 1
