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
from workflows.decisions import (
    DISCARD,
    KEEP_AND_STOP,
    PROCEED,
    StepState,
    boundary_permission,
)
from workflows.models import (
    TASK_PRIORITY,
    Status,
    StepStatus,
    TaskKind,
    WorkflowEvent,
    WorkflowInstance,
    WorkflowLog,
    WorkflowStep,
)
from workflows.runner.claim import Claim
from workflows.runner.wake import NOTIFY_SQL


@dataclass
class Pending:
    """Writes buffered since the last boundary."""

    steps: dict[str, StepState] = field(default_factory=dict)
    consumed: list[tuple[int, str]] = field(default_factory=list)  # (event pk, step name)
    logs: list[dict] = field(default_factory=list)
    mutations: list[Callable] = field(default_factory=list)
    fingerprint: str | None = None  # code fingerprint to record for the run (code_changes.py)

    def clear(self) -> None:
        self.steps.clear()
        self.consumed.clear()
        self.logs.clear()
        self.mutations.clear()
        self.fingerprint = None


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
    """Apply `pending` and `outcome`; returns the boundary permission (see decisions).

    On PostgreSQL the guard and the writes travel in one pipeline (the guard first, so it takes
    the task lock before anything else) and are rolled back when the guard refuses; a paused
    instance is then written again in keep-only form. A wait-for-event suspension guards first
    and writes after, because it must look for events under the task lock.
    """
    now = runtime.now()
    optimistic = connection.vendor == "postgresql" and not (
        isinstance(outcome, SuspendTo) and outcome.wait_event_type
    )
    expected = PROCEED
    for _ in range(3):
        with transaction.atomic():
            if optimistic:
                keep_only = expected == KEEP_AND_STOP
                statements = _statements(claim, pending, outcome, now, keep_only=keep_only)
                permission = _guard_and_write(claim, now, statements)
                if permission != expected:
                    transaction.set_rollback(True)
                    if permission == DISCARD:
                        return DISCARD
                    expected = permission
                    continue
            else:
                permission = _guard(claim, now)
                if permission == DISCARD:
                    return DISCARD
                keep_only = permission == KEEP_AND_STOP
                _execute_all(_statements(claim, pending, outcome, now, keep_only=keep_only))
            for fn in pending.mutations:  # an IntegrityError here aborts the whole boundary
                fn()
        pending.clear()
        return permission
    return DISCARD


def _statements(claim: Claim, pending: Pending, outcome, now: datetime, *, keep_only: bool):
    statements = _step_statements(claim, pending.steps.values(), now, skip_starts=keep_only)
    statements += [
        (
            "UPDATE workflow_event SET consumed_at = %s, consumed_by_step = %s WHERE id = %s",
            [_dt(now), step_name, event_pk],
        )
        for event_pk, step_name in pending.consumed
    ]
    statements += _log_statements(claim, pending.logs)
    if pending.fingerprint is not None:
        statements.append(
            (
                "UPDATE workflow_instance SET code_fingerprint = %s WHERE id = %s",
                [pending.fingerprint, claim.instance_pk],
            )
        )
    if keep_only:
        return statements + [_release(claim)]
    return statements + _outcome_statements(claim, outcome, now, pending)


# The task row is the mutex: services lock it before touching the instance, pause clears its
# run_at, terminate deletes it, restart bumps the fencing token. So one guarded UPDATE both
# renews our lease and tells us whether we may go on.
_GUARD = """
UPDATE workflow_task SET locked_until = %s
WHERE id = %s AND fencing_token = %s AND locked_until > %s
RETURNING run_at
"""


def _guard_params(claim: Claim, now: datetime) -> list:
    return [_dt(claim.lease_until(now)), claim.task_pk, claim.fencing_token, _dt(now)]


def _guard(claim: Claim, now: datetime) -> str:
    with connection.cursor() as cursor:
        cursor.execute(_GUARD, _guard_params(claim, now))
        return _permission(cursor.fetchone())


def _guard_and_write(claim: Claim, now: datetime, statements: list) -> str:
    """PostgreSQL: guard and writes in one pipeline, one round trip."""
    with connection.cursor() as guard, connection.cursor() as cursor:
        with connection.connection.pipeline():
            guard.execute(_GUARD, _guard_params(claim, now))
            for sql, params in statements:
                cursor.execute(sql, params)
        return _permission(guard.fetchone())


def _permission(row) -> str:
    if row is None:
        return DISCARD
    # Not `RETURNING run_at IS NULL`: SQLite 3.40 evaluates that wrongly with the partial index.
    return boundary_permission(Status.PAUSED if row[0] is None else Status.ACTIVE)


def _execute_all(statements: list[tuple[str, list]]) -> None:
    """Run the boundary's writes; on PostgreSQL pipelined, so they cost one round trip."""
    if not statements:
        return
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql" and len(statements) > 1:
            with connection.connection.pipeline():
                for sql, params in statements:
                    cursor.execute(sql, params)
        else:
            for sql, params in statements:
                cursor.execute(sql, params)


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


