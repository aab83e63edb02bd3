"""Writes on workflows: create instances, operator actions, events, version activation.

Keyword-only; every refusal is a workflows.errors.WorkflowError with a `code`. Each operator
action locks the task row before the instance row (the runner's order too), applies the rule
from workflows.decisions and logs the transition in the `system` category. Services take no
actor and no request: workflows.actions audits what operators do. Making work runnable
schedules a wake task on commit.
"""

import contextlib
from dataclasses import replace

from django.db import IntegrityError, transaction
from django.db.models import F

from ops.idempotency import TTL as IDEMPOTENCY_TTL
from ops.idempotency import body_hash
from ops.models import IdempotencyKey
from ops.request_id import get_request_id
from workflows import (
    dbclock,
    decisions,
    limits,
    runtime,
)
from workflows.authoring import registry
from workflows.engine import compose, wake
from workflows.engine.create import (
    NewInstance,
    create_instance,
    subject_pk,
    validate,
    version_for_new,
    workflow_active_version,  # noqa: F401 - the services' read
)
from workflows.engine.create import new_task as _new_task
from workflows.engine.create import slot as _slot
from workflows.engine.persist import event_wakes, wake_parent
from workflows.errors import (
    IdempotencyConflict,
    InstanceIdAlreadyExists,
    InstanceTerminal,
    UnknownStep,
    VersionNotFound,
)
from workflows.models import (
    DEFAULT_PRIORITY,
    TASK_PRIORITY,
    TERMINAL_STATUSES,
    Status,
    StepStatus,
    TaskKind,
    WorkflowDeployment,
    WorkflowEvent,
    WorkflowInstance,
    WorkflowLog,
    WorkflowStep,
    WorkflowTask,
    start_priority,
)
from workflows.selectors import instance_details


def _system_log(instance: WorkflowInstance, level: str, message: str, data=None) -> None:
    WorkflowLog.objects.create(
        instance=instance,
        run_number=instance.run_number,
        level=level,
        category="system",
        message=message,
        data=data,
        request_id=get_request_id(),
        created_at=runtime.now(),
    )


# -- versions ----------------------------------------------------------------------------------


def workflow_version_activate(*, name: str, version: int):
    """Point new instances of `name` at `version` (rollback = activate an older one)."""
    if version not in registry.require(name):
        raise VersionNotFound(f"workflow {name!r} has no registered version {version}")
    deployment, _ = WorkflowDeployment.objects.update_or_create(
        workflow_name=name,
        defaults={"active_version": version, "updated_at": runtime.now()},
    )
    return deployment


# -- creation: every path goes through engine.create.create_instance ---------------------------


def instance_create(
    *,
    workflow_name: str,
    instance_id: str | None = None,
    params=None,
    priority: int = DEFAULT_PRIORITY,
    labels: dict | None = None,
    version: int | None = None,
    subject=None,
) -> WorkflowInstance:
    """Create an instance, runnable now. `priority` 0-9 orders new runs (higher first, then
    oldest); resumes and wakes always go first. `labels` ({"user": "alice"}, workflows.labels)
    tag it for list filters. `version`: run that registered version instead of the active one
    (a canary; the pointer is unchanged). `subject`: the user the work is for, a user or their
    pk (a wipe of that user deletes it; their export holds it)."""
    new = NewInstance(
        workflow_name=workflow_name,
        instance_id=instance_id,
        params=params,
        priority=priority,
        labels=labels,
        version=version,
        subject=subject_pk(subject),
    )
    return create_instance(new).instance


PROGRAMMATIC_PRINCIPAL = "python"


