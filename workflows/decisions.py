"""Pure decisions: given stored state and the time, what happens next. No database, no clock.

The runner and the services load rows, ask these functions, and apply the answer.
"""

import math
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psycopg
from django.db import DataError

from workflows import limits
from workflows.errors import InstanceTerminal, InvalidStep
from workflows.models import TERMINAL_STATUSES, Status, StepStatus, StepType

DEFAULT_RETRY_LIMIT = 5
DEFAULT_RETRY_DELAY_MS = 10_000
DEFAULT_TIMEOUT_MS = 10 * 60 * 1000
BACKOFFS = ("constant", "linear", "exponential")
# Unbounded exponential backoff with an infinite limit would overflow dates; a year is plenty
# (the default of WORKFLOWS_RETRY_DELAY_MAX, which retry_policy reads into RetryPolicy.cap_ms).
RETRY_DELAY_CAP_MS = limits.RETRY_DELAY_MAX_MS


@dataclass(frozen=True)
class RetryPolicy:
    limit: float = DEFAULT_RETRY_LIMIT  # retries after the first attempt; may be math.inf
    delay_ms: int = DEFAULT_RETRY_DELAY_MS
    backoff: str = "exponential"
    max_delay_ms: int | None = None
    cap_ms: int = RETRY_DELAY_CAP_MS

    @property
    def max_attempts(self) -> float:
        return self.limit + 1


def retry_policy(raw: dict | None) -> RetryPolicy:
    """Validate the `retries=` option of step.do; unknown keys are mistakes, not ignored."""
    if raw is None:
        return RetryPolicy(cap_ms=limits.retry_delay_cap_ms())
    if not isinstance(raw, dict):
        raise InvalidStep(f"retries must be a dict, got {type(raw).__name__}")
    unknown = set(raw) - {"limit", "delay", "backoff", "max_delay"}
    if unknown:
        raise InvalidStep(f"unknown retries option(s): {sorted(unknown)}")
    limit = raw.get("limit", DEFAULT_RETRY_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int | float) or limit < 0:
        raise InvalidStep(f"retries.limit must be a number ≥ 0 or math.inf, got {limit!r}")
    if isinstance(limit, float) and not math.isinf(limit):
        limit = int(limit)
    backoff = raw.get("backoff", "exponential")
    if backoff not in BACKOFFS:
        raise InvalidStep(f"retries.backoff must be one of {BACKOFFS}, got {backoff!r}")
    max_delay = raw.get("max_delay")
    return RetryPolicy(
        limit=limit,
        delay_ms=limits.retry_delay_ms(raw.get("delay", DEFAULT_RETRY_DELAY_MS), option="delay"),
        backoff=backoff,
        max_delay_ms=None
        if max_delay is None
        else limits.retry_delay_ms(max_delay, option="max_delay"),
        cap_ms=limits.retry_delay_cap_ms(),
    )


def retry_delay_ms(policy: RetryPolicy, attempt: int) -> int:
    """Delay after failed attempt number `attempt` (1-based): delay · {1, n, 2^(n−1)}."""
    if policy.backoff == "constant":
        delay = policy.delay_ms
    elif policy.backoff == "linear":
        delay = policy.delay_ms * attempt
    else:
        delay = policy.delay_ms * 2 ** min(attempt - 1, 60)
    if policy.max_delay_ms is not None:
        delay = min(delay, policy.max_delay_ms)
    return min(delay, policy.cap_ms)


@dataclass(frozen=True)
class RetryAt:
    at: datetime


@dataclass(frozen=True)
class GiveUp:
    pass


def after_failure(
    policy: RetryPolicy, *, attempt: int, now: datetime, non_retryable: bool
) -> RetryAt | GiveUp:
    if non_retryable or attempt >= policy.max_attempts:
        return GiveUp()
    return RetryAt(now + timedelta(milliseconds=retry_delay_ms(policy, attempt)))


