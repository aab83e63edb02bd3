"""Rows that are due again run on time, not at the next 5-minute drain.

A poller thread in every qcluster worker process (started on django-q2's post_spawn signal)
publishes, once a second, the rows whose next_attempt_at has passed: retries whose backoff is
over, parked rows whose own backoff is over, and rows whose consumer died (its lease expired).
On PostgreSQL one poller per database holds an advisory lock and the others stand by, taking
over within a second if its process dies. Claims are compare-and-set, so a duplicate publish
costs one no-op task, never a double normalization.
"""

import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from ingest.queue import queue_publish
from ingest.store import consumer as store

log = logging.getLogger(__name__)

DUE_LIMIT = 500
# A row published and still due this long after is published again (its task may be lost).
REPUBLISH_SECONDS = 30
_ADVISORY_KEY = 0x76665F647565  # "vf_due"


def due_rows(*, now=None, limit: int = DUE_LIMIT) -> list[tuple[int, object]]:
    """(id, next_attempt_at) of rows due again, retries first, then expired leases, then parked
    rows, each oldest due first: a crowd of parked rows never holds up a retry."""
    return store.due_rows(now or timezone.now(), limit)


def due_ids(*, now=None, limit: int = DUE_LIMIT) -> list[int]:
    return [pk for pk, _ in due_rows(now=now, limit=limit)]


class DuePoller:
    """Publishes due rows. It remembers each (row, next_attempt_at) it published, so a slow
    queue is not flooded with the same row every second; a row claimed since (a new lease or
    backoff, hence a new next_attempt_at) that is due again is published again at once."""

    def __init__(self):
        self.published: dict[tuple[int, object], float] = {}

    def tick(self, *, now=None) -> int:
        clock = time.monotonic()
        rows = due_rows(now=now)
        fresh = [key for key in rows if clock - self.published.get(key, -1e9) > REPUBLISH_SECONDS]
        current = set(rows)
        self.published = {k: t for k, t in self.published.items() if k in current}
        for key in fresh:
            if queue_publish(key[0], trace=False):
                self.published[key] = clock
        return len(fresh)


def poll_forever(interval: float) -> None:
    poller = DuePoller()
    leader = False
    while True:
        try:
            if not leader:
                leader = store.due_poller_lock(_ADVISORY_KEY)
            if leader:
                poller.tick()
        except Exception:
            log.exception("due poller: tick failed")
            leader = False
            close_old_connections()
            connection.close()
        time.sleep(interval)


_started = threading.Lock()
_thread: threading.Thread | None = None


def poller_start(**_signal_kwargs) -> None:
    """post_spawn receiver: one daemon poller thread per worker process (INGEST_POLL_SECONDS
    = 0 turns it off, for tests that drive the consumer themselves)."""
    from django_q.conf import Conf

    global _thread
    interval = float(getattr(settings, "INGEST_POLL_SECONDS", 1.0))
    if interval <= 0 or Conf.SYNC:  # sync mode runs "workers" inline in the caller's process
        return
    with _started:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(
                target=poll_forever, args=(interval,), name="ingest-due-poller", daemon=True
            )
            _thread.start()