def instance_create_once(
    *,
    workflow_name: str,
    idempotency_key: str,
    instance_id: str | None = None,
    params=None,
    priority: int = DEFAULT_PRIORITY,
    labels: dict | None = None,
    version: int | None = None,
    subject=None,
) -> str:
    """instance_create for code that may retry: the first call with `idempotency_key` creates, a
    repeat with equal arguments within 24 h returns the same instance id, different arguments
    raise IdempotencyConflict. The key row is inserted first, in the instance's transaction, so
    a concurrent repeat waits on the unique index instead of creating a second instance."""
    endpoint = f"workflows/{workflow_name}/instances"
    limits.check_priority(priority)
    arguments = {"id": instance_id, "params": params}
    if priority != DEFAULT_PRIORITY:  # keys stored before priorities existed keep matching
        arguments["priority"] = priority
    if labels:
        arguments["labels"] = labels
    if version is not None:
        arguments["version"] = version
    if subject is not None:
        arguments["subject"] = subject_pk(subject)
    digest = body_hash(arguments)
    now = runtime.now()
    lookup = {"principal": PROGRAMMATIC_PRINCIPAL, "key": idempotency_key, "endpoint": endpoint}
    IdempotencyKey.objects.filter(**lookup, expires_at__lte=now).delete()
    try:
        with transaction.atomic():
            IdempotencyKey.objects.create(
                **lookup, body_hash=digest, expires_at=now + IDEMPOTENCY_TTL
            )
            instance = instance_create(
                workflow_name=workflow_name,
                instance_id=instance_id,
                params=params,
                priority=priority,
                labels=labels,
                version=version,
                subject=subject,
            )
            IdempotencyKey.objects.filter(**lookup).update(
                status_code=201, response_body=instance.instance_id.encode()
            )
            return instance.instance_id
    except IntegrityError:
        stored = IdempotencyKey.objects.get(**lookup)
    if stored.body_hash != digest:
        raise IdempotencyConflict(
            f"idempotency key {idempotency_key!r} was used with other arguments"
        )
    return bytes(stored.response_body).decode()


def instance_create_batch(*, workflow_name: str, items: list[dict]) -> list[WorkflowInstance]:
    """Create many instances; ids that already exist (or repeat in the batch) are skipped and
    left out of the result. Everything is validated before anything is written."""
    version = version_for_new(workflow_name, None)
    now = runtime.now()
    wanted: dict[str, NewInstance] = {}
    for item in items:
        new = NewInstance(
            workflow_name=workflow_name,
            instance_id=item.get("id"),
            params=item.get("params"),
            priority=item.get("priority", DEFAULT_PRIORITY),
            labels=item.get("labels"),
            subject=subject_pk(item.get("subject")),
        )
        checked = validate(new, version, now)  # a fresh id is drawn here, once
        wanted.setdefault(checked.instance_id, replace(new, instance_id=checked.instance_id))
    existing = set(
        WorkflowInstance.objects.filter(
            workflow_name=workflow_name, instance_id__in=list(wanted)
        ).values_list("instance_id", flat=True)
    )
    created = []
    with transaction.atomic():  # one commit and one wake for the batch; a savepoint per item
        for instance_id, new in wanted.items():
            if instance_id in existing:
                continue
            try:
                created.append(create_instance(new).instance)
            except InstanceIdAlreadyExists:  # created concurrently since we looked: skipped
                continue
    return created


# -- operator actions ----------------------------------------------------------------------------


def _lock(instance: WorkflowInstance) -> tuple[WorkflowInstance, WorkflowTask | None]:
    """Lock task then instance (the runner's order) and return fresh rows."""
    task = WorkflowTask.objects.select_for_update().filter(instance_id=instance.pk).first()
    fresh = WorkflowInstance.objects.select_for_update(no_key=True).get(pk=instance.pk)
    return fresh, task


def instance_pause(*, instance: WorkflowInstance) -> WorkflowInstance:
    """No new step starts once this returns; a running step may finish and keeps its result."""
    with transaction.atomic():
        fresh, task = _lock(instance)
        if decisions.check_pausable(fresh.status):
            fresh.status, fresh.updated_at = Status.PAUSED, runtime.now()
            fresh.save(update_fields=["status", "updated_at"])
            if task is not None:
                # Not runnable; the lease stays so a step in flight can still store its result.
                WorkflowTask.objects.filter(pk=task.pk).update(run_at=None)
            _system_log(fresh, "info", "instance paused")
    return fresh


