"""Answer Terra in time when the database does not answer.

A frozen or partitioned PostgreSQL accepts the TCP traffic (the kernel still ACKs) and never
replies: neither statement_timeout (enforced by the frozen server) nor TCP keepalives fire, and
a request waits until the client gives up. So the webhook's database work runs under a watchdog:
one thread per process that, once a request's work has run for TERRA_WEBHOOK_DB_DEADLINE_SECONDS,
shuts down that request's database socket. The driver's wait then ends with an error, the
connection is dropped and the webhook answers 503 with Retry-After (Terra retries 5xx). The
statement may still have reached the server and commit once it answers again; Terra's retry
then meets the dedup constraint: nothing is lost, nothing is doubled.

The work runs on the request's own thread and connection: arming the watchdog is a dictionary
entry, where handing the work to a pool thread and back cost 0.12-0.17 ms of CPU per delivery
(bench/README.md › Webhook). Connecting is bounded by DB_CONNECT_TIMEOUT on its own. PostgreSQL
only: SQLite is a local file whose slow answers are its own lock timeout.
"""

import itertools
import logging
import os
import socket
import threading
import time

from django.conf import settings
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


def within_deadline(fn, *args, **kwargs):
    """fn(*args, **kwargs), the webhook's database work, or DatabaseDeadline once it has run
    past TERRA_WEBHOOK_DB_DEADLINE_SECONDS (0: no watchdog, for tests whose database lives in
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
    budget = float(getattr(settings, "TERRA_WEBHOOK_DB_DEADLINE_SECONDS", 0) or 0)
    started = time.monotonic()
    reused = connection.connection is not None and not connection.in_atomic_block
    try:
        return _watched(budget, fn, args, kwargs)
    except (OperationalError, InterfaceError):
        if not reused:
            raise
        log.info("webhook: the database connection failed; retrying on a new one")
        _drop_connection()
        left = budget - (time.monotonic() - started) if budget > 0 else 0
        if budget > 0 and left <= 0:
            raise DatabaseDeadline from None
        return _watched(left, fn, args, kwargs)


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
