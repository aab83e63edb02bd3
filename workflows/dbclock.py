"""The database's clock for runners on PostgreSQL: leases and due times must not depend on the
wall clock of whichever host a runner happens to run on.

Two halves. Comparisons (is this lease live, is this task due) are made by the server itself in
the claim, renew and boundary-guard statements (runner.claim.DB_NOW). Times a runner writes
(sleep wake-ups, retry times, event timeouts, step timestamps) come from runtime.now(), which
adds this module's offset — server clock minus local clock, measured per connection and again
every minute — so a runner 10 minutes fast does not schedule a sleep 10 minutes late.

SQLite is one machine with one clock: nothing to correct. The test harness's manual clock is
never corrected (runtime.ManualRuntime.follows_database is False).
"""

import threading
import time
from datetime import UTC, datetime, timedelta

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models.functions import Now

from workflows import runtime

RESYNC_SECONDS = 60.0

_local = threading.local()  # per runner thread (one connection each): .synced = (pid, when)


def sync_if_stale() -> None:
    """Measure the offset on a new connection or once a minute (one round trip). Call it where
    a query is safe (outside any transaction): the runner does, before each claim."""
    db = connections[DEFAULT_DB_ALIAS]  # one thread-local lookup: the runner asks per claim
    if db.vendor != "postgresql" or not runtime.current().follows_database:
        return
    db.ensure_connection()
    pid = db.connection.info.backend_pid
    synced = getattr(_local, "synced", None)
    if synced is not None and synced[0] == pid and time.monotonic() - synced[1] < RESYNC_SECONDS:
        return
    runtime.set_database_offset(measure())
    _local.synced = (pid, time.monotonic())


def measure() -> timedelta:
    """Server clock minus local clock, taking the server's reading at the round trip's middle."""
    from workflows.engine.store import SERVER_CLOCK  # here: the engine package imports this module

    with connection.cursor() as cursor:
        before = time.time()
        cursor.execute(SERVER_CLOCK)
        server = float(cursor.fetchone()[0])
        after = time.time()
    local = datetime.fromtimestamp((before + after) / 2, UTC)
    return datetime.fromtimestamp(server, UTC) - local


def due_now(now: datetime):
    """The run_at of work due at once (a new instance, an event, a resume, a restart). On
    PostgreSQL under the production runtime: the server's transaction time, which every claim
    after the commit judges due. `now` (runtime.now()) carries the measured offset's error —
    a few ms, more on a loaded machine — and could sit just ahead of the server's clock, so a
    runner or tick right after an event would find nothing due. Elsewhere: `now`."""
    if connection.vendor == "postgresql" and runtime.current().follows_database:
        return Now()
    return now
