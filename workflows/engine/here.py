"""instance_run_here: create an instance and run it in this process at once, as DBOS runs a
workflow it is called with; the runners take it from there once it suspends, or once its lease
lapses if this process dies."""

from dataclasses import dataclass

from workflows import dbclock
from workflows import engine as runner
from workflows.engine.claim import Lease
from workflows.engine.create import NewInstance, create_instance, forget_active
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

    When create_instance defers the write (PostgreSQL, autocommit), the create, the claim and
    the run's first boundary are one statement (persist.commit_creating); when that writes
    nothing (the id exists, the pointer moved), create_instance is asked again after forgetting
    the version, and its ORM path decides."""
    dbclock.sync_if_stale()  # a runner does it before each claim
    lease = Lease(owner or runner.default_owner(), runner.lease_seconds())
    new = NewInstance(
        workflow_name=workflow_name,
        instance_id=instance_id,
        params=params,
        priority=priority,
        labels=labels,
    )
    created = create_instance(new, lease=lease)
    if created.deferred:
        outcome = runner.run_new(
            created.instance, created.now, lease, task_pk=None, threaded=threaded
        )
        if outcome != runner.NOT_CREATED:
            return RunHere(created.instance, outcome)
        forget_active(workflow_name)
        created = create_instance(new, lease=lease)
    if not created.leased:
        return RunHere(created.instance, "queued")
    run = runner.run_new(
        created.instance, created.now, lease, task_pk=created.task_pk, threaded=threaded
    )
    return RunHere(created.instance, run)