def instance_resume(*, instance: WorkflowInstance) -> WorkflowInstance:
    """A paused instance becomes active and runs now; anything else is left as it is."""
    with transaction.atomic():
        fresh, task = _lock(instance)
        if decisions.resume_applies(fresh.status):
            now = runtime.now()
            fresh.status, fresh.updated_at = Status.ACTIVE, now
            fresh.save(update_fields=["status", "updated_at"])
            _make_runnable(fresh, task, TaskKind.RESUME, now)
            _system_log(fresh, "info", "instance resumed")
            wake.schedule_wake()
    return fresh


def instance_terminate(*, instance: WorkflowInstance) -> WorkflowInstance:
    """Terminate the instance, wake its parent (a ChildWorkflowError there), then terminate its
    running children, each in its own transaction (locks go parent-then-child nowhere, so a
    child's runner finishing and waking us cannot deadlock with this)."""
    with transaction.atomic():
        fresh, task = _lock(instance)
        decisions.check_terminable(fresh.status)
        now = runtime.now()
        fresh.status, fresh.updated_at, fresh.completed_at = Status.TERMINATED, now, now
        fresh.save(update_fields=["status", "updated_at", "completed_at"])
        if task is not None:
            task.delete()
        if fresh.parent_id is not None:
            _execute(wake_parent(fresh.pk, now))
            wake.schedule_wake()
        _system_log(fresh, "info", "instance terminated")
    for child in WorkflowInstance.objects.filter(parent_id=fresh.pk).exclude(
        status__in=TERMINAL_STATUSES
    ):
        instance_terminate_if_running(
            workflow_name=child.workflow_name, instance_id=child.instance_id
        )
    return fresh


def instance_terminate_if_running(*, workflow_name: str, instance_id: str) -> None:
    """Terminate unless already finished (children of a terminated parent or a race's loser)."""
    child = WorkflowInstance.objects.filter(
        workflow_name=workflow_name, instance_id=instance_id
    ).first()
    if child is None or child.status in TERMINAL_STATUSES:
        return
    with contextlib.suppress(InstanceTerminal):  # finished meanwhile
        instance_terminate(instance=child)


def _execute(statement: tuple[str, list]) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(*statement)


def instance_spawn_child(
    *, parent_pk: int, workflow_name: str, instance_id: str, params
) -> WorkflowInstance:
    """step.run_workflow's child, created in the parent's boundary transaction (the caller's).
    The id is derived from the parent and the step, so it exists already only when this parent
    made it in an earlier run: a finished one is restarted for the new run, a live one kept."""
    existing = WorkflowInstance.objects.filter(
        workflow_name=workflow_name, instance_id=instance_id
    ).first()
    if existing is not None:
        if existing.parent_id != parent_pk:
            raise InstanceIdAlreadyExists(
                f"instance {instance_id!r} of {workflow_name!r} already exists"
            )
        if existing.status in TERMINAL_STATUSES:
            return instance_restart(instance=existing)
        return existing
    # Work the parent does for a user, its children do for them too (a wipe finds them).
    subject = (
        WorkflowInstance.objects.filter(pk=parent_pk).values_list("subject_id", flat=True).first()
    )
    new = NewInstance(
        workflow_name=workflow_name,
        instance_id=instance_id,
        params=params,
        parent_pk=parent_pk,
        subject=subject,
    )
    instance = create_instance(new).instance
    _system_log(instance, "info", "created as a child", {"parent_pk": parent_pk})
    return instance


