"""Step-boundary writes: one short guarded transaction per boundary.

Each commit first renews the lease with a compare-and-set on the fencing token (the lease must
still be ours and unexpired), then locks the instance row (task before instance, everywhere, so
services and runners never deadlock) and checks the run number and status. Only then does it
write the buffered steps, consumed events, logs and step-scoped mutations, and the outcome.

On PostgreSQL, outside any transaction, a boundary that runs no Python inside its transaction
(no step mutation, no child to spawn, no recheck under the task lock, no trimmed step) is one
prepared statement in one round trip: the guard and every write as data-modifying CTEs, in
autocommit, so the statement is its own transaction and a refusing guard aborts all of it
(see _write_if_proceeding).
"""

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import JSONField

from ops import pgwire
from workflows import runtime
from workflows.decisions import (
    DISCARD,
    KEEP_AND_STOP,
    PROCEED,
    StepState,
    boundary_permission,
    boundary_progress,
)
from workflows.engine import create, storage_faults, store
from workflows.engine.claim import Claim, Lease, db_now_param
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


def commit(claim: Claim, pending: Pending, outcome) -> str:
    """Apply `pending` and `outcome`; returns the boundary permission (see decisions).

    On PostgreSQL the guard and the writes travel in one pipeline (the guard first, so it takes
    the task lock before anything else) and are rolled back when the guard refuses; a paused
    instance is then written again in keep-only form. A wait-for-event suspension guards first
    and writes after, because it must look for events under the task lock.

    A storage error raises StorageFault (storage_faults): the run stops and is claimed again;
    whether the COMMIT reached the server or not, replay reads what the database holds.
    """
    with storage_faults.guarded():
        permission = _commit(claim, pending, outcome)
        storage_faults.inject("boundary_commit_after")
    return permission


@dataclass
class Creating:
    """A new instance created with its run's first boundary (runner/here.py)."""

    instance: WorkflowInstance  # validated, unsaved, of the version create.known_active gave
    now: datetime
    lease: Lease
    claim: Claim | None = None  # the run's claim, with its pks, once the instance exists


def commit_creating(claim: Claim, creating: Creating, pending: Pending, outcome) -> str | None:
    """The run's first boundary, creating its instance. A boundary that continues and fits the
    one-statement path (PostgreSQL, autocommit) is one statement with the insert of the instance,
    its labels and its leased task: create, claim and first boundary in one synchronous commit.
    Any other first boundary inserts first, then commits as usual. None when nothing was
    written: the id exists or the active version moved (the caller takes the ORM path)."""
    with storage_faults.guarded():
        db = connections[DEFAULT_DB_ALIAS]  # the thread's wrapper, looked up once a boundary
        if isinstance(outcome, Continue) and _one_round_trip(pending, outcome, db):
            permission = _create_and_write(claim, creating, pending, db)
        else:
            permission = _create_then_commit(claim, creating, pending, outcome)
        if permission is not None:
            storage_faults.inject("boundary_commit_after")
    return permission


def _create_and_write(claim: Claim, creating: Creating, pending: Pending, db) -> str | None:
    progress = boundary_progress([s.status for s in pending.steps.values()], continues=True)
    lease = replace(
        creating.lease,
        recovery_attempts=0 if progress else 1,
        fingerprint=pending.fingerprint or "",
    )
    pending.fingerprint = None  # written with the instance row
    now = runtime.now()
    params = create.insert_params(creating.instance, creating.now, lease)
    writes = []
    for sql, values in _statements(claim, pending, Continue(), now, db, keep_only=False, new=True):
        writes.append(sql)
        params += values
    one = store.with_ctes((store.CREATE_LEASED_CTES,), tuple(writes), store.CREATE_LEASED_END)
    try:  # alone: its own transaction
        row = pgwire.execute(one, params, db)
    except psycopg.errors.DivisionByZero:
        return None
    if row is None:
        return None
    _created(claim, creating, *row)
    return _committed(pending, PROCEED)


def _create_then_commit(claim: Claim, creating: Creating, pending: Pending, outcome):
    task_pk = create.insert_leased(creating.instance, creating.now, creating.lease)
    if task_pk is None:
        return None
    return commit(_created(claim, creating, creating.instance.pk, task_pk), pending, outcome)


def _created(claim: Claim, creating: Creating, instance_pk: int, task_pk: int) -> Claim:
    creating.instance.pk = instance_pk
    creating.instance._state.adding = False
    creating.claim = replace(claim, instance_pk=instance_pk, task_pk=task_pk)
    return creating.claim


def _commit(claim: Claim, pending: Pending, outcome) -> str:
    db = connections[DEFAULT_DB_ALIAS]  # the thread's wrapper, looked up once a boundary
    now = runtime.now()
    progress = boundary_progress(
        [state.status for state in pending.steps.values()], continues=isinstance(outcome, Continue)
    )
    if _one_round_trip(pending, outcome, db):
        statements = _statements(claim, pending, outcome, now, db, keep_only=False)
        renews = isinstance(outcome, Continue)  # else the outcome releases or deletes the task
        if _write_if_proceeding(claim, now, progress, statements, db, renews=renews):
            return _committed(pending, PROCEED)
        # Refused, nothing written: paused, fenced off or lease lost. The path below finds out
        # which and writes what a paused instance keeps.
    optimistic = db.vendor == "postgresql" and not (
        isinstance(outcome, SuspendTo) and outcome.rechecks
    )
    expected = PROCEED
    for _ in range(3):
        with transaction.atomic():
            if optimistic:
                keep_only = expected == KEEP_AND_STOP
                statements = _statements(claim, pending, outcome, now, db, keep_only=keep_only)
                # Paused: keeping finished work and stopping is a suspension too.
                reset = progress or keep_only
                permission = _guard_and_write(claim, now, reset, statements)
                if permission != expected:
                    transaction.set_rollback(True)
                    if permission == DISCARD:
                        return DISCARD
                    expected = permission
                    continue
            else:
                permission = _guard(claim, now, progress)
                if permission == DISCARD:
                    return DISCARD
                keep_only = permission == KEEP_AND_STOP
                _execute_all(_statements(claim, pending, outcome, now, db, keep_only=keep_only))
            for fn in pending.mutations:  # an IntegrityError here aborts the whole boundary
                fn()
            if permission == PROCEED:
                for fn in pending.spawns:  # a WorkflowError here aborts the whole boundary
                    fn()
            storage_faults.inject("boundary_commit_before")
        return _committed(pending, permission)
    return DISCARD