@dataclass
class StepState:
    """The stored state of one step, as the runner keeps it in memory during an execution."""

    name: str
    type: str
    status: str
    attempts: int = 0
    max_attempts: float | None = None
    timeout_ms: int | None = None
    next_retry_at: datetime | None = None
    wake_at: datetime | None = None
    wait_event_type: str = ""
    result: object = None
    error: dict | None = None
    pk: int | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    dirty: set = field(default_factory=set)


# What step.do should do with a step, given its stored state.
@dataclass(frozen=True)
class ReturnCached:
    result: object


@dataclass(frozen=True)
class RaiseCached:
    error: dict


@dataclass(frozen=True)
class SuspendUntil:
    at: datetime


@dataclass(frozen=True)
class StartAttempt:
    attempt: int


def do_action(state: StepState | None, now: datetime):
    if state is None:
        return StartAttempt(1)
    if state.status == StepStatus.COMPLETE:
        return ReturnCached(state.result)
    if state.status == StepStatus.ERRORED:
        return RaiseCached(state.error or {"name": "Error", "message": ""})
    if state.status == StepStatus.RETRYING and state.next_retry_at and state.next_retry_at > now:
        return SuspendUntil(state.next_retry_at)
    if state.status == StepStatus.RUNNING and state.attempts >= (state.max_attempts or 1):
        # The runner died during the last allowed attempt: that attempt counts as failed.
        return RaiseCached(
            {"name": "StepInterrupted", "message": f"runner lost during attempt {state.attempts}"}
        )
    # RETRYING and due, or RUNNING: the previous attempt failed or its runner died mid-attempt.
    return StartAttempt(state.attempts + 1)


def sleep_due(wake_at: datetime, now: datetime) -> bool:
    return wake_at <= now


WAIT_TIMEOUT_MIN_MS = limits.WAIT_TIMEOUT_MIN_MS
WAIT_TIMEOUT_MAX_MS = limits.WAIT_TIMEOUT_MAX_MS


def wait_timeout_ms(raw) -> int:
    """1 second … 365 days by default (WORKFLOWS_WAIT_TIMEOUT_MIN / _MAX)."""
    return limits.wait_timeout_ms(raw)


# What a runner may write at a step boundary, given the instance's status when it checks.
PROCEED = "proceed"  # write everything and go on
KEEP_AND_STOP = "keep_and_stop"  # paused: keep finished results, start nothing new
DISCARD = "discard"  # terminated, completed elsewhere, restarted: write nothing


def boundary_permission(status: str) -> str:
    if status == Status.ACTIVE:
        return PROCEED
    if status == Status.PAUSED:
        return KEEP_AND_STOP
    return DISCARD


def is_terminal(status: str) -> bool:
    return status in TERMINAL_STATUSES


def check_pausable(status: str) -> bool:
    """True when pause changes something; raises on terminal instances."""
    if is_terminal(status):
        raise InstanceTerminal(f"cannot pause an instance that is {status}")
    return status != Status.PAUSED


def check_terminable(status: str) -> None:
    if is_terminal(status):
        raise InstanceTerminal(f"cannot terminate an instance that is {status}")


def check_event_accepted(status: str) -> None:
    if is_terminal(status):
        raise InstanceTerminal(f"cannot send an event to an instance that is {status}")


def resume_applies(status: str) -> bool:
    """Resume only changes a paused instance; on anything else it does nothing."""
    return status == Status.PAUSED


# After a storage fault (runner.storage_faults) a runner waits before it claims again: growing,
# capped, and jittered so the runners a database restart disconnected do not come back in step.
STORAGE_BACKOFF_BASE_S = 0.1
STORAGE_BACKOFF_CAP_S = 5.0


def storage_backoff_seconds(failures: int, jitter: float) -> float:
    """ "Equal jitter" after `failures` faults in a row (1-based), `jitter` uniform in [0, 1):
    half the ceiling for sure, so a dead database is not polled hot, plus a random half."""
    ceiling = min(
        STORAGE_BACKOFF_CAP_S, STORAGE_BACKOFF_BASE_S * 2 ** min(max(failures, 1) - 1, 16)
    )
    return ceiling / 2 + jitter * ceiling / 2


