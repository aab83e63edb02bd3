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

from dataclasses import dataclass, replace
from datetime import datetime

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction

from ops import pgwire
from ops.liveness import progress_mark
from workflows import runtime
from workflows.decisions import (
    DISCARD,
    KEEP_AND_STOP,
    PROCEED,
    boundary_permission,
    boundary_progress,
)
from workflows.engine import create, storage_faults, store
from workflows.engine.claim import Claim, Lease, db_now_param
from workflows.engine.writes import (  # noqa: F401  the outcomes and helpers callers use from here
    Continue,
    Fail,
    Finish,
    Pending,
    Requeue,
    SuspendTo,
    dt,
    event_wakes,
    statements,
    task_wait_types,
    wake_parent,
)
from workflows.models import (
    Status,
    WorkflowInstance,
)


def commit(claim: Claim, pending: Pending, outcome) -> str:
    """Apply `pending` and `outcome`; returns the boundary permission (see decisions).

    One write per boundary and database. PostgreSQL in autocommit: one statement, the guard and
    every write as CTEs (_write_if_proceeding), when the boundary runs no Python under the task
    lock. Otherwise, and on SQLite, and when that statement was refused (to learn whether the
    instance is paused and write what it keeps): one transaction that guards first, then writes
    (pipelined on PostgreSQL), then runs the boundary's mutations and spawns.

    A storage error raises StorageFault (storage_faults): the run stops and is claimed again;
    whether the COMMIT reached the server or not, replay reads what the database holds.
    """
    with storage_faults.guarded():
        permission = _commit(claim, pending, outcome)
        storage_faults.inject("boundary_commit_after")
    return permission


@dataclass
class Creating:
    """A new instance created with its run's first boundary (engine/here.py)."""

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
    for sql, values in statements(claim, pending, Continue(), now, db, keep_only=False, new=True):
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
        writes = statements(claim, pending, outcome, now, db, keep_only=False)
        renews = isinstance(outcome, Continue)  # else the outcome releases or deletes the task
        if _write_if_proceeding(claim, now, progress, writes, db, renews=renews):
            return _committed(pending, PROCEED)
        # Refused, nothing written: paused, fenced off or lease lost. The path below finds out
        # which and writes what a paused instance keeps.
    with transaction.atomic():
        permission = _guard(claim, now, progress)
        if permission == DISCARD:
            return DISCARD
        keep_only = permission == KEEP_AND_STOP
        _execute_all(statements(claim, pending, outcome, now, db, keep_only=keep_only))
        for fn in pending.mutations:  # an IntegrityError here aborts the whole boundary
            fn()
        if permission == PROCEED:
            for fn in pending.spawns:  # a WorkflowError here aborts the whole boundary
                fn()
        storage_faults.inject("boundary_commit_before")
    return _committed(pending, permission)


def _committed(pending: Pending, permission: str) -> str:
    progress_mark()  # a boundary written: this runner progresses (ops.liveness)
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
    until = dt(claim.lease_until(now))
    return store.GUARD, [until, progress, claim.task_pk, claim.fencing_token, dt(now)]


def _guard(claim: Claim, now: datetime, progress: bool) -> str:
    with connection.cursor() as cursor:
        cursor.execute(*_guard_statement(claim, now, progress))
        return _permission(cursor.fetchone())


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
