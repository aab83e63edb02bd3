"""Creating instances: create_instance is the one road behind every create (API, batch, once,
child, cron, graph run, lab upload, instance_run_here). docs/workflows/internals.md has the map.

Two ways to write, chosen here only. On PostgreSQL outside a transaction, once this process has
seen the workflow's version active, a create is one prepared statement (store.CREATE_QUEUED /
CREATE_LEASED) that inserts only while the deployment row still names that version and the id
is new; when it writes nothing, or anywhere else (SQLite, inside a transaction, a child in its
parent's boundary), the ORM path decides in one transaction: it reads the pointer again
(creating it on first use) and raises InstanceIdAlreadyExists for a taken id.
"""

import json
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connection, transaction

from ops import pgwire
from ops.request_id import get_request_id
from workflows import concurrency, dbclock, labels, limits, rollout, runtime
from workflows.authoring import registry
from workflows.engine import store, wake
from workflows.engine.claim import Lease, db_now_param, lease_clock, lease_end
from workflows.errors import InstanceIdAlreadyExists, NoActiveDeployment
from workflows.models import (
    DEFAULT_PRIORITY,
    Status,
    TaskKind,
    WorkflowDeployment,
    WorkflowInstance,
    WorkflowInstanceLabel,
    WorkflowTask,
    start_priority,
)


@dataclass(frozen=True)
class NewInstance:
    """What a caller asks for; create_instance validates it."""

    workflow_name: str
    instance_id: str | None = None  # None: a fresh id
    params: object = None
    priority: int = DEFAULT_PRIORITY
    labels: dict | None = None
    parent_pk: int | None = None  # a child of step.run_workflow, created in its parent's boundary
    subject: int | None = None  # the pk of the user the work is for (a wipe deletes it), or None
    version: int | None = None  # None: the active version; else a registered one (a canary)


@dataclass
class Created:
    """create_instance's answer. `deferred`: leased on PostgreSQL in autocommit, the rows are
    not written yet: the run's first boundary writes them with its own (persist.Creating), and
    `task_pk` is None until then."""

    instance: WorkflowInstance
    now: datetime
    task_pk: int | None
    leased: bool
    deferred: bool = False


def create_instance(new: NewInstance, lease: Lease | None = None) -> Created:
    """Create `new`, runnable now; with `lease`, its first task leased to `lease.owner` at once,
    as a claim would (instance_run_here), unless the workflow is capped (then it is queued and
    the runners' claims keep the cap). Raises the validation errors, WorkflowNotFound,
    NoActiveDeployment, VersionNotFound, WorkflowDisabled and InstanceIdAlreadyExists."""
    now = runtime.now()
    limits.check_priority(new.priority)
    version = known_active(new.workflow_name) if new.version is None else None
    # The one statement writes the common case; a canary, a child or work for a user (their
    # columns are not in it) take the ORM path.
    plain = new.parent_pk is None and new.subject is None
    if version is not None and plain and pgwire.postgres_autocommit():
        instance = _build(new, version, now)
        if lease is None:
            if _insert(instance, now):
                wake.schedule_wake(notified=True)
                return Created(instance, now, task_pk=None, leased=False)
        elif not _capped(instance):
            return Created(instance, now, task_pk=None, leased=True, deferred=True)
    return _create_with_orm(new, now, lease)


def _create_with_orm(new: NewInstance, now, lease: Lease | None) -> Created:
    try:
        with transaction.atomic():
            version = version_for_new(new.workflow_name, new.version)
            if new.version is None:
                remember_active(new.workflow_name, version)
            instance = _build(new, version, now)
            if lease is not None and _capped(instance):
                lease = None
            task = save_new(instance, now, lease)
            if lease is None:
                wake.schedule_wake()  # in the transaction: its NOTIFY costs no commit of its own
    except IntegrityError:
        raise InstanceIdAlreadyExists(
            f"instance {new.instance_id!r} of {new.workflow_name!r} already exists"
        ) from None
    return Created(instance, now, task_pk=task.pk, leased=lease is not None)


def validate(new: NewInstance, version: int, now) -> WorkflowInstance:
    """`new` as an unsaved instance of `version`, every rule checked (a batch checks all first)."""
    return _build(new, version, now)


def _build(new: NewInstance, version: int, now) -> WorkflowInstance:
    instance_id = new.instance_id if new.instance_id is not None else runtime.new_id()
    return WorkflowInstance(
        workflow_name=new.workflow_name,
        instance_id=limits.check_instance_id(instance_id),
        version=version,
        status=Status.ACTIVE,
        run_number=1,
        params=limits.check_json(new.params, what="params"),
        priority=limits.check_priority(new.priority),
        labels=labels.check_labels(new.labels),
        subject_id=new.subject,
        request_id=get_request_id(),
        parent_id=new.parent_pk,
        created_at=now,
        updated_at=now,
    )


