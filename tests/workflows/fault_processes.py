"""Helpers for the fault tests: real `manage.py runworkflows` processes on the test database
(with extra environment: fault hooks, faketime, recovery limits) and a backend killer."""

import glob
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
MODULES = "tests.workflows.sample_workflows,tests.workflows.fault_workflows"


def database_url() -> str:
    s = connection.settings_dict
    return (
        f"postgresql://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or '127.0.0.1'}:"
        f"{s['PORT'] or 5432}/{s['NAME']}"
    )


class Runners:
    """start(...) → a Popen of `manage.py runworkflows`; stop_all() kills what is left."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.started: list[subprocess.Popen] = []

    def start(
        self,
        *,
        lease: float = 2,
        concurrency: int = 1,
        env: dict | None = None,
        prefix: list[str] | None = None,
    ) -> subprocess.Popen:
        full_env = {
            **os.environ,
            "DATABASE_URL": database_url().replace("postgresql://", "postgres://", 1),
            "WORKFLOWS_MODULES": MODULES,
            "WORKFLOWS_LEASE_SECONDS": str(lease),
            "LOG_LEVEL": "WARNING",
            **(env or {}),
        }
        log = open(self.log_dir / f"runner-{len(self.started)}.log", "w")  # noqa: SIM115
        cmd = [*(prefix or []), sys.executable, "manage.py", "runworkflows", "--poll", "0.1"]
        cmd += ["--concurrency", str(concurrency)]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=log, stderr=log)
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
            proc.wait(10)


class BackendKiller:
    """Every `every` seconds, pg_terminate_backend on every other backend of the test database
    (the runners'), keeping this test's own connection alive. Counts what it killed."""

    def __init__(self, every: float):
        self.every = every
        self.killed = 0
        self.rounds = 0
        self._stop = threading.Event()
        connection.ensure_connection()
        self._spare = connection.connection.info.backend_pid  # the test's own backend
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        with psycopg.connect(database_url(), autocommit=True) as conn:
            while not self._stop.wait(self.every):
                rows = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND pid <> %s AND backend_type = 'client backend'",
                    [self._spare],
                ).fetchall()
                self.rounds += 1
                self.killed += sum(1 for (ok,) in rows if ok)


def faketime_env(seconds: int) -> dict | None:
    """Environment that shifts a child's wall clock by `seconds` with libfaketime (Debian
    package `faketime`; .ci/run installs it), or None when the library is missing. Only the
    wall clock is wrong, as on a host with a bad clock: the monotonic clock stays real (with
    it faked, libfaketime 0.9.10 hangs timed waits; with it real, it fails time.sleep with
    EINVAL, so runner code and these tests' workflows wait on events instead)."""
    for lib in sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")):
        return {
            "LD_PRELOAD": lib,
            "FAKETIME": f"{seconds:+d}",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }
    return None


def marks(path: Path) -> list[tuple[str, str, float, str]]:
    """fault_workflows trace lines: (instance, mark, server time, pid)."""
    return [(i, m, float(t), pid) for i, m, t, pid in trace_lines(path)]


def wait_for(predicate, timeout: float = 60, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def trace_lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def executions(path: Path) -> Counter:
    return Counter((inst, step) for inst, step, _pid in trace_lines(path))
