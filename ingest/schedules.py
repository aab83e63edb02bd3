"""django-q2 schedules and the task functions they point at.

`schedules_setup()` (manage.py setup_schedules) creates or updates the rows by name, so running
it twice leaves the same rows; it is never called from ready() (django-q2 would race itself).
"""

import importlib
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import time as dt_time

from django.db import transaction
from django.utils import timezone
from django_q.models import Schedule

from ingest.connections import RECONCILE_DAYS, connections_backfill_recent
from ingest.drain import raw_events_drain
from ingest.traces import trace_write, traces_delete_expired
from ops.models import IdempotencyKey

log = logging.getLogger(__name__)

DRAIN = "terra-drain"
RECONCILE = "terra-reconcile"
CLEANUP = "ingest-cleanup"
WORKFLOW_SWEEP = "workflows-sweep"
WORKFLOW_GC = "workflows-gc"


def drain_task() -> dict:
    """Every 5 minutes: re-enqueue what got stuck (the spine's drain, default filters)."""
    began = time.perf_counter()
    summary = raw_events_drain().as_dict()
    trace_write(
        "drain_run",
        duration_ms=round((time.perf_counter() - began) * 1000, 2),
        data={k: v for k, v in summary.items() if k != "ids"} | {"source": "schedule"},
    )
    return summary


def reconcile_task(days: int = RECONCILE_DAYS) -> dict:
    """Daily at 03:00: ask Terra to re-send the last week of every active connection."""
    return connections_backfill_recent(days=days)


def cleanup_task() -> dict:
    """Daily: expired idempotency keys and traces past their retention."""
    keys, _ = IdempotencyKey.objects.filter(expires_at__lt=timezone.now()).delete()
    traces = traces_delete_expired()
    summary = {"idempotency_keys": keys, "traces": traces}
    log.info("cleanup: %s", summary)
    return summary


@dataclass(frozen=True)
class Spec:
    name: str
    func: str
    schedule_type: str
    minutes: int | None = None
    at: dt_time | None = None  # daily schedules: wall-clock time (UTC)


def _next_daily(at: dt_time) -> datetime:
    now = timezone.now()
    candidate = now.replace(hour=at.hour, minute=at.minute, second=0, microsecond=0)
    return candidate if candidate > now else candidate + timedelta(days=1)


def _workflows_task(name: str):
    try:
        return getattr(importlib.import_module("workflows.tasks"), name)
    except (ImportError, AttributeError):
        return None


def schedule_specs() -> list[Spec]:
    specs = [
        Spec(DRAIN, "ingest.schedules.drain_task", Schedule.MINUTES, minutes=5),
        Spec(RECONCILE, "ingest.schedules.reconcile_task", Schedule.DAILY, at=dt_time(3, 0)),
        Spec(CLEANUP, "ingest.schedules.cleanup_task", Schedule.DAILY, at=dt_time(3, 30)),
    ]
    # The workflow engine's sweep and GC, when that app provides them (ingest must not require it).
    if callable(_workflows_task("sweep")):
        specs.append(Spec(WORKFLOW_SWEEP, "workflows.tasks.sweep", Schedule.MINUTES, minutes=1))
    if callable(_workflows_task("gc")):
        specs.append(Spec(WORKFLOW_GC, "workflows.tasks.gc", Schedule.DAILY, at=dt_time(4, 0)))
    return specs


def schedules_setup() -> list[tuple[Schedule, bool]]:
    """Create or update every schedule by name; returns (row, created) pairs. A re-run keeps an
    existing row's next_run, so it neither fires early nor skips a run."""
    out = []
    with transaction.atomic():
        for spec in schedule_specs():
            fields = {
                "func": spec.func,
                "schedule_type": spec.schedule_type,
                "minutes": spec.minutes,
                "repeats": -1,
            }
            row = Schedule.objects.filter(name=spec.name).order_by("id").first()
            created = row is None
            if created:
                first = _next_daily(spec.at) if spec.at else timezone.now()
                row = Schedule.objects.create(name=spec.name, next_run=first, **fields)
            else:
                changed = [k for k, v in fields.items() if getattr(row, k) != v]
                for key in changed:
                    setattr(row, key, fields[key])
                if changed:
                    row.save(update_fields=changed)
                # Older runs of this command may have left duplicates with the same name.
                Schedule.objects.filter(name=spec.name).exclude(pk=row.pk).delete()
            out.append((row, created))
    return out
