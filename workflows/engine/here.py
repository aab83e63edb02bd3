"""instance_run_here: create an instance and run it in this process at once, as DBOS runs a
workflow it is called with; the runners take it from there once it suspends, or once its lease
lapses if this process dies."""

from dataclasses import dataclass

from workflows import concurrency, dbclock, limits, runtime, services
from workflows import engine as runner
from workflows.engine import create_statement
from workflows.engine.claim import Lease
from workflows.models import DEFAULT_PRIORITY, WorkflowInstance


@dataclass(frozen=True)
class RunHere:
    instance: WorkflowInstance
    outcome: str  # as runner.run_one's: "complete", "suspended", "errored", ...; or "queued"


def instance_run_here(
    *,
    workflow_name: str,
    instance_id: str | None = None,
    params=None,
    priority: int = DEFAULT_PRIORITY,
    labels: dict | None = None,
    owner: str | None = None,
    threaded: bool = True,
) -> RunHere:
    """Create an instance and run it here, as a runner would after claiming it, until it
    completes, fails or first suspends. A workflow with a concurrency cap is created queued
    instead (outcome "queued"): the runners' claims keep its cap. Outcome "storage_fault": the
    database failed mid-way; if the instance was written, a runner finishes it once the lease
    lapses.

    On PostgreSQL outside a transaction, once this process has seen the version active, the
    create, the claim and the run's first boundary are one statement (persist.commit_creating);
    when it writes nothing (the id exists, the pointer moved), the ORM path below decides."""
    dbclock.sync_if_stale()  # a runner does it before each claim
    now = runtime.now()
    limits.check_priority(priority)
    lease = Lease(owner or runner.default_owner(), runner.lease_seconds())
    asked = dict(
        workflow_name=workflow_name,
        instance_id=instance_id,
        params=params,
        now=now,
        priority=priority,
        labels=labels,
    )
    version = create_statement.known_active(workflow_name)
    if version is not None and create_statement.applies():
        instance = services.instance_build(version=version, **asked)
        if not _capped(instance):
            outcome = runner.run_new(instance, now, lease, task_pk=None, threaded=threaded)
            if outcome != runner.NOT_CREATED:
                return RunHere(instance, outcome)
    instance, task = services.instance_create_leased(lease=lease, **asked)
    if not task.lock_owner:
        return RunHere(instance, "queued")
    return RunHere(
        instance, runner.run_new(instance, now, lease, task_pk=task.pk, threaded=threaded)
    )


def _capped(instance: WorkflowInstance) -> bool:
    fields = concurrency.task_fields(instance.workflow_name, instance.version, instance.params)
    return bool(fields["concurrency_limit"])
