"""Operator operations shared by the HTTP API, the admin console and `manage.py workflows`:
each calls one engine service and writes one audit row that says how it went.

Why audit here and not only in the engine: the row must carry what only the caller knows (the
idempotency key, whether the answer was a deduplicated replay) and failed attempts must be
recorded too — a refused terminate is exactly what an incident review wants to see. The engine
services are therefore called without actor/request (they write no row of their own), except
`workflow_version_activate`, which always writes one: there we complete that row instead of
adding a second.
"""

from contextlib import contextmanager, nullcontext

from django.db import transaction
from django.db.models import Max

from ops.errors import ApiError
from ops.models import AuditLog
from ops.request_id import get_request_id
from ops.services import audit_log_write
from workflows import runner, services
from workflows.models import WorkflowInstance

ACTIONS = {
    "pause": services.instance_pause,
    "resume": services.instance_resume,
    "terminate": services.instance_terminate,
    "restart": services.instance_restart,
}


def _request_id() -> str:
    current = get_request_id()
    return "" if current == "-" else current


def instance_resource(workflow_name: str, instance_id: str | None = None) -> str:
    # Same shape as the engine's own audit rows, so one filter finds both.
    if instance_id is None:
        return f"workflow:{workflow_name}"
    return f"workflow_instance:{workflow_name}/{instance_id}"


def audit(
    *,
    action: str,
    resource: str,
    request=None,
    actor: str | None = None,
    result: str = "ok",
    metadata: dict | None = None,
    deduplicated: bool = False,
) -> None:
    audit_log_write(
        action=action,
        resource=resource,
        result=result,
        request=request,
        actor=actor,
        metadata=metadata,
        idempotency_key=getattr(request, "idempotency_key", "") or "",
        deduplicated=deduplicated,
    )


@contextmanager
def audited(
    *, action: str, resource: str, request=None, actor=None, metadata=None, atomic: bool = True
):
    """`with audited(...) as facts:` runs the block and its "ok" audit row in ONE transaction,
    so a change never commits without its row (nor a row without its change). A refusal
    (ApiError, WorkflowError included) rolls the block back and is audited with its code.
    `atomic=False` only for blocks that commit in many transactions of their own (the tick)."""
    facts = dict(metadata or {})  # the block may add facts (created ids) to the row
    row = {"action": action, "resource": resource, "request": request, "actor": actor}
    try:
        with transaction.atomic() if atomic else nullcontext():
            yield facts
            audit(**row, metadata=facts)
    except ApiError as exc:
        audit(**row, result=exc.code, metadata={**facts, "error": exc.message})
        raise


def instance_action(
    *, instance: WorkflowInstance, action: str, request=None, actor=None, **options
):
    """pause | resume | terminate | restart one instance; returns the fresh row. `options` are
    the action's own (restart: from_step)."""
    with audited(
        action=f"workflow_instance.{action}",
        resource=instance_resource(instance.workflow_name, instance.instance_id),
        request=request,
        actor=actor,
        metadata={k: v for k, v in options.items() if v is not None},
    ):
        return ACTIONS[action](instance=instance, **options)


def instance_create(
    *,
    workflow_name: str,
    instance_id=None,
    params=None,
    priority=5,
    labels=None,
    version=None,
    subject=None,
    request=None,
    actor=None,
):
    with audited(
        action="workflow_instance.create",
        resource=instance_resource(workflow_name, instance_id),
        request=request,
        actor=actor,
    ) as facts:
        instance = services.instance_create(
            workflow_name=workflow_name,
            instance_id=instance_id,
            params=params,
            priority=priority,
            labels=labels,
            version=version,
            subject=subject,
        )
        facts["instance_id"] = instance.instance_id
        return instance


def instance_create_batch(*, workflow_name: str, items: list[dict], request=None, actor=None):
    with audited(
        action="workflow_instance.create_batch",
        resource=instance_resource(workflow_name),
        request=request,
        actor=actor,
        metadata={"requested": len(items)},
    ) as facts:
        created = services.instance_create_batch(workflow_name=workflow_name, items=items)
        facts["created"] = [i.instance_id for i in created]
        return created


def event_send(
    *, instance: WorkflowInstance, event_type: str, payload=None, request=None, actor=None
):
    with audited(
        action="workflow_instance.send_event",
        resource=instance_resource(instance.workflow_name, instance.instance_id),
        request=request,
        actor=actor,
        metadata={"type": event_type},
    ):
        return services.instance_send_event(instance=instance, type=event_type, payload=payload)


def version_activate(*, workflow_name: str, version: int, request=None, actor=None):
    action, resource = "workflow.version_activate", instance_resource(workflow_name)
    before = AuditLog.objects.aggregate(last=Max("id"))["last"] or 0
    try:
        deployment = services.workflow_version_activate(
            name=workflow_name, version=version, actor=actor, request=request
        )
    except ApiError as exc:
        audit(
            action=action,
            resource=resource,
            request=request,
            actor=actor,
            result=exc.code,
            metadata={"version": version, "error": exc.message},
        )
        raise
    # The engine wrote the success row in its transaction; add what only we know.
    written = AuditLog.objects.filter(
        pk__gt=before, action=action, resource=resource, request_id=_request_id()
    )
    if not written.update(idempotency_key=getattr(request, "idempotency_key", "") or ""):
        audit(
            action=action,
            resource=resource,
            request=request,
            actor=actor,
            metadata={"version": version},
        )
    return deployment


def runner_tick(*, max_instances: int = 10, max_steps=None, request=None, actor=None) -> int:
    with audited(
        action="workflow.runner_tick",
        resource="workflow_runner",
        request=request,
        actor=actor,
        atomic=False,  # the tick commits every step boundary on its own
    ) as facts:
        processed = runner.tick(max_instances=max_instances, max_steps=max_steps)
        facts["processed"] = processed
        return processed


def schedules_action(*, workflow_name: str, action: str, request=None, actor=None) -> int:
    """pause | resume every cron schedule of a workflow; returns how many rows changed."""
    from workflows import triggers

    with audited(
        action=f"workflow.schedules_{action}",
        resource=instance_resource(workflow_name),
        request=request,
        actor=actor,
    ) as facts:
        changed = getattr(triggers, action)(workflow_name=workflow_name)
        facts["changed"] = changed
        return changed
