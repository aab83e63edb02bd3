"""Cron triggers: `@workflow(schedules=["*/15 * * * *"], schedule_timezone="UTC")`.

Each schedule has a row (workflow_schedule) holding its next fire time. Runners fire due rows
from their claim loop (runner.run_one calls maybe_fire), and runner.next_due_at includes the
earliest fire time, so an idle `runworkflows` wakes for it exactly as it wakes for a sleep.

Rules (Cloudflare's): a fire creates instance `cron-<UTC YYYYMMDDTHHMMZ>` with params
{"scheduled_time": <ISO 8601 UTC>}; the id is the lock, so any number of runners (or clusters on
one database) firing the same time create one instance. Fire times missed while nothing ran are
skipped except the most recent one, which runs once. A schedule seen for the first time (its
row is created) fires nothing for times before that moment. Paused schedules do not fire; on
resume the next fire time is computed from then on (times missed while paused are skipped).
The schedules of a workflow are those of its highest registered version.
"""

import logging
import threading
import time
from datetime import datetime

from django.db import transaction

from workflows import cron, runtime, selectors
from workflows.authoring import registry
from workflows.engine.create import NewInstance, create_instance
from workflows.errors import InstanceIdAlreadyExists, WorkflowError
from workflows.models import WorkflowSchedule

log = logging.getLogger(__name__)

RECHECK_SECONDS = 1.0  # re-read the earliest fire time at least this often (other processes)


def sync(now: datetime, name: str | None = None) -> None:
    """Create rows for schedules seen for the first time (next fire strictly after `now`, so
    nothing earlier fires) and follow a changed time zone. Rows of schedules no longer in the
    code are left alone and never fired by this code."""
    wanted = selectors.schedules_declared(name)
    if not wanted:
        return
    names = {d.workflow_name for d in wanted}
    rows = {
        (r.workflow_name, r.expression): r
        for r in WorkflowSchedule.objects.filter(workflow_name__in=names)
    }
    paused = {r.workflow_name for r in rows.values() if r.paused}
    new = []
    for d in wanted:
        row = rows.get((d.workflow_name, d.expression))
        if row is None:
            new.append(
                WorkflowSchedule(
                    workflow_name=d.workflow_name,
                    expression=d.expression,
                    timezone=d.timezone,
                    next_fire_at=cron.next_after(d.expression, d.timezone, now),
                    paused=d.workflow_name in paused,  # a paused workflow's new schedule too
                    created_at=now,
                    updated_at=now,
                )
            )
        elif row.timezone != d.timezone:
            WorkflowSchedule.objects.filter(pk=row.pk).update(
                timezone=d.timezone,
                next_fire_at=cron.next_after(d.expression, d.timezone, now),
                updated_at=now,
            )
    if new:
        WorkflowSchedule.objects.bulk_create(new, ignore_conflicts=True)


def _due_rows(now: datetime):
    return WorkflowSchedule.objects.filter(paused=False, next_fire_at__lte=now)


def fire_due(now: datetime | None = None) -> list[str]:
    """Fire every due schedule of this code once; returns "workflow/instance id" of each
    instance created here."""
    now = now or runtime.now()
    known = {(d.workflow_name, d.expression) for d in selectors.schedules_declared()}
    if not known:
        return []
    created = []
    for pk, name, expr in _due_rows(now).values_list("pk", "workflow_name", "expression"):
        if (name, expr) in known:
            instance_id = _fire_one(pk, now)
            if instance_id:
                created.append(f"{name}/{instance_id}")
    return created


def _fire_one(pk: int, now: datetime) -> str | None:
    """Lock the row (skip it if another runner holds it), create the instance of the most
    recent fire time, move next_fire_at past now. One transaction."""
    with transaction.atomic():
        row = _due_rows(now).select_for_update(skip_locked=True).filter(pk=pk).first()
        if row is None:  # fired by another runner meanwhile
            return None
        fire_time = cron.latest_at_or_before(row.expression, row.timezone, now)
        instance_id = cron.instance_id(fire_time)
        made = None
        try:
            scheduled = fire_time.isoformat().replace("+00:00", "Z")
            create_instance(
                NewInstance(
                    workflow_name=row.workflow_name,
                    instance_id=instance_id,
                    params={"scheduled_time": scheduled},
                )
            )
            made = instance_id
        except InstanceIdAlreadyExists:
            pass  # another cluster, or another schedule of this workflow, fired this minute
        except WorkflowError as exc:  # e.g. no active version: skip this fire, keep the schedule
            log.warning("schedule %s %r did not fire: %s", row.workflow_name, row.expression, exc)
        row.next_fire_at = cron.next_after(row.expression, row.timezone, max(now, fire_time))
        row.last_fired_at, row.updated_at = fire_time, now
        row.save(update_fields=["next_fire_at", "last_fired_at", "updated_at"])
    return made


def next_fire_at() -> datetime | None:
    """The earliest fire time of an unpaused schedule this code fires (runner idle sleeps)."""
    known = {(d.workflow_name, d.expression) for d in selectors.schedules_declared()}
    if not known:
        return None
    rows = WorkflowSchedule.objects.filter(
        paused=False, workflow_name__in={n for n, _ in known}
    ).values_list("workflow_name", "expression", "next_fire_at")
    times = [at for name, expr, at in rows if (name, expr) in known]
    return min(times) if times else None


class _Gate:
    """Per process: skip the schedule query while the earliest fire time is known to be in the
    future and was read less than RECHECK_SECONDS ago."""

    def __init__(self):
        self.lock = threading.Lock()
        self.generation = None  # registry generation the rows were synced for
        self.next: datetime | None = None
        self.read_at = float("-inf")

    def reset(self) -> None:
        """Forget what was read (pause/resume, and the harness: its rows roll back per test)."""
        with self.lock:
            self.generation, self.next, self.read_at = None, None, float("-inf")


gate = _Gate()


def maybe_fire() -> list[str]:
    """Called before every claim: cheap unless a schedule may be due."""
    now = runtime.now()
    with gate.lock:
        if gate.generation != registry.generation:
            resync, gate.generation = True, registry.generation
        else:
            resync = False
        fresh = time.monotonic() - gate.read_at < RECHECK_SECONDS
        if not resync and fresh and (gate.next is None or now < gate.next):
            return []
    if resync:
        sync(now)
    created = fire_due(now)
    upcoming = next_fire_at()
    with gate.lock:
        gate.next, gate.read_at = upcoming, time.monotonic()
    return created


def pause(*, workflow_name: str) -> int:
    """Stop the workflow's schedules firing; returns how many rows changed."""
    now = runtime.now()
    registry.require(workflow_name)
    sync(now, workflow_name)
    changed = WorkflowSchedule.objects.filter(workflow_name=workflow_name, paused=False).update(
        paused=True, updated_at=now
    )
    gate.reset()
    return changed


def resume(*, workflow_name: str) -> int:
    """Fire again from the next fire time after now (times missed while paused are skipped)."""
    now = runtime.now()
    registry.require(workflow_name)
    sync(now, workflow_name)
    rows = WorkflowSchedule.objects.filter(workflow_name=workflow_name, paused=True)
    changed = 0
    for row in rows:
        row.paused, row.updated_at = False, now
        row.next_fire_at = cron.next_after(row.expression, row.timezone, now)
        row.save(update_fields=["paused", "next_fire_at", "updated_at"])
        changed += 1
    gate.reset()
    return changed
