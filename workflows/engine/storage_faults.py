"""Faults of the engine's own storage: telling them apart from workflow errors, unwinding the run
when one happens, and the test hook that injects them at a step-boundary commit.

A lost connection, a serialization failure, a deadlock or a COMMIT whose acknowledgement never
came back says nothing about the workflow: the instance keeps its status and its retry budget,
the runner drops the connection, backs off and the work is claimed again from what the database
holds (replay reads the database, so a commit of unknown outcome ran once or twice, never zero
times). docs/workflows/faults.md describes the whole fault model.
"""

import logging
import os
import threading

import psycopg
from django.db import DatabaseError, InterfaceError, OperationalError, connection

from workflows.engine import store

log = logging.getLogger(__name__)

# 40001 serialization_failure, 40P01 deadlock_detected: psycopg raises both as
# OperationalError subclasses (TransactionRollback), Django wraps them as OperationalError.
_TRANSIENT = OperationalError | InterfaceError | psycopg.OperationalError | psycopg.InterfaceError


class StorageFault(BaseException):  # noqa: N818 - a control-flow signal, not a workflow error
    """Raised in place of a storage error inside a run. BaseException so that workflow code
    cannot swallow it with `except Exception` and carry on over a broken connection."""


def is_storage_fault(exc: BaseException) -> bool:
    """True for errors of the database connection or transaction, not of a statement's content
    (an IntegrityError from a step's mutation stays a step error)."""
    if isinstance(exc, StorageFault | _TRANSIENT):
        return True
    # Django re-raises a psycopg error of a broken connection as a plain DatabaseError when it
    # happens while it is already handling one (e.g. a rollback on a dead socket).
    cause = exc.__cause__
    return isinstance(exc, DatabaseError) and isinstance(cause, _TRANSIENT)


class guarded:  # noqa: N801 - used as a context manager: `with storage_faults.guarded(): ...`
    """Turn storage errors raised inside the block into StorageFault."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and not isinstance(exc, StorageFault) and is_storage_fault(exc):
            raise StorageFault(f"{type(exc).__name__}: {exc}") from exc
        return False


def drop_connection() -> None:
    """Close this thread's connection so the next query opens a fresh one (Django would keep
    reusing a broken one outside the request cycle)."""
    try:
        connection.close()
    except Exception:  # already broken: closing it is all we wanted
        log.debug("closing a broken database connection failed", exc_info=True)


# -- the test hook -------------------------------------------------------------------------------
#
# WORKFLOWS_FAULT_AT=<point>[:<times>] breaks this process's connection at a named point, the
# first <times> times (default 1). Points: boundary_commit_before (inside the boundary
# transaction, before COMMIT is sent: the server rolls it back) and boundary_commit_after (after
# the COMMIT succeeded, before the runner hears of it: a lost acknowledgement). PostgreSQL only;
# the backend terminates itself exactly as pg_terminate_backend from outside would.

FAULT_POINTS = ("boundary_commit_before", "boundary_commit_after")


def _parse_fault_setting(raw: str) -> tuple[str, int]:
    point, _, times = raw.partition(":")
    if point and point not in FAULT_POINTS:
        raise ValueError(f"WORKFLOWS_FAULT_AT must be one of {FAULT_POINTS}, got {point!r}")
    return point, int(times or 1)


_fault_point, _fault_left = _parse_fault_setting(os.environ.get("WORKFLOWS_FAULT_AT", ""))
_fault_lock = threading.Lock()


def take(point: str) -> bool:
    """Is the test hook armed at this point? Uses up one of its times when it is."""
    global _fault_left
    if point != _fault_point or connection.vendor != "postgresql":
        return False
    with _fault_lock:
        if _fault_left <= 0:
            return False
        _fault_left -= 1
    log.warning("fault hook: terminating this runner's backend at %s", point)
    return True


def inject(point: str) -> None:
    """Break the connection here when the test hook names this point (a no-op otherwise)."""
    if take(point):
        with connection.cursor() as cursor:
            cursor.execute(store.TERMINATE_SELF)
