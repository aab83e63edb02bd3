"""What a step boundary writes: the writes buffered since the last boundary (Pending), the
run's outcome (Continue, SuspendTo, Finish, Fail, Requeue), and both as (sql, params) pairs built
from store.py's statements, with values prepared as the ORM would prepare them."""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.models import JSONField

from workflows.decisions import StepState
from workflows.engine import store
from workflows.engine.claim import Claim
from workflows.models import (
    TASK_PRIORITY,
    TERMINAL_STATUSES,
    Status,
    StepStatus,
    TaskKind,
    WorkflowEvent,
    WorkflowInstance,
    WorkflowLog,
    WorkflowStep,
    WorkflowTask,
)


@dataclass
class Pending:
    """Writes buffered since the last boundary."""

    steps: dict[str, StepState] = field(default_factory=dict)
    consumed: list[tuple[int, str]] = field(default_factory=list)  # (event pk, step name)
    logs: list[dict] = field(default_factory=list)
    mutations: list[Callable] = field(default_factory=list)
    # Composition: child instances to create with this boundary (only if it may proceed), step
    # rows of trimmed loop iterations to delete, what to do once it committed (terminate the
    # children of race losers).
    spawns: list[Callable] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    after_commit: list[Callable] = field(default_factory=list)
    fingerprint: str | None = None  # code fingerprint to record for the run (code_changes.py)

    def clear(self) -> None:
        self.steps.clear()
        self.consumed.clear()
        self.logs.clear()
        self.mutations.clear()
        self.spawns.clear()
        self.deleted.clear()
        self.after_commit.clear()
        self.fingerprint = None


@dataclass(frozen=True)
class Continue:
    pass


@dataclass(frozen=True)
class SuspendTo:
    run_at: datetime
    kind: str
    wait_event_type: str = ""  # one type, or several joined by "|" (parallel branches)
    children: tuple[int, ...] = ()  # pks of running children the run waits for

    @property
    def rechecks(self) -> bool:
        """Must look under the task lock for what may have landed while we ran."""
        return bool(self.wait_event_type or self.children)


@dataclass(frozen=True)
class Finish:
    output: object
    wakes_parent: bool = True  # False: the instance has no parent (Loaded.has_parent)


@dataclass(frozen=True)
class Fail:
    error: dict
    wakes_parent: bool = True


@dataclass(frozen=True)
class Requeue:
    """Give the task back, runnable at run_at (step budget used up, version missing)."""

    run_at: datetime
    kind: str = TaskKind.RESUME


def statements(
    claim: Claim,
    pending: Pending,
    outcome,
    now: datetime,
    db,
    *,
    keep_only: bool,
    new: bool = False,
):
    """The boundary's writes for `db`, the thread's connection wrapper. `new`: the instance is
    inserted by the same statement (store.NEW_INSTANCE, first boundary)."""
    statements = _step_statements(
        claim, pending.steps.values(), now, db, skip_starts=keep_only, new=new
    )
    statements += [
        (
            store.CONSUME_EVENT,
            [dt(now, db), step_name, event_pk],
        )
        for event_pk, step_name in pending.consumed
    ]
    statements += _log_statements(claim, pending.logs, db, new=new)
    # An outcome that updates the instance row records the fingerprint in that same UPDATE.
    folded = not keep_only and isinstance(outcome, SuspendTo | Finish | Fail)
    if pending.fingerprint is not None and not folded:
        statements.append(
            (
                store.SET_FINGERPRINT,
                [pending.fingerprint, claim.instance_pk],
            )
        )
    if keep_only:
        return statements + [_release(claim, db)]
    if pending.deleted:
        names = sorted(pending.deleted)
        statements.append(
            (
                store.delete_steps(len(names)),
                [claim.instance_pk, claim.run_number, *names],
            )
        )
    return statements + _outcome_statements(claim, outcome, now, pending, db)


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


class _Columns:
    """A model's columns in raw-SQL order, and rows of values for them as the ORM would save
    them. On PostgreSQL psycopg sends strings, numbers, booleans and aware datetimes as they
    are and only JSON needs adapting, so a row there is its values plus the JSON columns'
    adaptation, not one field method call per column (the boundary path builds several rows)."""

    def __init__(self, model, columns: tuple[str, ...]):
        self.names = columns
        self.fields = _fields(model, columns)
        self.json = [
            (at, field.encoder)
            for at, field in enumerate(self.fields.values())
            if isinstance(field, JSONField)
        ]

    def row(self, values: dict, db) -> list:
        """`values` (by column name) for `db`, the thread's connection wrapper."""
        if db.vendor != "postgresql":
            return [f.get_db_prep_save(values[column], db) for column, f in self.fields.items()]
        row = [values[column] for column in self.names]
        for at, encoder in self.json:
            if row[at] is not None:
                row[at] = db.ops.adapt_json_value(row[at], encoder)
        return row


_STEP = _Columns(WorkflowStep, _STEP_COLUMNS)
_STEP_INSERT = store.step_upsert(_STEP_COLUMNS)


def _step_statements(
    claim: Claim, states, now: datetime, db, *, skip_starts: bool, new: bool = False
) -> list:
    """All step rows of a boundary in one upsert statement (PostgreSQL, SQLite; engine/store.py)."""
    rows = []
    for state in states:
        if skip_starts and state.status in (StepStatus.RUNNING, StepStatus.LOOPING):
            # paused: a step that has not begun must not begin; a loop's state must not move
            # past iterations whose trim is not written either
            continue
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
        rows.append(_STEP.row(values, db))
    if not rows:
        return []
    return [
        (store.insert_rows(_STEP_INSERT, len(_STEP_COLUMNS), len(rows), new), _values(rows, new))
    ]


