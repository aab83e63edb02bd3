"""Step-boundary writes: one short guarded transaction per boundary.

Each commit first renews the lease with a compare-and-set on the fencing token (the lease must
still be ours and unexpired), then locks the instance row (task before instance, everywhere, so
services and runners never deadlock) and checks the run number and status. Only then does it
write the buffered steps, consumed events, logs and step-scoped mutations, and the outcome.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction

from workflows import runtime
from workflows.decisions import DISCARD, KEEP_AND_STOP, StepState, boundary_permission
from workflows.models import (
    TASK_PRIORITY,
    Status,
    StepStatus,
    TaskKind,
    WorkflowEvent,
    WorkflowInstance,
    WorkflowLog,
    WorkflowStep,
    WorkflowTask,
)
from workflows.runner.claim import Claim


@dataclass
class Pending:
    """Writes buffered since the last boundary."""

    steps: dict[str, StepState] = field(default_factory=dict)
    consumed: list[tuple[int, str]] = field(default_factory=list)  # (event pk, step name)
    logs: list[dict] = field(default_factory=list)
    mutations: list[Callable] = field(default_factory=list)

    def clear(self) -> None:
        self.steps.clear()
        self.consumed.clear()
        self.logs.clear()
        self.mutations.clear()


@dataclass(frozen=True)
class Continue:
    pass


@dataclass(frozen=True)
class SuspendTo:
    run_at: datetime
    kind: str
    wait_event_type: str = ""


@dataclass(frozen=True)
class Finish:
    output: object


@dataclass(frozen=True)
class Fail:
    error: dict


@dataclass(frozen=True)
class Requeue:
    """Give the task back, runnable at run_at (step budget used up, version missing)."""

    run_at: datetime
    kind: str = TaskKind.RESUME


def commit(claim: Claim, pending: Pending, outcome) -> str:
    """Apply `pending` and `outcome`; returns the boundary permission (see decisions)."""
    now = runtime.now()
    with transaction.atomic():
        permission = _guard(claim, now)
        if permission == DISCARD:
            return DISCARD
        keep_only = permission == KEEP_AND_STOP
        _write_steps(claim, pending.steps.values(), now, skip_starts=keep_only)
        _write_consumed(pending.consumed, now)
        if pending.logs:
            WorkflowLog.objects.bulk_create(_log_rows(claim, pending.logs))
        for fn in pending.mutations:
            fn()
        if keep_only:
            _task(claim).update(lock_owner="", locked_until=None)
        else:
            _apply_outcome(claim, outcome, now, pending)
    pending.clear()
    return permission


# The task row is the mutex: services lock it before touching the instance, pause clears its
# run_at, terminate deletes it, restart bumps the fencing token. So one guarded UPDATE both
# renews our lease and tells us whether we may go on.
_GUARD = """
UPDATE workflow_task SET locked_until = %s
WHERE id = %s AND fencing_token = %s AND locked_until > %s
RETURNING run_at
"""


def _guard(claim: Claim, now: datetime) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            _GUARD,
            [_dt(claim.lease_until(now)), claim.task_pk, claim.fencing_token, _dt(now)],
        )
        row = cursor.fetchone()
    if row is None:
        return DISCARD
    # Not `RETURNING run_at IS NULL`: SQLite 3.40 evaluates that wrongly with the partial index.
    return boundary_permission(Status.PAUSED if row[0] is None else Status.ACTIVE)


def _task(claim: Claim):
    return WorkflowTask.objects.filter(pk=claim.task_pk, fencing_token=claim.fencing_token)


_STEP_COLUMNS = (
    "instance_id",
    "run_number",
    "name",
    "type",
    "status",
    "attempts",
    "max_attempts",
    "timeout_ms",
    "next_retry_at",
    "wake_at",
    "wait_event_type",
    "result",
    "error",
    "fencing_token",
    "started_at",
    "completed_at",
)
_STEP_FIELDS = {
    column: WorkflowStep._meta.get_field(column.removesuffix("_id")) for column in _STEP_COLUMNS
}
_UPSERT_TAIL = (
    " ON CONFLICT (instance_id, run_number, name) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _STEP_COLUMNS[3:])
    + " RETURNING id, name"
)


def _write_steps(claim: Claim, states, now: datetime, *, skip_starts: bool) -> None:
    """All step rows of a boundary in one INSERT … ON CONFLICT DO UPDATE (PostgreSQL, SQLite)."""
    rows, by_name = [], {}
    for state in states:
        if skip_starts and state.status == StepStatus.RUNNING:
            continue  # paused: a step that has not begun must not begin
        values = {
            "instance_id": claim.instance_pk,
            "run_number": claim.run_number,
            "name": state.name,
            "type": state.type,
            "status": state.status,
            "attempts": state.attempts,
            "max_attempts": state.max_attempts,
            "timeout_ms": state.timeout_ms,
            "next_retry_at": state.next_retry_at,
            "wake_at": state.wake_at,
            "wait_event_type": state.wait_event_type,
            "result": state.result,
            "error": state.error,
            "fencing_token": claim.fencing_token,
            "started_at": state.started_at or now,
            "completed_at": state.completed_at,
        }
        rows.append(
            [_STEP_FIELDS[c].get_db_prep_save(values[c], connection) for c in _STEP_COLUMNS]
        )
        by_name[state.name] = state
    if not rows:
        return
    one = "(" + ", ".join(["%s"] * len(_STEP_COLUMNS)) + ")"
    sql = (
        f"INSERT INTO workflow_step ({', '.join(_STEP_COLUMNS)}) VALUES "
        + ", ".join([one] * len(rows))
        + _UPSERT_TAIL
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for row in rows for value in row])
        for pk, name in cursor.fetchall():
            by_name[name].pk = pk


def _dt(value: datetime):
    return connection.ops.adapt_datetimefield_value(value)


def _write_consumed(consumed: list[tuple[int, str]], now: datetime) -> None:
    for event_pk, step_name in consumed:
        WorkflowEvent.objects.filter(pk=event_pk).update(
            consumed_at=now, consumed_by_step=step_name
        )


def _log_rows(claim: Claim, logs: list[dict]) -> list[WorkflowLog]:
    return [
        WorkflowLog(instance_id=claim.instance_pk, run_number=claim.run_number, **entry)
        for entry in logs
    ]


def _apply_outcome(claim: Claim, outcome, now: datetime, pending: Pending) -> None:
    instance = WorkflowInstance.objects.filter(pk=claim.instance_pk)
    if isinstance(outcome, Continue):
        return
    if isinstance(outcome, SuspendTo):
        run_at, kind = outcome.run_at, outcome.kind
        if outcome.wait_event_type and _event_waiting(claim, outcome.wait_event_type, pending):
            # An event landed while we ran: its sender saw our lease, so wake ourselves.
            run_at, kind = now, TaskKind.EVENT
        _task(claim).update(
            run_at=run_at,
            kind=kind,
            priority=TASK_PRIORITY[kind],
            wait_event_type=outcome.wait_event_type,
            lock_owner="",
            locked_until=None,
        )
        instance.update(status=Status.WAITING, updated_at=now)
    elif isinstance(outcome, Finish):
        _task(claim).delete()
        instance.update(
            status=Status.COMPLETE, output=outcome.output, updated_at=now, completed_at=now
        )
    elif isinstance(outcome, Fail):
        _task(claim).delete()
        instance.update(
            status=Status.ERRORED, error=outcome.error, updated_at=now, completed_at=now
        )
    elif isinstance(outcome, Requeue):
        _task(claim).update(
            run_at=outcome.run_at,
            kind=outcome.kind,
            priority=TASK_PRIORITY[outcome.kind],
            lock_owner="",
            locked_until=None,
        )
    else:
        raise TypeError(f"unknown outcome {outcome!r}")


def _event_waiting(claim: Claim, event_type: str, pending: Pending) -> bool:
    taken = [pk for pk, _ in pending.consumed]
    return (
        WorkflowEvent.objects.filter(
            instance_id=claim.instance_pk,
            run_number=claim.run_number,
            type=event_type,
            consumed_at__isnull=True,
        )
        .exclude(pk__in=taken)
        .exists()
    )
