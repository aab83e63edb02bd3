"""Operator actions on workflows, one do_* function per state change (Zulip's style): each calls
one engine service and writes the one audit row that says how it went, in the change's
transaction. The HTTP API, the admin console and `manage.py workflows` all come through here;
nothing else in workflows writes audit rows, and the engine's services take no actor.

Refusals are audited too (with their code), then raised: a refused terminate is exactly what an
incident review wants to see. Audit rows name instances and steps and keep counts, never params,
payloads or outputs (they may hold health data).
"""

from contextlib import contextmanager, nullcontext

from django.db import transaction

from ops import bulk
from ops.errors import ApiError
from ops.models import AuditLog, BulkJob
from ops.services import actor_for, audit_log_write
from workflows import gc, recovery, rollout, services, triggers
from workflows.bulk import BULK_ACTIONS, bulk_filters_clean
from workflows.engine import tick
from workflows.errors import InvalidBulkFilter
from workflows.models import WorkflowInstance


def instance_resource(workflow_name: str, instance_id: str | None = None) -> str:
    if instance_id is None:
        return f"workflow:{workflow_name}"
    return f"workflow_instance:{workflow_name}/{instance_id}"


def _resource(instance: WorkflowInstance) -> str:
    return instance_resource(instance.workflow_name, instance.instance_id)