def _values(rows: list[list], new: bool) -> list:
    """All rows' values, in order; without the instance when `new` (store.NEW_INSTANCE)."""
    if new:
        return [value for row in rows for value in row[1:]]
    return [value for row in rows for value in row]


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
_LOG = _Columns(WorkflowLog, _LOG_COLUMNS)
_LOG_INSERT = store.insert_template("workflow_log", _LOG_COLUMNS)


def _log_statements(claim: Claim, logs: list[dict], db, *, new: bool = False) -> list:
    if not logs:
        return []
    rows = []
    for entry in logs:
        values = {"instance_id": claim.instance_pk, "run_number": claim.run_number, **entry}
        rows.append(_LOG.row(values, db))
    return [(store.insert_rows(_LOG_INSERT, len(_LOG_COLUMNS), len(rows), new), _values(rows, new))]


def _release(claim: Claim, db, **changes) -> tuple[str, list]:
    """Give up the lease (optionally setting run_at, kind, priority, wait_event_type). Every
    release ends a boundary that is progress (a suspension, a requeue, a paused stop), so it
    resets the recovery count itself: the one-statement boundary does not renew the row too."""
    sets, params = [], []
    for column, value in changes.items():
        sets.append(column)
        params.append(dt(value, db) if isinstance(value, datetime) else value)
    sql = store.release_task(tuple(sets))
    return sql, params + [claim.task_pk, claim.fencing_token]


_INSTANCE_FIELDS = _fields(WorkflowInstance, ("output", "error"))


def _instance_update(
    claim: Claim, now: datetime, status: str, db, *, fingerprint: str | None = None, **json_fields
) -> tuple:
    sets, params = ["status", "updated_at"], [status, dt(now, db)]
    if fingerprint is not None:
        sets.append("code_fingerprint")
        params.append(fingerprint)
    if status in (Status.COMPLETE, Status.ERRORED):
        sets.append("completed_at")
        params.append(dt(now, db))
    for column, value in json_fields.items():
        sets.append(column)
        params.append(_INSTANCE_FIELDS[column].get_db_prep_save(value, db))
    sql = store.update_instance(tuple(sets))
    return sql, params + [claim.instance_pk]


def _outcome_statements(claim: Claim, outcome, now: datetime, pending: Pending, db) -> list:
    delete_task = (
        store.DELETE_TASK,
        [claim.task_pk, claim.fencing_token],
    )
    if isinstance(outcome, Continue):
        return []
    if isinstance(outcome, SuspendTo):
        run_at, kind = outcome.run_at, outcome.kind
        if _event_waiting(claim, outcome.wait_event_type, pending) or _child_done(outcome):
            # An event landed or a child finished while we ran: its sender saw our lease (or
            # the wake it wrote is about to be overwritten), so wake ourselves.
            run_at, kind = now, TaskKind.EVENT
        release = _release(
            claim,
            db,
            run_at=run_at,
            kind=kind,
            priority=TASK_PRIORITY[kind],
            wait_event_type=task_wait_types(outcome.wait_event_type),
        )
        waiting = _instance_update(claim, now, Status.WAITING, db, fingerprint=pending.fingerprint)
        return [release, waiting, *_wake_runners(db)]
    if isinstance(outcome, Finish | Fail):
        if isinstance(outcome, Finish):
            status, ending = Status.COMPLETE, {"output": outcome.output}
        else:
            status, ending = Status.ERRORED, {"error": outcome.error}
        ended = _instance_update(claim, now, status, db, fingerprint=pending.fingerprint, **ending)
        parent = [wake_parent(claim.instance_pk, now, db)] if outcome.wakes_parent else []
        return [delete_task, ended, *parent]
    if isinstance(outcome, Requeue):
        kind = outcome.kind
        release = _release(
            claim, db, run_at=outcome.run_at, kind=kind, priority=TASK_PRIORITY[kind]
        )
        return [release, *_wake_runners(db)]
    raise TypeError(f"unknown outcome {outcome!r}")


def _wake_runners(db) -> list:
    """A task now due at a new time: idle runners elsewhere (a runworkflows beside the cluster
    that ran this) sleep until the due time they last read, so tell them (engine/wake.py)."""
    return [(store.NOTIFY, None)] if db.vendor == "postgresql" else []


WAIT_ANY = "*"  # the task waits for more types than its column holds: any event wakes it


def task_wait_types(types: str) -> str:
    """What the task row stores: the "|"-joined types, or "*" when they do not fit."""
    max_length = WorkflowTask._meta.get_field("wait_event_type").max_length
    return types if len(types) <= max_length else WAIT_ANY


def event_wakes(task_wait: str, event_type: str) -> bool:
    """Does an event of `event_type` wake a task waiting for `task_wait` (see task_wait_types)?"""
    return task_wait == WAIT_ANY or event_type in task_wait.split("|")


def _event_waiting(claim: Claim, event_types: str, pending: Pending) -> bool:
    if not event_types:
        return False
    taken = [pk for pk, _ in pending.consumed]
    return (
        WorkflowEvent.objects.filter(
            instance_id=claim.instance_pk,
            run_number=claim.run_number,
            type__in=event_types.split("|"),
            consumed_at__isnull=True,
        )
        .exclude(pk__in=taken)
        .exists()
    )


def _child_done(outcome: SuspendTo) -> bool:
    return bool(outcome.children) and (
        WorkflowInstance.objects.filter(
            pk__in=outcome.children, status__in=TERMINAL_STATUSES
        ).exists()
    )


def wake_parent(instance_pk: int, now: datetime, db=connection) -> tuple[str, list]:
    return store.WAKE_PARENT, [dt(now, db), instance_pk]


def dt(value: datetime, db=connection):
    """A datetime as the connection's backend stores it."""
    return db.ops.adapt_datetimefield_value(value)
