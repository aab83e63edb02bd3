"""The runner: claim due tasks (claim.py), replay and persist them (execute.py, persist.py).

`tick()` is the unit every entry point shares: the django-q2 wake task, the sweep schedule,
`manage.py runworkflows` and H5's `POST /v1/workflows/_runner/tick`.
"""

import logging
import os
import socket

from django.conf import settings

from ops import tracing
from ops.request_id import log_context, reset_request_id, set_request_id
from workflows import dbclock, runtime, triggers
from workflows.engine import storage_faults
from workflows.engine.claim import Claim, Lease, Loaded, claim_next, release_after_fault
from workflows.engine.claim import next_due_at as next_task_due_at
from workflows.engine.execute import NOT_CREATED, Budget, execute
from workflows.engine.persist import Creating
from workflows.engine.results import roundtrip
from workflows.engine.storage_faults import StorageFault
from workflows.models import TaskKind

log = logging.getLogger(__name__)

__all__ = [
    "tick",
    "run_one",
    "run_new",
    "next_due_at",
    "default_owner",
    "STORAGE_FAULT",
    "NOT_CREATED",
]

STORAGE_FAULT = "storage_fault"


def default_owner() -> str:
    """A lock owner that names the process, so operators can tell runners apart."""
    return f"{socket.gethostname()[:30]}:{os.getpid()}:{runtime.new_id()[:8]}"


def lease_seconds() -> float:
    return float(getattr(settings, "WORKFLOWS_LEASE_SECONDS", 30))


def next_due_at():
    """When the earliest task or cron fire time falls due (runner idle sleeps): a schedule
    wakes an idle runner exactly as a sleep does."""
    times = [t for t in (next_task_due_at(), triggers.next_fire_at()) if t is not None]
    return min(times) if times else None


def run_one(*, owner: str, threaded: bool = True, budget: Budget | None = None) -> str | None:
    """Claim one due task and run it; None when nothing is due. Engine bugs are logged and the
    lease left to expire, so another runner retries the task instead of this process dying.
    Due cron schedules are fired first (cheap unless one may be due).

    STORAGE_FAULT: the database failed under the engine's own work (claim, load, boundary
    commit, completion). Nothing about the instance changed; the connection is dropped, the
    lease given back when the database answers again, and the caller backs off."""
    try:
        dbclock.sync_if_stale()  # before anything reads the clock, cron fire times included
        _fire_schedules()
        got = claim_next(owner=owner, lease_seconds=lease_seconds())
    except Exception as exc:
        if not storage_faults.is_storage_fault(exc):
            raise
        log.warning("runner %s: storage fault while claiming: %s", owner, exc)
        storage_faults.drop_connection()
        return STORAGE_FAULT
    if got is None:
        return None
    claim, loaded = got
    return _run_claimed(claim, loaded, threaded=threaded, budget=budget)


def run_new(instance, now, lease: Lease, *, task_pk: int | None, threaded: bool = True) -> str:
    """Run a new instance whose first task is leased to `lease.owner`, as a runner would after
    claiming it (engine/here.py): the task exists (`task_pk`), or None and the run's
    first boundary creates instance and task (persist.Creating; NOT_CREATED if that wrote
    nothing). Returns what happened, as run_one does."""
    claim = Claim(
        task_pk=task_pk,
        instance_pk=instance.pk,
        run_number=instance.run_number,
        fencing_token=1,
        kind=TaskKind.START,
        owner=lease.owner,
        lease_seconds=lease.seconds,
        recovery_attempts=lease.recovery_attempts,
    )
    loaded = Loaded(
        workflow_name=instance.workflow_name,
        instance_id=instance.instance_id,
        version=instance.version,
        params=roundtrip(instance.params),  # as a claim would read them back
        created_at=instance.created_at,
        request_id=instance.request_id,
    )
    creating = Creating(instance, now, lease) if task_pk is None else None
    return _run_claimed(claim, loaded, threaded=threaded, creating=creating)


def _run_claimed(
    claim: Claim,
    loaded: Loaded,
    *,
    threaded: bool,
    budget: Budget | None = None,
    creating: Creating | None = None,
) -> str:
    token = set_request_id(loaded.request_id or "-")
    # Log lines of the run (the engine's and the steps' own) name the instance they are about.
    context = log_context(
        workflow=loaded.workflow_name,
        workflow_instance_id=loaded.instance_id,
        workflow_run=claim.run_number,
    )
    attributes = {
        "workflow": loaded.workflow_name,
        "workflow.instance_id": loaded.instance_id,
        "workflow.run_number": claim.run_number,
        "workflow.version": loaded.version,
        "workflow.task_kind": claim.kind,
        "request_id": loaded.request_id if loaded.request_id not in ("", "-") else None,
    }
    try:
        with context, tracing.span("workflow.run", attributes) as span:
            try:
                outcome = execute(
                    claim, loaded, threaded=threaded, budget=budget, creating=creating
                )
            except (StorageFault, Exception) as exc:
                if not storage_faults.is_storage_fault(exc):
                    log.exception(
                        "runner failed on %s/%s", loaded.workflow_name, loaded.instance_id
                    )
                    tracing.fail(span, exc)
                    outcome = "crashed"
                else:
                    log.warning(
                        "storage fault on %s/%s, will be claimed again: %s",
                        loaded.workflow_name,
                        loaded.instance_id,
                        exc,
                    )
                    storage_faults.drop_connection()
                    if creating is not None:  # unknown whether it was created: its lease lapses
                        claim = creating.claim
                    if claim is not None:
                        release_after_fault(claim)
                    outcome = STORAGE_FAULT
            tracing.set_attributes(span, {"workflow.outcome": outcome})
            return outcome
    finally:
        reset_request_id(token)


def _fire_schedules() -> None:
    try:
        triggers.maybe_fire()
    except Exception:  # a broken schedule must not stop the runner; the next call retries
        log.exception("firing cron schedules failed")


def tick(
    *,
    max_instances: int = 10,
    max_steps: int | None = None,
    owner: str | None = None,
    threaded: bool = True,
) -> int:
    """Run up to `max_instances` due tasks (and at most `max_steps` step attempts); returns how
    many tasks were processed. Safe to call from any number of processes at once."""
    owner = owner or default_owner()
    budget = Budget(max_steps)
    processed = 0
    while processed < max_instances:
        if budget.steps is not None and budget.steps <= 0:
            break
        # Nothing due, or the database failed: the next wake, sweep or tick tries again.
        if run_one(owner=owner, threaded=threaded, budget=budget) in (None, STORAGE_FAULT):
            break
        processed += 1
    return processed