def save_new(instance: WorkflowInstance, now, lease: Lease | None = None) -> WorkflowTask:
    """Insert the instance, its label rows and its first task through the ORM (in the caller's
    transaction); returns the task. `lease`: the task is leased to its owner at once."""
    if lease is not None:
        instance.started_at = now
    instance.save(force_insert=True)
    if instance.labels:
        WorkflowInstanceLabel.objects.bulk_create(
            WorkflowInstanceLabel(instance=instance, key=key, value=value)
            for key, value in instance.labels.items()
        )
    task = new_task(instance, now)
    if lease is not None:
        lease_now, _ = lease_clock()  # the clock a claim's lease is judged by
        task.lock_owner, task.locked_until = lease.owner, lease_end(lease_now, lease.seconds)
        task.fencing_token, task.claims = 1, 1
        task.recovery_attempts = lease.recovery_attempts
    task.save(force_insert=True)
    return task


def new_task(instance: WorkflowInstance, now) -> WorkflowTask:
    """A START task for the instance's current run, due now, unsaved."""
    return WorkflowTask(
        instance=instance,
        run_number=instance.run_number,
        kind=TaskKind.START,
        priority=start_priority(instance.priority),
        run_at=dbclock.due_now(now),
        created_at=now,
        **slot(instance),
    )


def slot(instance: WorkflowInstance) -> dict:
    """The task's concurrency group and cap (workflows.concurrency)."""
    return concurrency.task_fields(instance.workflow_name, instance.version, instance.params)


def _capped(instance: WorkflowInstance) -> bool:
    return bool(slot(instance)["concurrency_limit"])


# -- the active version --------------------------------------------------------------------------


def workflow_active_version(*, name: str) -> int:
    """The version new instances of `name` run. With no pointer yet, the first registered version
    is activated (and stored). Raises WorkflowNotFound / NoActiveDeployment."""
    versions = registry.require(name)
    row = WorkflowDeployment.objects.filter(workflow_name=name).values("active_version").first()
    if row is None:
        first = registry.first_version(name)
        try:
            with transaction.atomic():
                WorkflowDeployment.objects.create(
                    workflow_name=name, active_version=first, updated_at=runtime.now()
                )
        except IntegrityError:  # another process activated one first; read theirs
            return workflow_active_version(name=name)
        return first
    active = row["active_version"]
    if active is None or active not in versions:
        raise NoActiveDeployment(
            f"workflow {name!r} has no active version in this deployment"
            + ("" if active is None else f" (v{active} is not registered)"),
            active_version=active,
        )
    return active


def version_for_new(name: str, version: int | None) -> int:
    """The active version, or `version` when the caller names one (a canary beside the
    pointer); refused with 409 `disabled` while the workflow is disabled (workflows.rollout)."""
    if version is None:
        chosen = workflow_active_version(name=name)
    else:
        chosen = rollout.check_version(name=name, version=version)
    rollout.check_enabled(name=name)
    return chosen


def subject_pk(subject) -> int | None:
    """`subject=` of a create: a user, a user's pk, or None (nobody's work)."""
    return getattr(subject, "pk", subject)


_seen: dict[str, int] = {}  # workflow name -> the active version this process last read


def remember_active(name: str, version: int) -> None:
    _seen[name] = version


def forget_active(name: str) -> None:
    """The one statement wrote nothing (the pointer moved, or the id exists): read it again."""
    _seen.pop(name, None)


def known_active(name: str) -> int | None:
    """The version to try, or None (never seen, or no longer registered here): the ORM path."""
    version = _seen.get(name)
    if version is None or registry.get(name, version) is None:
        return None
    return version


# -- the one statement (PostgreSQL, autocommit) ---------------------------------------------------


def _insert(instance: WorkflowInstance, now) -> bool:
    """store.CREATE_QUEUED: True with the instance's pk set, or False with nothing written."""
    with connection.wrap_database_errors:
        row = pgwire.execute(store.CREATE_QUEUED, insert_params(instance, now))
    if row is None:
        return False
    saved(instance, row[0])
    return True


def insert_leased(instance: WorkflowInstance, now, lease: Lease) -> int | None:
    """store.CREATE_LEASED (no NOTIFY: no other runner is to take it); the task's pk, or None
    with nothing written."""
    with connection.wrap_database_errors:
        row = pgwire.execute(store.CREATE_LEASED, insert_params(instance, now, lease))
    if row is None:
        return None
    saved(instance, row[0])
    return row[1]


def insert_params(instance: WorkflowInstance, now, lease: Lease | None = None) -> list:
    """The parameters of store.CREATE_QUEUED_CTES, or of CREATE_LEASED_CTES with `lease`."""
    fields = slot(instance)
    name = instance.workflow_name
    leased = lease is not None
    return [
        name,
        instance.version,
        name,
        instance.instance_id,
        instance.version,
        None if instance.params is None else json.dumps(instance.params),
        instance.request_id,
        instance.priority,
        *([lease.fingerprint] if leased else []),
        json.dumps(instance.labels),
        now,
        now,
        *([now] if leased else []),
        list(instance.labels),
        list(instance.labels.values()),
        start_priority(instance.priority),
        db_now_param(now),
        *(
            [lease.owner, db_now_param(now), lease.seconds, lease.recovery_attempts]
            if leased
            else []
        ),
        fields["concurrency_group"],
        fields["concurrency_limit"],
        now,
    ]


def saved(instance: WorkflowInstance, pk: int) -> None:
    """Mark `instance` as stored under `pk`, as the ORM's save would."""
    instance.pk = pk
    instance._state.adding = False
    instance._state.db = connection.alias
