"""A client-side bound on every database round trip of a worker process: a watchdog thread shuts
down a PostgreSQL connection that has had a command in flight with nothing sent or received for
DB_ROUND_TRIP_SECONDS, unless the server says it is still running it, so the driver's wait ends
with an error instead of lasting for hours. docs/liveness.md › Silent connections says why TCP
settings alone cannot do it and what it costs.
"""

import asyncio
import logging
import os
import socket
import struct
import threading
import time
import weakref

from django.conf import settings
from django.db.backends.signals import connection_created

from ops import store

log = logging.getLogger(__name__)

TICK_SECONDS = 0.5  # how late past the bound a silent connection may be shut down
PROBE_SECONDS = 5.0  # the most asking the server may take (connecting included)
# What psycopg.connect takes from Django besides libpq's parameters, of no use to the probe.
_NOT_LIBPQ = ("cursor_factory", "context", "prepare_threshold")
# struct tcp_info (linux/tcp.h, stable since 2.6): tcpi_last_data_sent, tcpi_last_ack_sent and
# tcpi_last_data_recv, milliseconds ago, at byte 44.
_TCP_INFO_TIMES = struct.Struct("=III")
_TCP_INFO_TIMES_AT = 44


def bound_seconds() -> float:
    """DB_ROUND_TRIP_SECONDS (30 by default); 0 turns the watch off."""
    return float(getattr(settings, "DB_ROUND_TRIP_SECONDS", 30))


class _Watch:
    """The PostgreSQL connections of this process's threads (Django's per-thread wrappers, held
    weakly), and the thread that looks at them every TICK_SECONDS. One per process: the thread
    is started by the first connection watched in each process (django-q2 forks its workers)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._wrappers: weakref.WeakSet = weakref.WeakSet()
        self._pid = 0
        # wrapper → monotonic time before which it is not asked about again (it was running)
        self._asked: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def add(self, wrapper) -> None:
        if wrapper.vendor != "postgresql":
            return
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._wrappers = weakref.WeakSet()
                self._asked = weakref.WeakKeyDictionary()
                threading.Thread(target=self._run, name="db-round-trip-watch", daemon=True).start()
            self._wrappers.add(wrapper)

    def _run(self) -> None:
        while True:
            time.sleep(TICK_SECONDS)
            bound = bound_seconds()
            if bound <= 0:
                continue
            with self._lock:
                wrappers = list(self._wrappers)
            now = time.monotonic()
            for wrapper in wrappers:
                if self._asked.get(wrapper, 0) > now:
                    continue
                try:
                    if cut_if_silent(wrapper, bound) == RUNNING:
                        self._asked[wrapper] = time.monotonic() + bound
                except Exception:  # the watch must outlive anything one connection does
                    log.debug("round-trip watch: checking a connection failed", exc_info=True)


CUT, RUNNING = "cut", "running"


def cut_if_silent(wrapper, bound: float, probe=None) -> str | None:
    """Shut down `wrapper`'s connection when a command is in flight on it (libpq's ACTIVE: a
    query, a COMMIT, any statement sent and not yet answered), its socket has neither sent nor
    received a byte for `bound` seconds, and the server does not say that its backend is
    running a statement (`probe`, server_running by default: a long statement is the server
    at work, not a silent connection). CUT when it did, RUNNING when the server is at work.

    Read from another thread: the psycopg connection object is held here, so a connection its
    owner closes meanwhile reads as closed (never a freed one); the socket is duplicated before
    it is judged, and judged only while that connection still owns that descriptor."""
    from psycopg import pq

    conn = wrapper.connection
    if conn is None:
        return None
    pgconn = conn.pgconn
    if pgconn.transaction_status != pq.TransactionStatus.ACTIVE:
        return None
    try:
        fd, backend = pgconn.socket, pgconn.backend_pid
        sock = socket.socket(fileno=os.dup(fd))
    except Exception:  # closed meanwhile
        return None
    try:
        if pgconn.transaction_status != pq.TransactionStatus.ACTIVE or pgconn.socket != fd:
            return None
        quiet = _quiet_seconds(sock)
        if quiet is None or quiet < bound:
            return None
        if (probe or server_running)(wrapper, backend):
            return RUNNING
        sock.shutdown(socket.SHUT_RDWR)
        log.warning(
            "database connection silent for %.1f s with a command in flight and its backend "
            "not running it: shut down (DB_ROUND_TRIP_SECONDS=%s); the work fails and is "
            "taken up again",
            quiet,
            bound,
        )
        return CUT
    except Exception:
        return None
    finally:
        sock.close()


def server_running(wrapper, backend: int) -> bool:
    """True when the server, asked on a new connection within PROBE_SECONDS, says `backend` is
    running a statement. False when it is idle (the statement or its answer was lost on the
    way), gone, or the server cannot be asked in time (frozen, partitioned)."""
    import psycopg

    params = {k: v for k, v in wrapper.get_connection_params().items() if k not in _NOT_LIBPQ}

    async def ask() -> bool:
        conn = await psycopg.AsyncConnection.connect(**params, autocommit=True)
        try:
            cursor = await conn.execute(store.BACKEND_STATE, [backend])
            row = await cursor.fetchone()
        finally:
            await conn.close()
        return row is not None and row[0] == "active"

    try:
        return asyncio.run(asyncio.wait_for(ask(), PROBE_SECONDS))
    except Exception:  # unreachable, refused, too slow: nobody says it is at work
        log.info("round-trip watch: the server could not be asked", exc_info=True)
        return False


def _quiet_seconds(sock: socket.socket) -> float | None:
    """Seconds since the socket last sent or received data (TCP_INFO; keepalive probes are not
    data). None where TCP_INFO is not known: a Unix socket, a system other than Linux."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        sent, _, received = _TCP_INFO_TIMES.unpack_from(raw, _TCP_INFO_TIMES_AT)
    except (AttributeError, OSError, struct.error):
        return None
    return min(sent, received) / 1000


_watch = _Watch()


def _connection_created(sender, connection, **kwargs) -> None:
    _watch.add(connection)


def watch_start() -> None:
    """Bound the round trips of every connection this process opens from now on, and of this
    thread's open one (ops.liveness starts it with a worker's heartbeat). Idempotent."""
    if bound_seconds() <= 0:
        return
    connection_created.connect(_connection_created, dispatch_uid="ops-dbwatch")
    from django.db import DEFAULT_DB_ALIAS, connections

    _watch.add(connections[DEFAULT_DB_ALIAS])
