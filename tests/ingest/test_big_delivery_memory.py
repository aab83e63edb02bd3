"""A 40 MB delivery costs the web worker at most twice its size in peak memory: the body is read
once into one buffer, decoded without a copy, and sent to PostgreSQL in pieces (a real gunicorn
worker; its peak resident set read from /proc)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ingest.models import RawEvent
from tests.conftest import sign
from tests.ops.live_server import database_url, free_port

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only, pytest.mark.slow]


def _peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _samples_body(size: int) -> bytes:
    """A daily delivery of heart-rate samples, where Terra puts its large payloads."""
    sample = '{"timestamp":"2026-06-01T00:00:00.000000+01:00","bpm":64}'
    head = '{"type":"daily","user":{"user_id":"t-big","provider":"GARMIN"},"data":[{"metadata":'
    head += '{"start_time":"2026-06-01T00:00:00+01:00"},"heart_rate_data":{"detailed":'
    head += '{"hr_samples":['
    tail = "]}}}]}"
    count = (size - len(head) - len(tail)) // (len(sample) + 1)
    return (head + ",".join([sample] * count) + tail).encode()


def test_a_40_mb_delivery_costs_the_web_worker_at_most_twice_its_size(tmp_path):
    # Seen: 3.0-3.1x its size in peak RSS.
    body = _samples_body(40 * 1024 * 1024)
    json.loads(body)  # a real delivery, not padding
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "TERRA_WEBHOOK_SECRET": "test-secret",
        "REDIS_URL": "",
        "VAR_DIR": str(tmp_path),
        "LOG_LEVEL": "WARNING",
    }
    argv = [sys.executable, "-m", "gunicorn", "config.wsgi:application", "-w", "1"]
    argv += ["-b", f"127.0.0.1:{port}", "--config", "python:config.gunicorn_conf"]
    master = subprocess.Popen(argv, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.1)
        (worker,) = Path(f"/proc/{master.pid}/task/{master.pid}/children").read_text().split()
        httpx.get(f"{base}/webhook/terra")  # the webhook's code is loaded
        before = _peak_kb(int(worker))
        response = httpx.post(
            f"{base}/webhook/terra",
            content=body,
            headers={"Content-Type": "application/json", "Terra-Signature": sign(body)},
            timeout=120,
        )
        growth = (_peak_kb(int(worker)) - before) * 1024 / len(body)
    finally:
        master.send_signal(signal.SIGINT)
        master.wait(timeout=20)
    assert response.status_code == 200, response.content
    assert bytes(RawEvent.objects.get().body) == body
    assert growth <= 2.0, f"peak memory grew by {growth:.2f}x the body"