def audit(
    *,
    action: str,
    resource: str,
    request=None,
    actor: str | None = None,
    result: str = "ok",
    metadata: dict | None = None,
    deduplicated: bool = False,
) -> AuditLog:
    return audit_log_write(
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
def _audited(*, action: str, resource: str, request, actor, metadata=None, atomic: bool = True):
    """`with _audited(...) as facts:` runs the block and its "ok" audit row in ONE transaction,
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


# -- one instance ------------------------------------------------------------------------------


def _instance_action(action: str, instance, request, actor, service, metadata=None, **options):
    with _audited(
        action=f"workflow_instance.{action}",
        resource=_resource(instance),
        request=request,
        actor=actor,
        metadata=metadata,
    ):
        return service(instance=instance, **options)


def do_pause(*, instance: WorkflowInstance, request=None, actor=None) -> WorkflowInstance:
    return _instance_action("pause", instance, request, actor, services.instance_pause)


def do_resume(*, instance: WorkflowInstance, request=None, actor=None) -> WorkflowInstance:
    return _instance_action("resume", instance, request, actor, services.instance_resume)


def do_terminate(*, instance: WorkflowInstance, request=None, actor=None) -> WorkflowInstance:
    return _instance_action("terminate", instance, request, actor, services.instance_terminate)


def do_restart(
    *, instance: WorkflowInstance, from_step: str | None = None, request=None, actor=None
) -> WorkflowInstance:
    """A new run; with `from_step`, the results of the steps completed before it are kept."""
    metadata = {} if from_step is None else {"from_step": from_step}
    return _instance_action(
        "restart",
        instance,
        request,
        actor,
        services.instance_restart,
        metadata,
        from_step=from_step,
    )


def do_retry_now(*, instance: WorkflowInstance, request=None, actor=None) -> WorkflowInstance:
    """Wake the step waiting out its retry delay now (the attempt count stays); 409
    not_in_backoff when there is none. Returns the fresh instance."""
    with _audited(
        action="workflow_instance.retry_now",
        resource=_resource(instance),
        request=request,
        actor=actor,
    ) as facts:
        step = recovery.instance_retry_now(instance=instance)
        facts.update(step=step.name, attempts=step.attempts)
    instance.refresh_from_db()
    return instance


def do_skip_wait(*, instance: WorkflowInstance, request=None, actor=None) -> WorkflowInstance:
    """Complete the sleeping step now; 409 not_sleeping when there is none."""
    with _audited(
        action="workflow_instance.skip_wait",
        resource=_resource(instance),
        request=request,
        actor=actor,
    ) as facts:
        step = recovery.instance_skip_wait(instance=instance)
        facts["step"] = step.name
    instance.refresh_from_db()
    return instance


INSTANCE_ACTIONS = {
    "pause": do_pause,
    "resume": do_resume,
    "terminate": do_terminate,
    "restart": do_restart,
    "retry_now": do_retry_now,
    "skip_wait": do_skip_wait,
}


def do_instance_action(
    *, instance: WorkflowInstance, action: str, request=None, actor=None, **options
):
    """One of INSTANCE_ACTIONS by name (views and commands that route on a path segment)."""
    return INSTANCE_ACTIONS[action](instance=instance, request=request, actor=actor, **options)


def do_send_event(
    *, instance: WorkflowInstance, event_type: str, payload=None, request=None, actor=None
):
    """The audit row keeps the event's type, never its payload."""
    with _audited(
        action="workflow_instance.send_event",
        resource=_resource(instance),
        request=request,
        actor=actor,
        metadata={"type": event_type},
    ):
        return services.instance_send_event(instance=instance, type=event_type, payload=payload)


def do_create(
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
    with _audited(
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


def do_create_batch(*, workflow_name: str, items: list[dict], request=None, actor=None):
    with _audited(
        action="workflow_instance.create_batch",
        resource=instance_resource(workflow_name),
        request=request,
        actor=actor,
        metadata={"requested": len(items)},
    ) as facts:
        created = services.instance_create_batch(workflow_name=workflow_name, items=items)
        facts["created"] = [i.instance_id for i in created]
        return created


# -- workflows and the fleet -------------------------------------------------------------------


def _set_disabled(name: str, disabled: bool, *, request, actor, reason: str):
    metadata = {"reason": reason[:500]} if reason else {}
    with _audited(
        action="workflow.disable" if disabled else "workflow.enable",
        resource=f"workflow:{name}",
        request=request,
        actor=actor,
        metadata=metadata,
    ) as facts:
        row, facts["changed"] = rollout.set_disabled(name=name, disabled=disabled)
        return row


def do_disable_workflow(*, name: str, request=None, actor=None, reason: str = ""):
    """New instances of `name` refused (409 `disabled`); running ones continue."""
    return _set_disabled(name, True, request=request, actor=actor, reason=reason)


def do_enable_workflow(*, name: str, request=None, actor=None, reason: str = ""):
    return _set_disabled(name, False, request=request, actor=actor, reason=reason)


def do_activate_version(*, workflow_name: str, version: int, request=None, actor=None):
    with _audited(
        action="workflow.version_activate",
        resource=instance_resource(workflow_name),
        request=request,
        actor=actor,
        metadata={"version": version},
    ):
        return services.workflow_version_activate(name=workflow_name, version=version)


def do_runner_tick(*, max_instances: int = 10, max_steps=None, request=None, actor=None) -> int:
    with _audited(
        action="workflow.runner_tick",
        resource="workflow_runner",
        request=request,
        actor=actor,
        atomic=False,  # the tick commits every step boundary on its own
    ) as facts:
        processed = tick(max_instances=max_instances, max_steps=max_steps)
        facts["processed"] = processed
        return processed


def do_schedules(*, workflow_name: str, action: str, request=None, actor=None) -> int:
    """pause | resume every cron schedule of a workflow; returns how many rows changed."""
    with _audited(
        action=f"workflow.schedules_{action}",
        resource=instance_resource(workflow_name),
        request=request,
        actor=actor,
    ) as facts:
        changed = getattr(triggers, action)(workflow_name=workflow_name)
        facts["changed"] = changed
        return changed


def do_gc(*, dry_run: bool = False, batch_size=None, actor: str = "system:gc") -> gc.GcReport:
    """Retention's clean-up; a real run is audited with its counts (a dry run changes nothing,
    so it writes none)."""
    report = gc.gc_run(dry_run=dry_run, batch_size=batch_size)
    if not report.dry_run:
        audit(
            action="workflows.gc",
            resource="workflow_instance",
            actor=actor,
            metadata=report.as_dict(),
        )
    return report


# -- many instances, chosen by a filter --------------------------------------------------------


def do_bulk(
    *, action: str, filters: dict, request=None, actor=None, inline: bool = False
) -> BulkJob:
    """`action` on every instance the filter matches whose status allows it, as a tracked job
    (ops.bulk) with ONE audit row: written now with the filter and the count, completed with
    the outcome when the job ends (ops.bulk.bulk_job_audit_complete). `inline` runs it here."""
    if action not in BULK_ACTIONS:
        raise InvalidBulkFilter(f"bulk action must be one of {list(BULK_ACTIONS)}, got {action!r}")
    filters = bulk_filters_clean(filters)
    actor = actor or actor_for(request)
    with transaction.atomic():
        job = bulk.bulk_job_create(kind=BULK_ACTIONS[action], filters=filters, actor=actor)
        row = audit(
            action=f"workflow_instance.bulk_{action}",
            resource=f"bulk_job:{job.pk}",
            request=request,
            actor=actor,
            result=job.state,
            metadata=bulk.bulk_job_outcome(job),
        )
        job.audit_id = row.pk
        job.save(update_fields=["audit_id"])
    bulk.bulk_job_start(job, inline=inline)
    job.refresh_from_db()
    return job
