"""`manage.py serve`: the production process set on one box — gunicorn (static files by
WhiteNoise, no --insecure), a qcluster and a workflow runner — supervised: a crashed child comes
back, SIGTERM stops them all, a taken port is refused before anything starts."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("how", ["--port", "PORT"])
def test_serve_refuses_a_taken_port_with_a_clear_message(how):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        argv = ["--port", str(port)] if how == "--port" else []
        env = {**os.environ, "PORT": str(port)} if how == "PORT" else None
        result = subprocess.run(
            [sys.executable, "manage.py", "serve", *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    assert result.returncode != 0
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "started" not in result.stdout  # nothing was started


def wait_for(predicate, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it has exited for our purpose.
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "\tZ" not in status.read_text().split("State:")[1][:4]


@pytest.mark.slow
@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_serve_runs_web_cluster_and_runner_restarts_a_crash_and_stops_on_sigterm(tmp_path):
    s = connection.settings_dict
    url = (
        f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or '127.0.0.1'}:"
        f"{s['PORT'] or 5432}/{s['NAME']}"
    )
    env = {**os.environ, "DATABASE_URL": url, "WEB_CONCURRENCY": "1", "LOG_LEVEL": "WARNING"}
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", "0"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:

        def started(name):
            return re.findall(rf"serve: {name}: started \(pid (\d+)\)", log.read_text())

        port = int(
            wait_for(lambda: re.findall(r"on http://127.0.0.1:(\d+)", log.read_text()), "port")[0]
        )
        pids = {
            name: int(wait_for(lambda n=name: started(n), name)[0])
            for name in ("web", "cluster", "runner")
        }
        base = f"http://127.0.0.1:{port}"
        css = wait_for(lambda: _get(f"{base}/static/admin/css/base.css"), "admin css")
        assert css.status_code == 200 and "text/css" in css.headers["content-type"]
        assert _get(f"{base}/api/docs/").status_code == 200

        os.kill(pids["cluster"], signal.SIGKILL)
        restarted = wait_for(lambda: started("cluster")[1:], "cluster restart", timeout=30)
        assert int(restarted[0]) != pids["cluster"]
        assert "exited with -9" in log.read_text()

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        everyone = [int(p) for name in ("web", "cluster", "runner") for p in started(name)]
        assert not [pid for pid in everyone if alive(pid)], log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _get(url: str):
    try:
        return httpx.get(url, timeout=5)
    except httpx.HTTPError:
        return None


def test_web_workers_are_web_concurrency_or_cores_plus_one_as_the_readme_says(monkeypatch):
    from ops.supervisor import default_web_workers

    assert "`WEB_CONCURRENCY` workers, default cores + 1" in (ROOT / "README.md").read_text()
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    assert default_web_workers() == (os.cpu_count() or 1) + 1
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    assert default_web_workers() == 3
