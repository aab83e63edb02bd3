"""A real gunicorn (N sync workers) on the PostgreSQL test database, for tests that need
several server processes at once (shared throttle state, multiprocess metrics)."""

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or '5432'}/{s['NAME']}"


@contextmanager
def gunicorn_server(tmp_path, *, workers: int = 2, env: dict | None = None):
    """Yields the base URL once a worker answers /healthz."""
    port = free_port()
    full_env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "TERRA_WEBHOOK_SECRET": "test-secret",
        "DEBUG": "0",
        "REDIS_URL": "",
        "VAR_DIR": str(tmp_path),
        "LOG_LEVEL": "WARNING",
        **(env or {}),
    }
    argv = [sys.executable, "-m", "gunicorn", "config.wsgi:application"]
    argv += ["-b", f"127.0.0.1:{port}", "-w", str(workers), "--log-level", "warning"]
    argv += ["--config", "python:config.gunicorn_conf"]
    # A file, not a pipe: nobody reads a pipe while the test runs, and workers that log more
    # than its 64 KiB buffer (a warning per 4xx) would block writing to it.
    log_path = Path(tmp_path) / f"gunicorn-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=full_env, stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None:
                    raise RuntimeError(log_path.read_text(errors="replace")) from None
                time.sleep(0.1)
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
