"""Claiming due tasks with a lease and a fencing token, and loading what the run needs.

PostgreSQL: one update of the row a locking subselect picks (rows other runners hold are
skipped), walking the partial index workflow_task_runnable. SQLite: pick candidates, then a compare-and-set UPDATE per
candidate (exactly one row changed = ours).

Clocks: on PostgreSQL, lease expiry and "is it due" are judged by the server's clock (DB_NOW),
so a runner whose wall clock is off never takes a live lease or runs work early; the times it
writes are corrected by workflows.dbclock. SQLite is one machine: the process clock. The test
harness passes its manual time everywhere.

Concurrency caps (workflows.concurrency), only when the deployment's code caps a workflow: the
walk skips rows of groups already at their cap; on PostgreSQL the picked row of a capped group
is then claimed under a transaction-scoped advisory lock on its group, after a recount in a
fresh statement, so racing runners never start more than the cap between them.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Count, DateTimeField, ExpressionWrapper, F, Min, Q
from django.db.models.functions import Now

from ops import pgwire
from workflows import concurrency, runtime
from workflows.authoring import registry
from workflows.decisions import StepState
from workflows.engine import storage_faults, store
from workflows.models import (
    TERMINAL_STATUSES,
    Status,
    TaskKind,
    WorkflowInstance,
    WorkflowStep,
    WorkflowTask,
)

VERSION_MISSING_RETRY = timedelta(minutes=1)


@dataclass(frozen=True)
class Claim:
    task_pk: int
    instance_pk: int
    run_number: int
    fencing_token: int
    kind: str
    owner: str
    lease_seconds: float
    recovery_attempts: int = 0  # claims without progress, this one included

    def lease_until(self, now: datetime) -> datetime:
        return now + timedelta(seconds=self.lease_seconds)


@dataclass(frozen=True)
class Lease:
    """The caller's lease on a task created leased (engine/here.py:
    the create is its claim)."""

    owner: str
    seconds: float
    recovery_attempts: int = 1  # a claim without progress, as claim_next counts one
    fingerprint: str = ""  # the run's code fingerprint, recorded with the instance


@dataclass
class Loaded:
    workflow_name: str
    instance_id: str
    version: int
    params: object
    created_at: datetime
    request_id: str
    code_fingerprint: str = ""  # of the code the run started on; "" = not recorded yet
    has_parent: bool = False  # a child instance: finishing it wakes its parent
    steps: dict[str, StepState] = field(default_factory=dict)


def db_now_param(now: datetime) -> datetime | None:
    """The parameter for DB_NOW: None (the server's clock) unless the runtime is the harness's."""
    return None if runtime.current().follows_database else now


_STEP_FIELDS = (
    "pk",
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
    "started_at",
    "completed_at",
)


def claim_next(*, owner: str, lease_seconds: float) -> tuple[Claim, Loaded] | None:
    """Claim the next due task and load its instance and steps."""
    capped = concurrency.any_capped()
    for _ in range(50):  # a claimed row may be stale or unrunnable here; set it aside, go on
        now = runtime.now()
        until = now + timedelta(seconds=lease_seconds)
        if connection.vendor == "postgresql" and capped:
            got = _claim_postgres(owner, lease_seconds, now, until, uncapped_pick=True)
            if got is _CAPPED:
                with transaction.atomic():
                    got = _claim_postgres_capped(owner, lease_seconds, now, until)
        elif connection.vendor == "postgresql":
            got = _claim_postgres(owner, lease_seconds, now, until)
        else:
            with transaction.atomic():
                got = _claim_cas(owner, lease_seconds, now, until, capped=capped)
        if got is None:
            return None
        if got is not False:
            return got
    return None


_CAPPED = object()  # the next row is of a capped workflow: claim it under its group's lock


def _claim_postgres(
    owner, lease_seconds, now, until, *, picked: int | None = None, uncapped_pick: bool = False
):
    db_now = db_now_param(now)
    if uncapped_pick:
        sql = store.PICK_AND_CLAIM_UNCAPPED
        params = [db_now, db_now, db_now, owner, db_now, lease_seconds, now, now]
    elif picked is None:
        sql = store.CLAIM_NEXT
        params = [owner, db_now, lease_seconds, db_now, db_now, now, now]
    else:
        sql = store.CLAIM_PICKED
        params = [owner, db_now, lease_seconds, picked, now, now]
    row = pgwire.execute(sql, params)
    if row is None:
        return None
    if uncapped_pick and row[0] is None:  # picked a row of a capped workflow, claimed nothing
        return _CAPPED
    claim = Claim(*row[:5], owner=owner, lease_seconds=lease_seconds, recovery_attempts=row[13])
    if row[6] is None:  # the instance is paused, terminal or on another run: repair the task
        inst = _instance_row(claim)
        if inst is not None:
            _repair_if_stale(claim, inst)
        return False
    params = json.loads(row[9]) if isinstance(row[9], str) else row[9]
    loaded = Loaded(
        workflow_name=row[6],
        instance_id=row[7],
        version=row[8],
        params=params,
        created_at=row[10],
        request_id=row[11],
        code_fingerprint=row[12],
        has_parent=row[14],
    )
    return _finish_load(claim, loaded, first_claim=row[5] == 1, now=now)


def _claim_postgres_capped(owner, lease_seconds, now, until):
    """In the caller's transaction: lock the next runnable row not in a full group; for a
    capped group, take the group's advisory lock and recount (a new statement sees claims that
    committed meanwhile); claim it only while the group is under its cap."""
    db_now = db_now_param(now)
    with connection.cursor() as cursor:
        cursor.execute(store.PICK_CAPPED, [db_now, db_now, db_now])
        picked = cursor.fetchone()
        if picked is None:
            return None
        task_pk, group, limit = picked
        if limit is not None:
            cursor.execute(store.LOCK_GROUP, [group])
            cursor.execute(store.COUNT_RUNNING, [group, db_now])
            if cursor.fetchone()[0] >= limit:
                return False  # filled up since the pick: look again
    return _claim_postgres(owner, lease_seconds, now, until, picked=task_pk)


def _not_in_full_group(now):
    """Rows of uncapped workflows, or of groups still under their cap (counted at `now`)."""
    full = (
        WorkflowTask.objects.filter(locked_until__gt=now, concurrency_limit__isnull=False)
        .values("concurrency_group")
        .annotate(running=Count("id"), cap=Min("concurrency_limit"))
        .filter(running__gte=F("cap"))
        .values("concurrency_group")
    )
    return Q(concurrency_limit__isnull=True) | ~Q(concurrency_group__in=full)


def _group_full(group: str, limit: int, now) -> bool:
    running = WorkflowTask.objects.filter(
        concurrency_group=group, concurrency_limit__isnull=False, locked_until__gt=now
    ).count()
    return running >= limit


def _claim_cas(owner, lease_seconds, now, until, *, capped: bool = False):
    """SQLite: pick candidates, then compare-and-set each; exactly one row changed = ours.
    SQLite runs one writer at a time, so the cap's count and the claim cannot interleave."""
    due = Q(run_at__isnull=False, run_at__lte=now) & (
        Q(locked_until__isnull=True) | Q(locked_until__lte=now)
    )
    if capped:
        due &= _not_in_full_group(now)
    candidates = list(
        WorkflowTask.objects.filter(due)
        .order_by("priority", "run_at", "id")
        .values_list("pk", "fencing_token", "concurrency_group", "concurrency_limit")[:8]
    )
    for pk, token, group, limit in candidates:
        if limit is not None and _group_full(group, limit, now):
            continue
        changed = WorkflowTask.objects.filter(due, pk=pk, fencing_token=token).update(
            lock_owner=owner,
            locked_until=until,
            fencing_token=F("fencing_token") + 1,
            claims=F("claims") + 1,
            recovery_attempts=F("recovery_attempts") + 1,
        )
        if changed == 1:
            row = (
                WorkflowTask.objects.filter(pk=pk)
                .values_list(
                    "pk",
                    "instance_id",
                    "run_number",
                    "fencing_token",
                    "kind",
                    "claims",
                    "recovery_attempts",
                )
                .get()
            )
            claim = Claim(
                *row[:5], owner=owner, lease_seconds=lease_seconds, recovery_attempts=row[6]
            )
            inst = _instance_row(claim)
            if inst is None or not _repair_if_stale(claim, inst):
                return False
            if inst["status"] == Status.WAITING or inst["started_at"] is None:
                WorkflowInstance.objects.filter(pk=claim.instance_pk).update(
                    status=Status.ACTIVE, updated_at=now, started_at=inst["started_at"] or now
                )
            loaded = Loaded(
                workflow_name=inst["workflow_name"],
                instance_id=inst["instance_id"],
                version=inst["version"],
                params=inst["params"],
                created_at=inst["created_at"],
                request_id=inst["request_id"],
                code_fingerprint=inst["code_fingerprint"],
                has_parent=inst["parent_id"] is not None,
            )
            return _finish_load(claim, loaded, first_claim=row[5] == 1, now=now)
    return None