def _fields(model, columns) -> dict:
    """Model fields by column name, to prepare raw-SQL values exactly as the ORM would."""
    by_column = {f.column: f for f in model._meta.concrete_fields}
    return {column: by_column[column] for column in columns}


_STEP_FIELDS = _fields(WorkflowStep, _STEP_COLUMNS)
_UPSERT_TAIL = " ON CONFLICT (instance_id, run_number, name) DO UPDATE SET " + ", ".join(
    f"{c} = excluded.{c}" for c in _STEP_COLUMNS[3:]
)


def _step_statements(claim: Claim, states, now: datetime, *, skip_starts: bool) -> list:
    """All step rows of a boundary in one INSERT … ON CONFLICT DO UPDATE (PostgreSQL, SQLite)."""
    rows = []
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
    if not rows:
        return []
    one = "(" + ", ".join(["%s"] * len(_STEP_COLUMNS)) + ")"
    sql = (
        f"INSERT INTO workflow_step ({', '.join(_STEP_COLUMNS)}) VALUES "
        + ", ".join([one] * len(rows))
        + _UPSERT_TAIL
    )
    return [(sql, [value for row in rows for value in row])]


_LOG_COLUMNS = (
    "instance_id",
    "run_number",
    "level",
    "category",
    "message",
    "data",
    "step_name",
    "attempt",
    "is_replay",
    "request_id",
    "created_at",
)
_LOG_FIELDS = _fields(WorkflowLog, _LOG_COLUMNS)


def _log_statements(claim: Claim, logs: list[dict]) -> list:
    if not logs:
        return []
    params = []
    for entry in logs:
        values = {"instance_id": claim.instance_pk, "run_number": claim.run_number, **entry}
        params += [_LOG_FIELDS[c].get_db_prep_save(values[c], connection) for c in _LOG_COLUMNS]
    one = "(" + ", ".join(["%s"] * len(_LOG_COLUMNS)) + ")"
    sql = f"INSERT INTO workflow_log ({', '.join(_LOG_COLUMNS)}) VALUES " + ", ".join(
        [one] * len(logs)
    )
    return [(sql, params)]


def _release(claim: Claim, **changes) -> tuple[str, list]:
    """Give up the lease (optionally setting run_at, kind, priority, wait_event_type)."""
    sets = ["lock_owner = ''", "locked_until = NULL"]
    params = []
    for column, value in changes.items():
        sets.append(f"{column} = %s")
        params.append(_dt(value) if isinstance(value, datetime) else value)
    sql = f"UPDATE workflow_task SET {', '.join(sets)} WHERE id = %s AND fencing_token = %s"
    return sql, params + [claim.task_pk, claim.fencing_token]


_INSTANCE_FIELDS = _fields(WorkflowInstance, ("output", "error"))


def _instance_update(claim: Claim, now: datetime, status: str, **json_fields) -> tuple:
    sets, params = ["status = %s", "updated_at = %s"], [status, _dt(now)]
    if status in (Status.COMPLETE, Status.ERRORED):
        sets.append("completed_at = %s")
        params.append(_dt(now))
    for column, value in json_fields.items():
        sets.append(f"{column} = %s")
        params.append(_INSTANCE_FIELDS[column].get_db_prep_save(value, connection))
    sql = f"UPDATE workflow_instance SET {', '.join(sets)} WHERE id = %s"
    return sql, params + [claim.instance_pk]


def _outcome_statements(claim: Claim, outcome, now: datetime, pending: Pending) -> list:
    delete_task = (
        "DELETE FROM workflow_task WHERE id = %s AND fencing_token = %s",
        [claim.task_pk, claim.fencing_token],
    )
    if isinstance(outcome, Continue):
        return []
    if isinstance(outcome, SuspendTo):
        run_at, kind = outcome.run_at, outcome.kind
        if outcome.wait_event_type and _event_waiting(claim, outcome.wait_event_type, pending):
            # An event landed while we ran: its sender saw our lease, so wake ourselves.
            run_at, kind = now, TaskKind.EVENT
        release = _release(
            claim,
            run_at=run_at,
            kind=kind,
            priority=TASK_PRIORITY[kind],
            wait_event_type=outcome.wait_event_type,
        )
        return [release, _instance_update(claim, now, Status.WAITING), *_wake_runners()]
    if isinstance(outcome, Finish):
        return [delete_task, _instance_update(claim, now, Status.COMPLETE, output=outcome.output)]
    if isinstance(outcome, Fail):
        return [delete_task, _instance_update(claim, now, Status.ERRORED, error=outcome.error)]
    if isinstance(outcome, Requeue):
        kind = outcome.kind
        release = _release(claim, run_at=outcome.run_at, kind=kind, priority=TASK_PRIORITY[kind])
        return [release, *_wake_runners()]
    raise TypeError(f"unknown outcome {outcome!r}")


def _wake_runners() -> list:
    """A task now due at a new time: idle runners elsewhere (a runworkflows beside the cluster
    that ran this) sleep until the due time they last read, so tell them (runner/wake.py)."""
    return [(NOTIFY_SQL, None)] if connection.vendor == "postgresql" else []


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


def _dt(value: datetime):
    return connection.ops.adapt_datetimefield_value(value)
