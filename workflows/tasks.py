"""django-q2 entry points: a wake task enqueued after commit whenever work becomes runnable,
`sweep` for the one-minute schedule that catches everything else (timers, lost wakes), and `gc`
for the daily retention schedule."""

import logging
import time

from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

WAKE_MAX_INSTANCES = 50
SWEEP_SECONDS = 50  # stay under the one-minute schedule so sweeps do not pile up


def wake_enabled() -> bool:
    """WORKFLOWS_WAKE_TASKS=False (tests, benches) keeps services from enqueueing wake tasks."""
    return bool(getattr(settings, "WORKFLOWS_WAKE_TASKS", True))


def schedule_wake(*, notified: bool = False) -> None:
    """Work became runnable: NOTIFY idle runners (PostgreSQL, delivered at commit;
    runner/wake.py) and enqueue one wake task after the current transaction commits (never
    for rolled-back work). `notified`: the caller's own statement called pg_notify."""
    from workflows.runner.wake import notify

    if not notified:
        notify()
    if wake_enabled():
        transaction.on_commit(_enqueue_wake)


def _enqueue_wake() -> None:
    from django_q.tasks import async_task

    try:
        async_task("workflows.tasks.wake", q_options={"task_name": "workflows.wake"})
    except Exception:  # the sweep and runworkflows still pick the work up
        log.exception("could not enqueue a workflows wake task")


def wake(max_instances: int = WAKE_MAX_INSTANCES) -> int:
    """Run due work now (called by the django-q2 cluster)."""
    from workflows.runner import tick

    return tick(max_instances=max_instances)


def sweep(seconds: float = SWEEP_SECONDS) -> int:
    """Run due work until none is left or `seconds` pass (the one-minute schedule)."""
    from workflows.runner import tick

    deadline = time.monotonic() + seconds
    processed = 0
    while time.monotonic() < deadline:
        done = tick(max_instances=WAKE_MAX_INSTANCES)
        processed += done
        if done == 0:
            break
    return processed


def gc() -> dict:
    """Daily: delete finished instances past retention and prune old log lines (workflows.gc);
    the counts go to the audit log and the task result."""
    from workflows.gc import gc_record, gc_run

    report = gc_run()
    gc_record(report)
    return report.as_dict()
