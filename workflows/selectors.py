"""Reads on workflows, shared by the HTTP API, the admin console and the commands.

Querysets are ordered by `id` so cursor pagination can use `id` as the cursor; the indexes named
in models.py back each list. Nothing here writes.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Min, Q, QuerySet

from workflows import cron, runtime
from workflows.authoring import registry
from workflows.concurrency import split_group
from workflows.errors import InstanceNotFound
from workflows.models import (
    TERMINAL_STATUSES,
    StepStatus,
    WorkflowDeployment,
    WorkflowEvent,
    WorkflowInstance,
    WorkflowInstanceLabel,
    WorkflowLog,
    WorkflowSchedule,
    WorkflowStep,
    WorkflowTask,
)

VERSION_MISSING = "version_missing"


def workflow_summaries() -> list[dict]:
    """[{"name", "versions", "active_version", "schedules"}] for every registered workflow. With
    no stored pointer, active_version is the version that will be activated on first create."""
    pointers = dict(WorkflowDeployment.objects.values_list("workflow_name", "active_version"))
    return [
        {
            "name": name,
            "versions": registry.versions(name),
            "active_version": pointers[name] if name in pointers else registry.first_version(name),
            # Only workflows with cron triggers cost a query.
            "schedules": schedules_describe(name) if registry.latest(name).schedules else [],
        }
        for name in registry.names()
    ]


def instances_for_list(
    *, workflow_name: str, status: str | None = None, labels: list[tuple[str, str]] = ()
) -> QuerySet:
    """Instances of one workflow, newest first (order_by -id; index workflow_inst_status /
    workflow_inst_name). `status` filters on the stored status; "version_missing" selects live
    instances whose version is not registered. `labels` [(key, value)]: all must match, each
    through the workflow_label_lookup index."""
    qs = WorkflowInstance.objects.filter(workflow_name=workflow_name)
    qs = with_labels(qs, labels)
    if status == VERSION_MISSING:
        live = qs.exclude(status__in=TERMINAL_STATUSES)
        return live.exclude(version__in=registry.versions(workflow_name)).order_by("-id")
    if status:
        qs = qs.filter(status=status)
    return qs.order_by("-id")


def with_labels(qs: QuerySet, labels) -> QuerySet:
    for key, value in labels:
        qs = qs.filter(
            pk__in=WorkflowInstanceLabel.objects.filter(key=key, value=value).values("instance_id")
        )
    return qs


def instance_get(*, workflow_name: str, instance_id: str) -> WorkflowInstance:
    """The instance, or InstanceNotFound (404 instance_not_found)."""
    instance = WorkflowInstance.objects.filter(
        workflow_name=workflow_name, instance_id=instance_id
    ).first()
    if instance is None:
        raise InstanceNotFound(f"no instance {instance_id!r} of workflow {workflow_name!r}")
    return instance


def instance_display_status(instance: WorkflowInstance) -> str:
    """The stored status, or "version_missing" for a live instance whose code is gone."""
    if instance.status in TERMINAL_STATUSES:
        return instance.status
    if registry.get(instance.workflow_name, instance.version) is None:
        return VERSION_MISSING
    return instance.status


def instance_code_changed(instance: WorkflowInstance) -> bool:
    """True when the deployed code of the instance's version is not the code its run started
    on (fingerprints, docs/workflows/faults.md). Unknown (not recorded yet, version missing)
    counts as unchanged."""
    from workflows.fingerprint import code_fingerprint

    definition = registry.get(instance.workflow_name, instance.version)
    if definition is None or not instance.code_fingerprint:
        return False
    return code_fingerprint(definition.fn) != instance.code_fingerprint


def instance_details(instance: WorkflowInstance) -> dict:
    """{"status", "output"?, "error"?} (same as services.instance_status)."""
    details = {"status": instance_display_status(instance)}
    if instance.status == "complete":
        details["output"] = instance.output
    if instance.status == "errored":
        details["error"] = instance.error
    return details


def instance_family(instance: WorkflowInstance) -> dict:
    """{"parent": {"workflow", "id"} | None, "children": [{"workflow", "id", "status"}]} —
    step.run_workflow's links, children oldest first (the parent FK's index)."""
    parent = None
    if instance.parent_id is not None:
        row = (
            WorkflowInstance.objects.filter(pk=instance.parent_id)
            .values("workflow_name", "instance_id")
            .first()
        )
        if row is not None:
            parent = {"workflow": row["workflow_name"], "id": row["instance_id"]}
    children = [
        {"workflow": name, "id": child_id, "status": status}
        for name, child_id, status in WorkflowInstance.objects.filter(parent_id=instance.pk)
        .order_by("id")
        .values_list("workflow_name", "instance_id", "status")
    ]
    return {"parent": parent, "children": children}


def instance_current_step(instance: WorkflowInstance) -> dict | None:
    """The step the current run is on (latest unfinished step, else the latest step), as
    {name, type, status, attempts, max_attempts, timeout_ms, next_retry_at, wake_at,
    wait_event_type, error}; None before the first step or once the instance is terminal."""
    if instance.status in TERMINAL_STATUSES:
        return None
    steps = WorkflowStep.objects.filter(instance=instance, run_number=instance.run_number)
    step = (
        # A race's cancelled losers and a loop's own row are not what the run is doing now.
        steps.exclude(status__in=[StepStatus.COMPLETE, StepStatus.CANCELLED, StepStatus.LOOPING])
        .order_by("-id")
        .first()
        or steps.order_by("-id").first()
    )
    if step is None:
        return None
    max_attempts = step.max_attempts
    return {
        "name": step.name,
        "type": step.type,
        "status": step.status,
        "attempts": step.attempts,
        "max_attempts": None
        if max_attempts is None or max_attempts == float("inf")
        else int(max_attempts),
        "timeout_ms": step.timeout_ms,
        "next_retry_at": step.next_retry_at,
        "wake_at": step.wake_at,
        "wait_event_type": step.wait_event_type or None,
        "error": step.error,
    }


def instance_meta(instance: WorkflowInstance) -> dict:
    """The `meta` block of the instance detail: identity, run, params, times, current step.
    max_attempts is None when the retry limit is infinite."""
    meta = {
        "workflow_name": instance.workflow_name,
        "version": instance.version,
        "run_number": instance.run_number,
        "params": instance.params,
        "labels": instance.labels,
        "created_at": instance.created_at,
        "updated_at": instance.updated_at,
        "started_at": instance.started_at,
        "completed_at": instance.completed_at,
    }
    current = instance_current_step(instance)
    if current is not None:
        meta["current_step"] = current
    return meta


def instance_steps(*, instance: WorkflowInstance, run_number: int | None = None) -> QuerySet:
    """Steps of one run (default: the current run) in the order they were first reached."""
    run = instance.run_number if run_number is None else run_number
    return WorkflowStep.objects.filter(instance=instance, run_number=run).order_by("id")


def instance_events(*, instance: WorkflowInstance, run_number: int | None = None) -> QuerySet:
    """Events sent during one run (default: current), oldest first, delivered or not
    (consumed_at / consumed_by_step say which step took it)."""
    run = instance.run_number if run_number is None else run_number
    return WorkflowEvent.objects.filter(instance=instance, run_number=run).order_by("id")


def instance_logs(
    *,
    instance: WorkflowInstance,
    run_number: int | None = None,
    level: str | None = None,
    category: str | None = None,
) -> QuerySet:
    """Durable log lines of one run (default: current), oldest first; index workflow_log_run."""
    run = instance.run_number if run_number is None else run_number
    qs = WorkflowLog.objects.filter(instance=instance, run_number=run)
    if level:
        qs = qs.filter(level=level)
    if category:
        qs = qs.filter(category=category)
    return qs.order_by("id")


def instance_history(*, instance: WorkflowInstance, run_number: int | None = None) -> dict:
    """{"steps", "events", "logs"} querysets of one run; see the three selectors above."""
    return {
        "steps": instance_steps(instance=instance, run_number=run_number),
        "events": instance_events(instance=instance, run_number=run_number),
        "logs": instance_logs(instance=instance, run_number=run_number),
    }


def workflow_load(*, workflow_name: str | None = None) -> dict[str, dict]:
    """Per workflow: {"running", "queued", "by_key": {key: {"running", "queued"}}}. Running =
    task leased by a runner; queued = due and not leased (for a capped workflow: waiting for a
    slot or for a runner). Keys are the concurrency_key values of capped workflows."""
    now = runtime.now()
    leased = Q(locked_until__gt=now)
    due_free = Q(run_at__lte=now) & (Q(locked_until__isnull=True) | Q(locked_until__lte=now))
    rows = WorkflowTask.objects.all()
    if workflow_name is not None:
        rows = rows.filter(instance__workflow_name=workflow_name)
    rows = (
        rows.values("instance__workflow_name", "concurrency_group")
        .annotate(running=Count("id", filter=leased), queued=Count("id", filter=due_free))
        .order_by()
    )
    out: dict[str, dict] = {}
    for row in rows:
        name = row["instance__workflow_name"]
        entry = out.setdefault(name, {"running": 0, "queued": 0, "by_key": {}})
        entry["running"] += row["running"]
        entry["queued"] += row["queued"]
        _, key = split_group(row["concurrency_group"])
        if key is not None and (row["running"] or row["queued"]):
            entry["by_key"][key] = {"running": row["running"], "queued": row["queued"]}
    return out


def retention_text(delta: timedelta) -> str:
    """A retention for people: 30 days, 12 hours, 90 seconds."""
    seconds = int(delta.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds} seconds"


def workflow_detail(*, workflow_name: str) -> dict:
    """GET /v1/workflows/{name}: versions, active version, schedules (next fire, paused),
    concurrency (cap, key, running/queued) and the retention in force."""
    versions = registry.require(workflow_name)
    pointer = (
        WorkflowDeployment.objects.filter(workflow_name=workflow_name)
        .values_list("active_version", flat=True)
        .first()
    )
    exists = WorkflowDeployment.objects.filter(workflow_name=workflow_name).exists()
    definition = registry.latest(workflow_name)
    load = workflow_load(workflow_name=workflow_name).get(
        workflow_name, {"running": 0, "queued": 0, "by_key": {}}
    )
    concurrency = None
    if definition.concurrency is not None:
        concurrency = {
            "limit": definition.concurrency,
            "key": definition.concurrency_key,
            **load,
        }
    from workflows.gc import retention_for

    retention = retention_for(workflow_name) or None  # the workflow's over the project default
    return {
        "name": workflow_name,
        "versions": versions,
        "active_version": pointer if exists else registry.first_version(workflow_name),
        "schedules": schedules_describe(workflow_name),
        "concurrency": concurrency,
        "running": load["running"],
        "queued": load["queued"],
        "retention": None
        if retention is None
        else {status: retention_text(keep) for status, keep in retention.items()},
    }


# -- cron schedules (workflows.triggers fires them) ----------------------------------------------


@dataclass(frozen=True)
class DeclaredSchedule:
    workflow_name: str
    expression: str
    timezone: str


def schedules_declared(name: str | None = None) -> list[DeclaredSchedule]:
    """The schedules in this deployment's code (of each workflow's highest version)."""
    out = []
    for workflow_name in [name] if name else registry.names():
        definition = registry.latest(workflow_name)
        if definition is None:
            continue
        for expr in definition.schedules:
            out.append(DeclaredSchedule(workflow_name, expr, definition.schedule_timezone))
    return out


def schedules_describe(workflow_name: str) -> list[dict]:
    """[{"cron", "timezone", "next_fire_at", "paused", "last_fired_at"}] of the code's schedules
    (next_fire_at computed from now for a schedule no runner has seen yet)."""
    now = runtime.now()
    rows = {r.expression: r for r in WorkflowSchedule.objects.filter(workflow_name=workflow_name)}
    any_paused = any(r.paused for r in rows.values())
    out = []
    for d in schedules_declared(workflow_name):
        row = rows.get(d.expression)
        out.append(
            {
                "cron": d.expression,
                "timezone": d.timezone,
                "next_fire_at": row.next_fire_at
                if row
                else cron.next_after(d.expression, d.timezone, now),
                "paused": row.paused if row else any_paused,
                "last_fired_at": row.last_fired_at if row else None,
            }
        )
    return out


def runner_work_waiting_since(*, now=None):
    """Since when the oldest task a runner could claim now has been due (ops.liveness: a runner
    that beats but writes no boundary while this is old is stuck): a free task since its run_at,
    a leased one whose lease ran out since the later of the two. Capped workflows' tasks are
    left out: a full group holds them back on purpose. None when nothing is due."""
    now = now or runtime.now()
    due = WorkflowTask.objects.filter(
        run_at__isnull=False, run_at__lte=now, concurrency_limit__isnull=True
    )
    free = due.filter(Q(locked_until__isnull=True)).aggregate(at=Min("run_at"))["at"]
    lapsed = due.filter(locked_until__lte=now).aggregate(at=Min("locked_until"))["at"]
    found = [at for at in (free, lapsed) if at is not None]
    return min(found) if found else None