def _instance_row(claim: Claim) -> dict | None:
    return (
        WorkflowInstance.objects.filter(pk=claim.instance_pk)
        .values(
            "workflow_name",
            "instance_id",
            "version",
            "status",
            "run_number",
            "params",
            "created_at",
            "request_id",
            "started_at",
            "code_fingerprint",
            "parent_id",
        )
        .first()
    )


def _finish_load(claim: Claim, loaded: Loaded, *, first_claim: bool, now):
    if registry.get(loaded.workflow_name, loaded.version) is None:
        # Its version is not in this deployment's code: never run or crash on it; look again
        # later (another runner may have the code). Selectors report it as version_missing.
        WorkflowTask.objects.filter(pk=claim.task_pk).update(
            run_at=now + VERSION_MISSING_RETRY,
            lock_owner="",
            locked_until=None,
            recovery_attempts=F("recovery_attempts") - 1,  # set aside, not a crash
        )
        # The claim marked it active; it is not running, it waits for its code.
        WorkflowInstance.objects.filter(pk=claim.instance_pk, status=Status.ACTIVE).update(
            status=Status.WAITING
        )
        return False
    if not (first_claim and claim.kind == TaskKind.START):  # else no step can exist yet
        rows = WorkflowStep.objects.filter(
            instance_id=claim.instance_pk, run_number=claim.run_number
        ).values(*_STEP_FIELDS)
        for row in rows.order_by("id"):
            loaded.steps[row["name"]] = StepState(**row)
    return claim, loaded


