"""manage.py runworkflows: a long-running workflow runner (any number may run at once).

Loop, per worker thread:
  1. stop if SIGTERM/SIGINT arrived (the current task was finished first);
  2. claim one due task (lease + fencing token) and run it to its next boundary
     (a storage fault backs off instead, jittered and capped: leases keep the work safe);
  3. if nothing was due: with --once, exit; else sleep until the next task falls due,
     at most --poll seconds, and go to 1.
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
from workflows.runner import STORAGE_FAULT, default_owner, next_due_at, run_one, storage_faults

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run due workflow tasks until stopped (SIGTERM/SIGINT finish the current task first)."

    def add_arguments(self, parser):
        parser.add_argument("--concurrency", type=int, default=1, help="worker threads")
        parser.add_argument("--poll", type=float, default=1.0, help="max idle sleep, seconds")
        parser.add_argument("--once", action="store_true", help="exit when nothing is due")

    def handle(self, *args, concurrency: int, poll: float, once: bool, **options):
        self.stopping = threading.Event()
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
        if heartbeat is not None:
            heartbeat.stop()
            heartbeat.join(5)
            with contextlib.suppress(DatabaseError):  # a clean stop leaves the list
                heartbeat_remove(kind=RUNNER, pid=heartbeat.pid)
        self.stdout.write(f"runworkflows {owner}: stopped")

    def _stop(self, signum, frame):
        self.stopping.set()

    def _work(self, owner: str, poll: float, once: bool) -> None:
        faults = 0  # storage faults in a row, for the backoff
        try:
            while not self.stopping.is_set():
                try:
                    result = run_one(owner=owner)
                    if result is None:
                        if once:
                            return
                        idle = _idle_seconds(poll)
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
                if result is None:
                    self.stopping.wait(idle)
        finally:
            connections.close_all()


def _idle_seconds(poll: float) -> float:
    """Sleep until the next task is due, but never longer than --poll."""
    due = next_due_at()
    if due is None:
        return poll
    wait = (due - runtime.now()) / timedelta(seconds=1)
    return min(poll, max(0.01, wait))
