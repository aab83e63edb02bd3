"""50 identical deliveries at once against a real server process (gunicorn, 2 workers × 8
threads) on the test database: exactly one row, fifty 200s."""

import http.client
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from django.db import connection

from ingest.models import RawEvent
from tests.conftest import load_fixture, sign

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url(tmp_path) -> tuple[str, Path | None]:
    """A URL the server process can open: the PostgreSQL test database itself, or for SQLite
    (an in-memory test database) a file copy of it, schema and all."""
    settings = connection.settings_dict
    if connection.vendor == "postgresql":
        auth = settings["USER"] + (f":{settings['PASSWORD']}" if settings["PASSWORD"] else "")
        host = settings["HOST"] or "127.0.0.1"
        port = settings["PORT"] or "5432"
        return f"postgres://{auth}@{host}:{port}/{settings['NAME']}", None
    path = tmp_path / "live.sqlite3"
    connection.ensure_connection()
    target = sqlite3.connect(path)
    connection.connection.backup(target)
    target.close()
    return f"sqlite:///{path}", path


@pytest.fixture
def server(tmp_path):
    url, sqlite_path = _database_url(tmp_path)
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "TERRA_WEBHOOK_SECRET": "test-secret",
        "DEBUG": "0",
        "REDIS_URL": "",
        "VAR_DIR": str(tmp_path),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            "2",
            "--threads",
            "8",
            "--preload",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(f"{base}/webhook/terra", timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None:
                    raise RuntimeError(proc.stderr.read().decode()) from None
                time.sleep(0.05)
        yield base, sqlite_path
    finally:
        proc.send_signal(signal.SIGINT)  # gunicorn: quick shutdown
        proc.wait(timeout=10)


def _rows(sqlite_path) -> int:
    if sqlite_path is None:
        return RawEvent.objects.count()
    with sqlite3.connect(sqlite_path) as db:
        return db.execute("SELECT count(*) FROM raw_events").fetchone()[0]


def test_fifty_parallel_identical_deliveries_make_one_row(server):
    base, sqlite_path = server
    body = json.dumps(load_fixture("daily.json")).encode()
    headers = {"Content-Type": "application/json", "Terra-Signature": sign(body)}
    start = threading.Barrier(50)
    answers: list[tuple[int, dict]] = []
    lock = threading.Lock()

    host, port = base.removeprefix("http://").split(":")

    def post():
        # Plain http.client: one cheap connection per thread, all released by one barrier.
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        start.wait()
        conn.request("POST", "/webhook/terra", body=body, headers=headers)
        response = conn.getresponse()
        answer = (response.status, json.loads(response.read()))
        conn.close()
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=post) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [status for status, _ in answers] == [200] * 50
    new = [body for _, body in answers if not body.get("duplicate")]
    assert len(new) == 1 and new[0]["type"] == "daily"
    assert _rows(sqlite_path) == 1
