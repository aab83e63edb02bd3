"""A deadline for database work when the database may not answer at all (frozen, partitioned):
a watchdog thread shuts down the socket of work past its deadline, so the driver's wait ends with
an error instead of lasting until TCP gives up. PostgreSQL only; docs/ingest.md › A database that
does not answer tells why and what it costs.
"""

import itertools
import logging
import os
import socket
import threading
import time

from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)

TICK_SECONDS = 0.1  # how late past its deadline a stuck socket may be shut down


class DatabaseDeadline(Exception):
    """The database did not answer within the deadline."""


class _Watchdog:
    """Armed entries (deadline, socket fd) by token; a daemon thread shuts down the socket of
    every entry past its deadline and marks it fired. One per process (gunicorn forks after
    import: the thread is started by the first arm() in each process)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._armed: dict[int, tuple[float, int]] = {}
        self._fired: set[int] = set()
        self._tokens = itertools.count()
        self._pid = 0

    def arm(self, seconds: float, fd: int) -> int:
        token = next(self._tokens)
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._armed.clear()
                self._fired.clear()
                threading.Thread(target=self._run, name="webhook-db-watchdog", daemon=True).start()
            self._armed[token] = (time.monotonic() + seconds, fd)
        return token

    def disarm(self, token: int) -> bool:
        """Forget the entry; True when its socket was shut down."""
        with self._lock:
            self._armed.pop(token, None)
            if token in self._fired:
                self._fired.discard(token)
                return True
        return False

    def _run(self) -> None:
        while True:
            time.sleep(TICK_SECONDS)
            now = time.monotonic()
            with self._lock:
                due = [(token, fd) for token, (at, fd) in self._armed.items() if at <= now]
                for token, fd in due:
                    del self._armed[token]
                    self._fired.add(token)
                    _shut_down(fd)


def _shut_down(fd: int) -> None:
    """Shut down the TCP connection behind fd (the driver keeps the descriptor): a poll() on it
    returns at once and the next read finds the connection closed."""
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


_watchdog = _Watchdog()


def within_deadline(budget: float, fn, *args, **kwargs):
    """fn(*args, **kwargs) — database work on this thread's connection — or DatabaseDeadline
    once it has run past `budget` seconds (0: no watchdog, for tests whose database lives in
    their own transaction). On PostgreSQL, work that failed on a connection this thread opened
    earlier (the server restarted, an idle connection was cut) runs once more on a new one,
    within what is left of the deadline: what Django's per-request health check (a SELECT 1
    before each request's first query) would have caught, at no cost when the connection is
    fine. Safe to repeat: the delivery's insert is deduplicated, so a first attempt that
    committed makes the second a duplicate."""
    # SQLite (development, the demo) is a local file: a slow answer there is its lock's busy
    # timeout, not a server that went away, and a 503 would only make the demo retry.
    if connection.vendor != "postgresql":
        return fn(*args, **kwargs)
    budget = float(budget or 0)
    if budget > 0:
        budget = _breaker.budget(budget)  # raises DatabaseDeadline at once while it is open
    started = time.monotonic()
    reused = connection.connection is not None and not connection.in_atomic_block
    try:
        answer = _first_or_again(budget, started, reused, fn, args, kwargs)
    except (OperationalError, InterfaceError, DatabaseDeadline):
        if budget > 0:
            _breaker.failed()
        raise
    _breaker.answered()
    return answer


def _first_or_again(budget: float, started: float, reused: bool, fn, args, kwargs):
    try:
        return _watched(budget, fn, args, kwargs)
    except (OperationalError, InterfaceError):
        if not reused:
            raise
        log.info("the database connection failed; retrying on a new one")
        _drop_connection()
        left = budget - (time.monotonic() - started) if budget > 0 else 0
        if budget > 0 and left <= 0:
            raise DatabaseDeadline from None
        return _watched(left, fn, args, kwargs)


class _Breaker:
    """Once the database failed to answer in time, the deadline holds for every request queued
    behind that one too: for OPEN_SECONDS (renewed by each failure) this process answers at
    once, but for one probe a second that gets PROBE_SECONDS; an answer closes it. Without it,
    ten requests queued on three sync workers each waited out a full deadline in turn (up to
    12 s, past Terra's ~8 s)."""

    OPEN_SECONDS = 30.0
    PROBE_SECONDS = 1.0
    PROBE_EVERY = 1.0

    def __init__(self):
        self.open_until = 0.0
        self.probed_at = 0.0

    def budget(self, budget: float) -> float:
        now = time.monotonic()
        if now >= self.open_until:
            return budget
        if now - self.probed_at < self.PROBE_EVERY:
            raise DatabaseDeadline("the database did not answer a moment ago")
        self.probed_at = now
        return min(budget, self.PROBE_SECONDS)

    def failed(self) -> None:
        now = time.monotonic()
        self.open_until, self.probed_at = now + self.OPEN_SECONDS, now

    def answered(self) -> None:
        self.open_until = 0.0


_breaker = _Breaker()


def _watched(seconds: float, fn, args, kwargs):
    if seconds <= 0:
        return fn(*args, **kwargs)
    connection.ensure_connection()  # bounded by DB_CONNECT_TIMEOUT
    with connection.wrap_database_errors:  # a lost connection: Django's OperationalError
        fd = connection.connection.pgconn.socket
    token = _watchdog.arm(seconds, fd)
    try:
        return fn(*args, **kwargs)
    except (OperationalError, InterfaceError) as exc:
        if _disarmed_after_firing(token):
            raise DatabaseDeadline from exc
        raise
    finally:
        # Whatever ended the work (an answer, a refusal such as a bad signature, an error), the
        # entry goes; if the watchdog fired just as the work finished, the answer is in but
        # the connection is not usable any more.
        _disarmed_after_firing(token)


def _disarmed_after_firing(token: int) -> bool:
    if _watchdog.disarm(token):
        _drop_connection()
        return True
    return False


def _drop_connection() -> None:
    try:
        connection.close()
    except Exception:  # the socket may be gone already; closing only tidies up
        log.debug("closing the database connection failed", exc_info=True)