# Crash loops (runner.execute): a run whose claims keep ending without progress — its runner
# killed mid-step by an OOM kill, a segfault, os._exit — is stopped instead of reclaimed for
# ever (DBOS's MAX_RECOVERY_ATTEMPTS_EXCEEDED). The count lives on workflow_task.


def boundary_progress(step_statuses, *, continues: bool) -> bool:
    """Whether a boundary resets the recovery count: a step reached an outcome (anything but
    an attempt merely starting), or the run suspends, ends or gives its task back."""
    return not continues or any(status != StepStatus.RUNNING for status in step_statuses)


def recovery_exhausted(claims_without_progress: int, limit: int) -> bool:
    """`claims_without_progress` includes the claim being made: after `limit` claims that all
    ended without progress, the next one does not run the workflow."""
    return claims_without_progress > limit


def crash_loop_error(steps, *, run_number: int, limit: int) -> dict:
    """The instance error for a run stopped as a crash loop, naming the step it was in."""
    steps = list(steps)
    running = [s for s in steps if s.status == StepStatus.RUNNING]
    if running:
        where = f"in step {running[-1].name!r} (attempt {running[-1].attempts})"
    elif steps:
        where = f"after step {steps[-1].name!r}"
    else:
        where = "before its first step"
    message = (
        f"run {run_number} was claimed {limit} times in a row without making progress (its "
        f"runner died each time); it was {where}"
    )
    return {"name": "MaxRecoveryAttemptsExceeded", "message": message}


# -- replay divergence (code changed under a running instance) ----------------------------------

# Steps whose outcome is stored for good: replay returns or re-raises it without running code.
FINISHED_STEP_STATUSES = (StepStatus.COMPLETE, StepStatus.ERRORED, StepStatus.TIMED_OUT)


def location_scope(location: str) -> str:
    """The scope a step location is checked in: everything before its last "/" ("" at the
    top level). Branch and iteration steps (`fetch/left/call`, `poll/~3/call`) are compared
    only with their own branch or iteration, which may legitimately stop being replayed (a
    decided race, a loop resumed from stored state). A "/" inside a user's own step name only
    narrows the comparison, never widens it."""
    return location.rpartition("/")[0]


def replay_divergence(recorded: Sequence[str], asked: Container[str], requested: str) -> str | None:
    """The step a replay should have asked for instead of `requested`, or None when asking for
    `requested` is fine.

    `recorded`: the run's finished steps in the order they were first stored; `asked`: the
    names this replay has asked for so far. Asking for a name that is not recorded is new
    work, which is only fine once every recorded step of the same scope has been asked for;
    before that, the code no longer takes the path the history took (a step renamed, removed
    or inserted before recorded ones) and running anything new would mix two histories."""
    if requested in recorded:
        return None
    scope = location_scope(requested)
    for name in recorded:
        if name not in asked and location_scope(name) == scope:
            return name
    return None


# -- values the database refuses -----------------------------------------------------------------

# SQLSTATE class 22, "data exception": a value too long for its column (22001), out of range
# (22003), a NUL in JSON text (22P05)... The statement is at fault, not the connection: it would be
# refused again on every claim, so it is no crash to retry (docs/workflows/faults.md).
DATA_EXCEPTION_CLASS = "22"


