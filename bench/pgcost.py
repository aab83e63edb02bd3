"""What a piece of database work costs: statements, round trips and CPU (bench helpers).

Round trips are counted where psycopg (3) waits for the server, by the protocol: a statement
outside a pipeline is one (two when psycopg first sends the BEGIN of a new transaction), a
COMMIT or ROLLBACK is one, a pipeline is one per sync however many statements it carries.
DBOS Transact talks to PostgreSQL through psycopg too, so the same counter measures both.

CPU is read from /proc: a process's utime + stime, and PostgreSQL backends' by their pids
(the server runs on this machine); clock ticks, so measure many units and divide. One
statement's share of its backend's CPU is read from /proc/<pid>/schedstat (nanoseconds).
"""

import collections
import os
import time
from pathlib import Path

import psycopg
from psycopg.pq import TransactionStatus

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process; 0.0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def on_cpu_ns(pid: int) -> int:
    """Nanoseconds `pid` has run on a CPU (kernel time included); 0 if it is gone."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return 0


class StatementCosts:
    """The backend CPU and wall time of each statement this process sends with a psycopg cursor
    or through `ops.pgwire.execute` (its own backend's, so the server must run on this
    machine), in the order sent: `take()` returns those since the last take, as (backend CPU
    ns, wall s) pairs."""

    def __init__(self):
        self._execute = None
        self._taken: list[tuple[int, float]] = []

    def install(self) -> "StatementCosts":
        self._execute = psycopg.Cursor.execute  # ops.pgwire.execute runs through it too

        def execute(cursor, query, params=None, **kwargs):
            return self._timed(cursor.connection, self._execute, cursor, query, params, **kwargs)

        psycopg.Cursor.execute = execute
        return self

    def _timed(self, conn, fn, *args, **kwargs):
        pid = conn.info.backend_pid
        cpu, started = on_cpu_ns(pid), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self._taken.append((on_cpu_ns(pid) - cpu, time.perf_counter() - started))

    def uninstall(self) -> None:
        psycopg.Cursor.execute = self._execute

    def take(self) -> list[tuple[int, float]]:
        taken = list(self._taken)
        self._taken.clear()
        return taken


class Backends:
    """CPU of every backend connected to `database` (pids from pg_stat_activity), as deltas
    since start(); backends that start later count from zero."""

    def __init__(self, admin_url: str, database: str):
        self.admin_url, self.database = admin_url, database
        self.start_cpu: dict[int, float] = {}

    def _pids(self) -> list[int]:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [self.database],
            ).fetchall()
        return [pid for (pid,) in rows]

    def start(self) -> "Backends":
        self.start_cpu = {pid: cpu_seconds(pid) for pid in self._pids()}
        return self

    def used(self) -> float:
        return sum(cpu_seconds(pid) - self.start_cpu.get(pid, 0.0) for pid in self._pids())


class RoundTrips:
    """Counts statements and round trips of every psycopg connection in this process, per
    phase (`counter.phase = "run"`)."""

    _EXECUTE = ("BaseCursor._execute_gen", "BaseCursor._executemany_gen_no_pipeline")
    _END = ("BaseConnection._commit_gen", "BaseConnection._rollback_gen")
    _SYNC = ("BasePipeline._exit_gen", "BasePipeline._sync_gen")

    def __init__(self):
        self.counts = collections.Counter()
        self.phase = "-"
        self._wait = None

    def install(self) -> "RoundTrips":
        original = self._wait = psycopg.Connection.wait
        counter = self

        def wait(conn, gen, *args, **kwargs):
            counter._count(conn, getattr(gen, "__qualname__", ""))
            return original(conn, gen, *args, **kwargs)

        psycopg.Connection.wait = wait
        return self

    def uninstall(self) -> None:
        psycopg.Connection.wait = self._wait

    def _count(self, conn, name: str) -> None:
        idle = conn.pgconn.transaction_status == TransactionStatus.IDLE
        if name in self._EXECUTE:
            self.counts[(self.phase, "statements")] += 1
            if conn._pipeline is None:
                self.counts[(self.phase, "round trips")] += 1 + (idle and not conn.autocommit)
        elif name in self._END and not idle and conn._pipeline is None or name in self._SYNC:
            self.counts[(self.phase, "round trips")] += 1

    def get(self, phase: str, what: str) -> int:
        return self.counts[(phase, what)]
