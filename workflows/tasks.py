"""django-q2 entry points: `wake`, enqueued after commit whenever work becomes runnable
(engine/wake.py), `sweep` for the one-minute schedule that catches everything else (timers, lost
wakes), and `gc` for the daily retention schedule."""

import logging
import time

from workflows.engine import tick

log = logging.getLogger(__name__)

WAKE_MAX_INSTANCES = 50
SWEEP_SECONDS = 50  # stay under the one-minute schedule so sweeps do not pile up


def wake(max_instances: int = WAKE_MAX_INSTANCES) -> int:
    """Run due work now (called by the django-q2 cluster)."""
    return tick(max_instances=max_instances)


def sweep(seconds: float = SWEEP_SECONDS) -> int:
    """Run due work until none is left or `seconds` pass (the one-minute schedule)."""
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
    from workflows.actions import do_gc  # audited like the command's run

    report = do_gc(actor="system:gc")
    log.info("workflows gc: %s", report.as_dict())
    return report.as_dict()