def _repair_if_stale(claim: Claim, inst: dict) -> bool:
    """A runnable task must belong to an active/waiting instance of the same run; fix it if not."""
    task = WorkflowTask.objects.filter(pk=claim.task_pk)
    if inst["status"] in TERMINAL_STATUSES:
        task.delete()
        return False
    if inst["status"] == Status.PAUSED:
        task.update(
            run_at=None,
            lock_owner="",
            locked_until=None,
            recovery_attempts=F("recovery_attempts") - 1,  # set aside, not a crash
        )
        return False
    if inst["run_number"] != claim.run_number:
        task.update(run_number=inst["run_number"], lock_owner="", locked_until=None)
        return False
    return True


def lease_clock() -> tuple:
    """(now, now) for ORM lease filters: the server's clock as an expression on PostgreSQL with
    the production runtime, else the runtime's time (a value) twice."""
    now = runtime.now()
    if connection.vendor == "postgresql" and runtime.current().follows_database:
        return Now(), now
    return now, now


def next_due_at() -> datetime | None:
    """When the earliest runnable task falls due (for pollers deciding how long to sleep)."""
    lease_now, _ = lease_clock()
    free = Q(locked_until__isnull=True) | Q(locked_until__lte=lease_now)  # leased: not ours
    if concurrency.any_capped():
        free &= _not_in_full_group(lease_now)  # behind a cap: due when a slot frees, not now
    return (
        WorkflowTask.objects.filter(free, run_at__isnull=False)
        .order_by("run_at")
        .values_list("run_at", flat=True)
        .first()
    )


def lease_end(lease_now, seconds: float):
    """A lease of `seconds` from lease_clock()'s first value, as a value or an expression."""
    until = lease_now + timedelta(seconds=seconds)
    if isinstance(lease_now, Now):
        until = ExpressionWrapper(until, output_field=DateTimeField())
    return until


def renew(claim: Claim) -> bool:
    """Extend our lease; False when it is no longer ours (expired, reclaimed, restarted)."""
    lease_now, _ = lease_clock()
    return (
        WorkflowTask.objects.filter(
            pk=claim.task_pk, fencing_token=claim.fencing_token, locked_until__gt=lease_now
        ).update(locked_until=lease_end(lease_now, claim.lease_seconds))
        == 1
    )


def release_after_fault(claim: Claim) -> None:
    """Give the lease back after a storage fault so the work is claimed again at once rather
    than when the lease lapses. Best effort on a fresh connection: if the database is still
    away, the lease simply expires. The fencing token makes it a no-op once anyone else
    claimed the task, or once the faulted commit (outcome unknown) ended the run."""
    try:
        WorkflowTask.objects.filter(pk=claim.task_pk, fencing_token=claim.fencing_token).update(
            lock_owner="", locked_until=None
        )
    except Exception as exc:
        if not storage_faults.is_storage_fault(exc):
            raise
        storage_faults.drop_connection()
