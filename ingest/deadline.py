"""Answer Terra in time when the database does not answer.

A frozen or partitioned PostgreSQL accepts the TCP traffic (the kernel still ACKs) and never
replies: neither statement_timeout (enforced by the frozen server) nor TCP keepalives fire, and
a request waits until the client gives up. So the webhook's database work runs on a small pool
of threads per process and the request waits for it at most TERRA_WEBHOOK_DB_DEADLINE_SECONDS;
past that it answers 503 with Retry-After (Terra retries 5xx) and the stuck work is left to
finish or fail on its own thread. Work still queued when its request gave up is cancelled; work
already running may still commit, and Terra's retry then meets the dedup constraint: nothing is
lost, nothing is doubled. Each pool thread keeps its own persistent connection. PostgreSQL
only: SQLite is a local file whose slow answers are its own lock timeout.
"""

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from django.conf import settings
from django.db import close_old_connections, connection

POOL_THREADS = 8
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class DatabaseDeadline(Exception):
    """The database did not answer within the deadline."""


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="webhook-db")
        return _pool


def _run(fn, args, kwargs):
    close_old_connections()  # drop a connection past CONN_MAX_AGE or one that broke
    return fn(*args, **kwargs)


def within_deadline(fn, *args, **kwargs):
    """fn(*args, **kwargs) on a pool thread, or DatabaseDeadline after the deadline. A deadline
    of 0 runs it inline (tests whose database lives in their own transaction)."""
    deadline = float(getattr(settings, "TERRA_WEBHOOK_DB_DEADLINE_SECONDS", 0) or 0)
    # SQLite (development, the demo) is a local file: a slow answer there is its lock's busy
    # timeout, not a server that went away, and a 503 would only make the demo retry.
    if deadline <= 0 or connection.vendor != "postgresql":
        return fn(*args, **kwargs)
    context = contextvars.copy_context()  # the request id and friends travel with the work
    future = _executor().submit(context.run, _run, fn, args, kwargs)
    try:
        return future.result(timeout=deadline)
    except FutureTimeout:
        future.cancel()
        raise DatabaseDeadline from None
