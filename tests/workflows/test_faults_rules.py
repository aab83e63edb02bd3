"""The pure rules behind the fault model: what counts as a storage fault, how long a runner
backs off after one (docs/workflows/faults.md)."""

import psycopg
import pytest
from django.db import IntegrityError, InterfaceError, OperationalError, ProgrammingError

from workflows import decisions
from workflows.engine.storage_faults import StorageFault, is_storage_fault


@pytest.mark.parametrize(
    "exc",
    [
        OperationalError("server closed the connection unexpectedly"),
        InterfaceError("connection already closed"),
        psycopg.errors.SerializationFailure("could not serialize access"),
        psycopg.errors.DeadlockDetected("deadlock detected"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        StorageFault("already classified"),
    ],
)
def test_connection_and_transaction_errors_are_storage_faults(exc):
    assert is_storage_fault(exc)


@pytest.mark.parametrize(
    "exc", [IntegrityError("duplicate key"), ProgrammingError("syntax"), ValueError("user")]
)
def test_errors_about_a_statements_content_are_not_storage_faults(exc):
    assert not is_storage_fault(exc)


def test_storage_backoff_grows_is_capped_and_never_zero():
    lows = [decisions.storage_backoff_seconds(n, 0.0) for n in range(1, 12)]
    highs = [decisions.storage_backoff_seconds(n, 0.999) for n in range(1, 12)]
    assert lows == sorted(lows) and lows[0] > 0
    assert max(highs) <= decisions.STORAGE_BACKOFF_CAP_S
    assert all(low < high for low, high in zip(lows, highs, strict=True))  # jittered