def refused_value(exc: BaseException) -> dict | None:
    """The instance error for a step-boundary write the database refused for its values, or None
    when `exc` is anything else (a lost connection is a storage fault, an IntegrityError from a
    step's own write a step error). Looks through the causes: Django wraps the driver's error.
    psycopg refuses a NUL in text itself, as a DataError with no SQLSTATE."""
    seen, error = exc, None
    while seen is not None:
        sqlstate = getattr(seen, "sqlstate", None)
        if isinstance(seen, DataError | psycopg.DataError) or (
            isinstance(sqlstate, str) and sqlstate.startswith(DATA_EXCEPTION_CLASS)
        ):
            error = seen  # keep going: the innermost says most (StringDataRightTruncation)
        seen = seen.__cause__
    if error is None:
        return None
    # The first line only: PostgreSQL's CONTEXT lines may quote the refused value.
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return {
        "name": type(error).__name__,
        "message": (
            f"the database refused a value this run wrote at a step boundary: {reason}; it "
            "would be refused on every retry, so the instance failed at once"
        )[:2048],
    }


def refused_boundary_steps(staged, error: dict, now: datetime, *, strict: bool, mutated: bool):
    """The steps of a refused boundary as the instance's failure stores them. A step.do step
    that was starting or retrying is errored with the refusal, and so is a completed one whose
    own database writes (step.tx.mutate, `mutated`) were in the refused boundary; finished ones
    keep their outcome. `strict` (that was refused too): every step.do step is errored, since
    its result or error may be the refused value."""
    steps = []
    for state in staged:
        finished = state.status in (StepStatus.COMPLETE, StepStatus.ERRORED)
        keeps = finished and not strict and not (mutated and state.status == StepStatus.COMPLETE)
        if state.type == StepType.DO and not keeps:
            state.status, state.result, state.error = StepStatus.ERRORED, None, error
            state.completed_at = state.completed_at or now
        steps.append(state)
    return steps


# -- operator actions: which instances an action may touch ---------------------------------------
# The console offers an action (and a bulk job selects rows) only where these say it applies;
# the services apply the same rules under their row locks, so a stale page is refused there.

OPERATOR_ACTIONS = ("pause", "resume", "terminate", "restart")


def action_applies(action: str, status: str) -> bool:
    """Whether `action` changes an instance that is `status` (pause on a paused one, resume on
    a running one, terminate on a finished one change nothing or are refused)."""
    if action == "pause":
        return status in (Status.ACTIVE, Status.WAITING)
    if action == "resume":
        return resume_applies(status)
    if action == "terminate":
        return not is_terminal(status)
    return action == "restart"  # any status: a new run starts


def eligible_actions(status: str) -> list[str]:
    return [action for action in OPERATOR_ACTIONS if action_applies(action, status)]


def eligible_statuses(action: str) -> list[str]:
    """The statuses `action` applies to, for a list filter (`status__in`)."""
    return [status for status in Status.values if action_applies(action, status)]


def backoff_step(steps: Sequence[StepState]) -> StepState | None:
    """The step of a run waiting out a retry delay (retry now wakes it), if any."""
    return next((s for s in steps if s.status == StepStatus.RETRYING), None)


def sleeping_step(steps: Sequence[StepState]) -> StepState | None:
    """The step of a run that is sleeping (skip wait completes it now), if any."""
    return next((s for s in steps if s.status == StepStatus.SLEEPING), None)


def retry_now_applies(status: str, steps: Sequence[StepState]) -> bool:
    """Retry now: a live, unpaused instance with a step in backoff. A paused one keeps its
    backoff until resumed (resume runs it when due)."""
    return status in (Status.ACTIVE, Status.WAITING) and backoff_step(steps) is not None


def skip_wait_applies(status: str, steps: Sequence[StepState]) -> bool:
    return status in (Status.ACTIVE, Status.WAITING) and sleeping_step(steps) is not None


def steps_run_again(steps: Sequence[tuple[str, str]], from_step: str) -> list[str] | None:
    """What a restart from `from_step` runs again, given the current run's (name, status) in
    the order the run reached them: that step and every one after it, and any step before it
    that had not completed (only completed results are kept). None: the run has no such step."""
    names = [name for name, _ in steps]
    if from_step not in names:
        return None
    cut = names.index(from_step)
    return [name for i, (name, status) in enumerate(steps) if i >= cut or status != "complete"]
