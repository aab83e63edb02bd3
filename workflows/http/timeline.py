"""The console's instance timeline: steps, events and log lines of one run merged by time."""

import json

from workflows import selectors
from workflows.models import WorkflowInstance

LIMIT = 1000  # per kind: a page that renders, even for a run that logged in a loop


def timeline(*, instance: WorkflowInstance, run_number: int) -> list[dict]:
    """Steps, events and logs of one run merged by time, for the console's instance page."""
    history = selectors.instance_history(instance=instance, run_number=run_number)
    entries = []
    for step in history["steps"][:LIMIT]:
        detail = step.error if step.error else step.result
        entries.append(
            {
                "at": step.started_at,
                "kind": f"step ({step.type})",
                "title": step.name,
                "status": f"{step.status}, attempts {step.attempts}",
                "duration": duration_text(step.started_at, step.completed_at),
                "detail": _pretty(detail),
            }
        )
    for event in history["events"][:LIMIT]:
        consumed = f"consumed by {event.consumed_by_step!r}" if event.consumed_at else "pending"
        entries.append(
            {
                "at": event.created_at,
                "kind": "event",
                "title": event.type,
                "status": consumed,
                "detail": _pretty(event.payload),
            }
        )
    for log in history["logs"][:LIMIT]:
        where = f" [{log.step_name}#{log.attempt}]" if log.step_name else ""
        entries.append(
            {
                "at": log.created_at,
                "kind": f"log ({log.category})",
                "title": log.message + where,
                "status": log.level,
                "detail": _pretty(log.data),
                "is_replay": log.is_replay,
            }
        )
    return sorted(entries, key=lambda e: e["at"])


def duration_text(start, end) -> str:
    """ "1 h 02 min", "3 min 05 s", "4.2 s", "120 ms": short, for list columns and timelines."""
    if start is None or end is None:
        return "-"
    seconds = max((end - start).total_seconds(), 0.0)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def _pretty(value) -> str:
    return "" if value is None else json.dumps(value, indent=2, sort_keys=True, default=str)
