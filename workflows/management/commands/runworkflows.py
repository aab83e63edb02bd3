"""manage.py runworkflows: a long-running workflow runner (any number may run at once).

Loop, per worker thread:
  1. stop if SIGTERM/SIGINT arrived (the current task was finished first);
  2. claim one due task (lease + fencing token) and run it to its next boundary
     (a storage fault backs off instead, jittered and capped: leases keep the work safe);
  3. if nothing was due: with --once, exit; else sleep until the next task falls due or a
     NOTIFY announces new work (PostgreSQL, engine/wake.py), reading the next due time again
     every cap seconds (a read, not a claim), and go to 1. The cap is --poll if given, else
     10 s while listening and 0.5 s while polling (SQLite, or PostgreSQL while the listener
     reconnects).
"""

import contextlib
import logging
import random
import signal
import threading
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.db import DatabaseError, connections

from ops.liveness import RUNNER, heartbeat_remove, heartbeat_start
from workflows import decisions, runtime
from workflows.engine import STORAGE_FAULT, default_owner, next_due_at, run_one, storage_faults
from workflows.engine.wake import Waker

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run due workflow tasks until stopped (SIGTERM/SIGINT finish the current task first)."

    def add_arguments(self, parser):
        parser.add_argument("--concurrency", type=int, default=1, help="worker threads")
        parser.add_argument(
            "--poll",
            type=float,
            default=None,
            help="max idle sleep, seconds (default: 10 while LISTENing on PostgreSQL, else 0.5)",
        )
        parser.add_argument("--once", action="store_true", help="exit when nothing is due")

    def handle(self, *args, concurrency: int, poll: float | None, once: bool, **options):
        self.stopping = threading.Event()
        self.waker = Waker() if once else Waker().start()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        owner = default_owner()
        workers = [
            threading.Thread(target=self._work, args=(f"{owner}/{n}", poll, once), daemon=True)
            for n in range(max(1, concurrency))
        ]
        # The console and /readyz list this process while it beats (ops.liveness).
        heartbeat = heartbeat_start(kind=RUNNER)
        for worker in workers:
            worker.start()
        for worker in workers:
            while worker.is_alive():  # join in slices so signals are handled promptly
                worker.join(0.2)
        self.waker.stop()
        if heartbeat is not None:
            heartbeat.stop()
            heartbeat.join(5)
            with contextlib.suppress(DatabaseError):  # a clean stop leaves the list
                heartbeat_remove(kind=RUNNER, pid=heartbeat.pid)
        self.stdout.write(f"runworkflows {owner}: stopped")

    def _stop(self, signum, frame):
        self.stopping.set()
        self.waker.stop()

    def _work(self, owner: str, poll: float | None, once: bool) -> None:
        faults = 0  # storage faults in a row, for the backoff
        try:
            while not self.stopping.is_set():
                try:
                    seen = self.waker.generation
                    result = run_one(owner=owner)
                    if result is None:
                        if once:
                            return
                        faults = 0
                        self._idle(seen, poll)
                        continue
                except Exception as exc:
                    if not storage_faults.is_storage_fault(exc):
                        raise
                    storage_faults.drop_connection()
                    result = STORAGE_FAULT
                if result == STORAGE_FAULT:
                    # Database restarting, connection killed, deadlock: back off; the work
                    # stays in the database and leases keep it safe.
                    faults += 1
                    pause = decisions.storage_backoff_seconds(faults, random.random())
                    log.warning("runworkflows %s: storage fault, backing off %.2f s", owner, pause)
                    self.stopping.wait(pause)
                    continue
                faults = 0
        finally:
            connections.close_all()

    def _idle(self, seen: int, poll: float | None) -> None:
        """Return when work may be there: woken (a NOTIFY), or the next due time reached. Past
        the cap the due time is read again (a read, not a claim: an idle poll stays cheap)."""
        while not self.stopping.is_set():
            wait, due_bound = _idle_seconds(self.waker.idle_cap(poll))
            if self.waker.wait(seen, wait) or due_bound:
                return


def _idle_seconds(cap: float) -> tuple[float, bool]:
    """(seconds until the next task is due but at most `cap`, whether the due time bounds it)."""
    due = next_due_at()
    if due is None:
        return cap, False
    wait = (due - runtime.now()) / timedelta(seconds=1)
    return (max(0.01, wait), True) if wait <= cap else (cap, False)
