"""django-q2 entry points of ingest: the consume tasks the queue holds, and the scheduled drain,
reconcile and clean-up (registered in apps.py). Their dotted names are stored in the queue and
the schedules: keep them."""

import logging
import time

from ingest.connections import RECONCILE_DAYS, connections_backfill_recent
from ingest.consumer import raw_events_consume_batch, raw_events_consume_pending
from ingest.drain import raw_events_drain
from ingest.traces import trace_write, traces_delete_expired
from ingest.wiped import wiped_deliveries_delete_expired

log = logging.getLogger(__name__)

# Schedule names (the console's dashboard reads when they last ran).
DRAIN = "terra-drain"
RECONCILE = "terra-reconcile"
CLEANUP = "ingest-cleanup"


def consume_raw_event(raw_event_id: int, traceparent: str = "") -> dict[str, int]:
    """Normalize one raw event, plus up to 10 other pending rows while we are here.
    (`traceparent`: accepted from messages queued before rows carried their own.)"""
    return raw_events_consume_batch(raw_event_id)


def consume_pending(ticket: int | None = None) -> dict[str, int]:
    """The shared consume task of the ORM broker (ingest.queue tickets): drain pending rows,
    many per task."""
    return raw_events_consume_pending(ticket)


def drain_task() -> dict:
    """Every 5 minutes: re-enqueue what got stuck (the drain's default filters)."""
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
    """Daily: traces past their retention, and deliveries of wiped users with them."""
    summary = {"traces": traces_delete_expired(), **wiped_deliveries_delete_expired()}
    log.info("ingest cleanup: %s", summary)
    return summary