def instance_restart(
    *, instance: WorkflowInstance, from_step: str | None = None
) -> WorkflowInstance:
    """Start a new run (run number + 1); earlier runs stay for audit. With `from_step`, the new
    run starts with the cached results of the steps that completed before that step in the
    current run (Cloudflare's restart `from`), so replay skips them; unknown name → UnknownStep."""
    with transaction.atomic():
        fresh, task = _lock(instance)
        kept = [] if from_step is None else _steps_before(fresh, from_step)
        now = runtime.now()
        fresh.run_number += 1
        fresh.status, fresh.output, fresh.error = Status.ACTIVE, None, None
        fresh.code_fingerprint = ""  # the new run records the code it starts on
        fresh.started_at, fresh.completed_at, fresh.updated_at = None, None, now
        fresh.save()
        for row in kept:
            row.pk, row.run_number = None, fresh.run_number
        WorkflowStep.objects.bulk_create(kept)
        # A run that starts with steps must load them: only a first START claim skips that.
        kind = TaskKind.RESUME if kept else TaskKind.START
        if task is None:
            task = _new_task(fresh, now)
            task.kind = kind
            task.save(force_insert=True)
        else:
            # A new fencing token: the previous run's runner can no longer write anything.
            WorkflowTask.objects.filter(pk=task.pk).update(
                run_number=fresh.run_number,
                kind=kind,
                priority=start_priority(fresh.priority),
                **_slot(fresh),
                run_at=dbclock.due_now(now),
                wait_event_type="",
                lock_owner="",
                locked_until=None,
                fencing_token=F("fencing_token") + 1,
                claims=0,
                recovery_attempts=0,  # a fresh count for the new run
            )
        message = f"instance restarted as run {fresh.run_number}"
        if from_step is not None:
            message += f" from step {from_step!r} ({len(kept)} step(s) kept)"
        _system_log(fresh, "info", message)
        wake.schedule_wake()
    return fresh


def _steps_before(instance: WorkflowInstance, name: str) -> list[WorkflowStep]:
    """Completed steps of the current run reached before step `name` (rows are inserted when a
    step is first reached, so id order is the order the run reached them)."""
    steps = WorkflowStep.objects.filter(instance=instance, run_number=instance.run_number)
    target = steps.filter(name=name).values_list("id", flat=True).first()
    if target is None:
        raise UnknownStep(
            f"run {instance.run_number} of {instance} has no step named {name!r}", step=name
        )
    return list(steps.filter(id__lt=target, status=StepStatus.COMPLETE).order_by("id"))


def _make_runnable(instance: WorkflowInstance, task: WorkflowTask | None, kind: str, now) -> None:
    if task is None:
        task = _new_task(instance, now)
        task.kind, task.priority = kind, TASK_PRIORITY[kind]
        task.save(force_insert=True)
        return
    WorkflowTask.objects.filter(pk=task.pk).update(
        run_at=dbclock.due_now(now), kind=kind, priority=TASK_PRIORITY[kind]
    )


def instance_send_event(
    *,
    instance: WorkflowInstance,
    type: str,  # noqa: A002 - the public name of the event's type
    payload=None,
) -> WorkflowEvent:
    """Store an event for the current run; wake the instance if it waits for this type."""
    limits.check_event_type(type)
    limits.check_json(payload, what="event payload")
    with transaction.atomic():
        fresh, task = _lock(instance)
        decisions.check_event_accepted(fresh.status)
        now = runtime.now()
        event = WorkflowEvent.objects.create(
            instance=fresh, run_number=fresh.run_number, type=type, payload=payload, created_at=now
        )
        wakes = (
            task is not None
            and task.run_at is not None  # None = paused: the event waits for resume
            and fresh.status == Status.WAITING
            and event_wakes(task.wait_event_type, type)
        )
        if wakes:
            _make_runnable(fresh, task, TaskKind.EVENT, now)
            wake.schedule_wake()
        _system_log(fresh, "info", f"event {type!r} received", {"event_id": event.pk})
    return event


def instance_status(*, instance: WorkflowInstance) -> dict:
    """{"status", "output"?, "error"?}; status is "version_missing" for a live instance whose
    version is not in this deployment's code."""
    return instance_details(instance)


compose.HOOKS.update(
    spawn_child=instance_spawn_child, terminate_if_running=instance_terminate_if_running
)
