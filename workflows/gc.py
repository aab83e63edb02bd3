"""Retention and garbage collection of finished instances.

A finished instance (complete, errored, terminated) is deleted with its steps, events, logs,
task and anything else that cascades from it (graph runs) once `completed_at` is older than the
retention of its workflow and status: the workflow's `@workflow(retention={...})`, status by
status, over the project default `WORKFLOWS_RETENTION` (unset = keep forever). Log lines of
kept instances older than `WORKFLOWS_LOG_RETENTION` are pruned by the same run.

Deletion goes in batches of WORKFLOWS_GC_BATCH_SIZE instances, one short transaction each, so a
run over a million rows never holds locks for long and runners keep going. Selection walks the
partial index workflow_inst_finished (workflow, status, completed_at); logs walk
workflow_log_created. The daily `workflows-gc` schedule (workflows.tasks.gc) runs it and writes
an audit row with the counts; `manage.py workflows gc --dry-run` prints what it would delete.
"""

import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet

from workflows import durations, runtime
from workflows.authoring import RETENTION_STATUSES, registry, retention_policy
from workflows.models import (
    WorkflowDeployment,
    WorkflowEvent,
    WorkflowInstance,
    WorkflowInstanceLabel,
    WorkflowLog,
    WorkflowStep,
    WorkflowTask,
)

log = logging.getLogger(__name__)

LOG_BATCH_FACTOR = 10  # log lines are small and many: delete ten times as many per batch
CHILD_LABELS = {
    WorkflowInstance._meta.label: "instances",
    WorkflowStep._meta.label: "steps",
    WorkflowEvent._meta.label: "events",
    WorkflowLog._meta.label: "logs",
    WorkflowTask._meta.label: "tasks",
    WorkflowInstanceLabel._meta.label: "labels",
}


@dataclass(frozen=True)
class Target:
    """Instances of one workflow and status that finished before `cutoff`."""

    workflow_name: str
    status: str
    keep: timedelta
    cutoff: datetime


@dataclass
class GcReport:
    dry_run: bool
    # (workflow, status) -> instances deleted (or that would be)
    instances: dict[tuple[str, str], int] = field(default_factory=dict)
    rows: Counter = field(default_factory=Counter)  # "steps", "logs", ... -> rows deleted
    log_lines_pruned: int = 0
    targets: list[Target] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "dry_run": self.dry_run,
            "instances": {f"{name}/{status}": n for (name, status), n in self.instances.items()},
            "rows": dict(self.rows),
            "log_lines_pruned": self.log_lines_pruned,
        }


def default_retention() -> dict[str, timedelta]:
    return retention_policy(getattr(settings, "WORKFLOWS_RETENTION", None), durations) or {}


def retention_for(workflow_name: str) -> dict[str, timedelta]:
    """status -> how long finished instances are kept; statuses absent are kept forever."""
    definition = registry.latest(workflow_name)
    own = (definition.retention if definition else None) or {}
    return {**default_retention(), **own}


def targets(now: datetime) -> list[Target]:
    """What to collect: every workflow the code or the database knows, with its retention. A
    workflow removed from the code still has its deployment row and gets the project default."""
    names = set(registry.names()) | set(
        WorkflowDeployment.objects.values_list("workflow_name", flat=True)
    )
    out = []
    for name in sorted(names):
        for status, keep in sorted(retention_for(name).items()):
            if status in RETENTION_STATUSES:
                out.append(Target(name, status, keep, now - keep))
    return out


def expired(target: Target) -> QuerySet:
    """Instances of the target past retention (index workflow_inst_finished)."""
    return WorkflowInstance.objects.filter(
        workflow_name=target.workflow_name,
        status=target.status,
        completed_at__lt=target.cutoff,
    )


def gc_run(*, dry_run: bool = False, now: datetime | None = None, batch_size=None) -> GcReport:
    """Delete (or with dry_run count) instances past retention and log lines past
    WORKFLOWS_LOG_RETENTION. Returns the counts."""
    now = now or runtime.now()
    batch_size = batch_size or settings.WORKFLOWS_GC_BATCH_SIZE
    report = GcReport(dry_run=dry_run, targets=targets(now))
    for target in report.targets:
        if dry_run:
            n, rows = _count(target)
        else:
            n, rows = _delete(target, batch_size)
        if n:
            report.instances[(target.workflow_name, target.status)] = n
            report.rows.update(rows)
    log_keep = getattr(settings, "WORKFLOWS_LOG_RETENTION", None)
    if log_keep:
        report.log_lines_pruned = logs_prune(
            cutoff=now - log_keep, batch_size=batch_size * LOG_BATCH_FACTOR, dry_run=dry_run
        )
    return report


def _count(target: Target) -> tuple[int, Counter]:
    qs = expired(target)
    rows = Counter(
        steps=WorkflowStep.objects.filter(instance__in=qs).count(),
        events=WorkflowEvent.objects.filter(instance__in=qs).count(),
        logs=WorkflowLog.objects.filter(instance__in=qs).count(),
        tasks=WorkflowTask.objects.filter(instance__in=qs).count(),
    )
    n = qs.count()
    rows["instances"] = n
    return n, +rows


def _delete(target: Target, batch_size: int) -> tuple[int, Counter]:
    rows: Counter = Counter()
    while True:
        ids = list(
            expired(target).order_by("completed_at").values_list("id", flat=True)[:batch_size]
        )
        if not ids:
            break
        deleted = _delete_batch(target, ids)
        if not deleted:
            break  # every row of the batch is locked by someone else: the next run gets it
        rows.update(deleted)
    return rows["instances"], rows


def _delete_batch(target: Target, ids: list[int]) -> Counter:
    """One short transaction: re-check the rows (an operator may have restarted one since the
    selection), lock them on PostgreSQL (skipping rows a restart holds), delete them and every
    row cascading from them."""
    with transaction.atomic():
        still = expired(target).filter(id__in=ids)
        if connection.vendor == "postgresql":
            still = still.select_for_update(skip_locked=True)
        locked = list(still.values_list("id", flat=True))
        if not locked:
            return Counter()
        _, per_model = WorkflowInstance.objects.filter(id__in=locked).only("id").delete()
    return Counter({CHILD_LABELS.get(label, label): n for label, n in per_model.items() if n})


def logs_prune(*, cutoff: datetime, batch_size: int, dry_run: bool = False) -> int:
    """Log lines written before `cutoff` (index workflow_log_created), in batches."""
    old = WorkflowLog.objects.filter(created_at__lt=cutoff)
    if dry_run:
        return old.count()
    total = 0
    while True:
        ids = list(old.order_by("created_at").values_list("id", flat=True)[:batch_size])
        if not ids:
            return total
        total += WorkflowLog.objects.filter(id__in=ids).delete()[0]