def _committed(pending: Pending, permission: str) -> str:
    after = list(pending.after_commit)
    pending.clear()
    for fn in after:
        fn()
    return permission


def _one_round_trip(pending: Pending, outcome, db) -> bool:
    """Can this boundary be one pipeline with no transaction around it (see the module doc)?"""
    return (
        not pending.mutations
        and not pending.spawns
        and not (isinstance(outcome, SuspendTo) and outcome.rechecks)
        # one statement must not write a step row twice (delete it, upsert it again)
        and not pending.deleted
        and pgwire.postgres_autocommit(db)
    )


def _write_if_proceeding(
    claim: Claim, now: datetime, progress: bool, statements: list, db, *, renews: bool
) -> bool:
    """The guard and the writes as one statement (CTEs: each write one `wN AS (...)`), sent in
    autocommit, so it is its own transaction; False when the guard refused and nothing was
    written. The statement ends with store.ABORT_UNLESS_OURS: a task that is no longer ours or is
    paused fails it with division_by_zero, which rolls back every CTE. Writes in one statement
    share one snapshot, so none may modify a row another modifies: the lease is renewed only
    when the outcome leaves the task row alone (`renews`), and _statements folds the code
    fingerprint into the instance's own UPDATE. NOTIFY is no CTE: the last SELECT calls
    pg_notify, which is delivered on commit like NOTIFY."""
    db_now = db_now_param(now)
    head, params = (store.LOCK_TASK,), _lock_params(claim, db_now)
    if renews:
        head += (store.RENEW_LEASE,)
        params += _renew_params(claim, db_now, progress)
    wakes, writes = False, []
    for sql, values in statements:
        if values is None:  # the NOTIFY of _wake_runners: pg_notify in the statement instead
            assert sql == store.NOTIFY, sql
            wakes = True
            continue
        writes.append(sql)
        params += values
    one = store.with_ctes(
        head, tuple(writes), store.ABORT_AND_WAKE if wakes else store.ABORT_UNLESS_OURS
    )
    try:
        if not storage_faults.take("boundary_commit_before"):
            pgwire.execute(one, params, db)  # alone: its own transaction
            return True
        # The test hook's "before COMMIT": the backend dies after the writes, before the
        # pipeline's sync would commit them.
        one, cursor = pgwire.statement(one)
        with connection.connection.pipeline():
            cursor.execute(one, params, prepare=True)
            cursor.execute(store.TERMINATE_SELF)
    except psycopg.errors.DivisionByZero:
        return False
    return True


def _statements(
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
            [_dt(now, db), step_name, event_pk],
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


def _lock_params(claim: Claim, db_now) -> list:
    return [claim.task_pk, claim.fencing_token, db_now]


def _renew_params(claim: Claim, db_now, progress: bool) -> list:
    lease = claim.lease_seconds
    return [db_now, lease, progress, db_now, lease, progress]


def _guard_statement(claim: Claim, now: datetime, progress: bool) -> tuple[str, list]:
    """The guard also resets the run's recovery count when the boundary is progress."""
    if connection.vendor == "postgresql":
        db_now = db_now_param(now)
        return store.GUARD_PG, _lock_params(claim, db_now) + _renew_params(claim, db_now, progress)
    until = _dt(claim.lease_until(now))
    return store.GUARD, [until, progress, claim.task_pk, claim.fencing_token, _dt(now)]


def _guard(claim: Claim, now: datetime, progress: bool) -> str:
    with connection.cursor() as cursor:
        cursor.execute(*_guard_statement(claim, now, progress))
        return _permission(cursor.fetchone())


def _guard_and_write(claim: Claim, now: datetime, progress: bool, statements: list) -> str:
    """PostgreSQL: guard and writes in one pipeline, one round trip."""
    with connection.cursor() as guard, connection.cursor() as cursor:
        with connection.connection.pipeline():
            guard.execute(*_guard_statement(claim, now, progress))
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
    """All step rows of a boundary in one INSERT … ON CONFLICT DO UPDATE (PostgreSQL, SQLite)."""
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
        params.append(_dt(value, db) if isinstance(value, datetime) else value)
    sql = store.release_task(tuple(sets))
    return sql, params + [claim.task_pk, claim.fencing_token]


_INSTANCE_FIELDS = _fields(WorkflowInstance, ("output", "error"))


def _instance_update(
    claim: Claim, now: datetime, status: str, db, *, fingerprint: str | None = None, **json_fields
) -> tuple:
    sets, params = ["status", "updated_at"], [status, _dt(now, db)]
    if fingerprint is not None:
        sets.append("code_fingerprint")
        params.append(fingerprint)
    if status in (Status.COMPLETE, Status.ERRORED):
        sets.append("completed_at")
        params.append(_dt(now, db))
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
    that ran this) sleep until the due time they last read, so tell them (runner/wake.py)."""
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
    return store.WAKE_PARENT, [_dt(now, db), instance_pk]


def _dt(value: datetime, db=connection):
    return db.ops.adapt_datetimefield_value(value)
