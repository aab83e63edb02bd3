"""The runtime: the one clock and id source every engine timestamp and id goes through.

Tests swap it (workflows.testing) to control time; production uses wall time and uuid4.
"""

import random
import threading
import uuid
from datetime import UTC, datetime, timedelta


class Runtime:
    """Wall clock corrected to the database's clock (workflows.dbclock), and random ids."""

    # Lease and due comparisons may use the database's own clock (runner.claim.DB_NOW).
    follows_database = True

    def now(self) -> datetime:
        return datetime.now(UTC) + _database_offset

    def new_id(self) -> str:
        return uuid.uuid4().hex


class ManualRuntime(Runtime):
    """A clock that only moves when told to, and ids from a seeded generator."""

    follows_database = False  # the harness keeps full control of time

    def __init__(self, start: datetime, seed: int = 0):
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        self._now = start
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> None:
        with self._lock:
            self._now += delta

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = when

    def new_id(self) -> str:
        with self._lock:
            return uuid.UUID(int=self._random.getrandbits(128), version=4).hex


_current: Runtime = Runtime()
# Database clock minus this process's wall clock, set by workflows.dbclock (PostgreSQL runners).
_database_offset = timedelta(0)


def set_database_offset(offset: timedelta) -> None:
    global _database_offset
    _database_offset = offset


def current() -> Runtime:
    return _current


def install(runtime: Runtime) -> Runtime:
    """Make `runtime` the process-wide clock; returns the previous one so callers can restore it."""
    global _current
    previous, _current = _current, runtime
    return previous


def now() -> datetime:
    return _current.now()


def new_id() -> str:
    return _current.new_id()
