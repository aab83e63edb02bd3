"""Liveness with real processes on PostgreSQL: a qcluster frozen with SIGSTOP turns stale on the
console's front page and in /readyz?verbose=1, and comes back when it is thawed; a runworkflows
process beats while it runs and leaves the list when it stops cleanly."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.slow,
]
WAIT_SECONDS = 60  # a bound for a stuck test, not a figure
BEAT = 1  # HEARTBEAT_SECONDS of the spawned processes: stale after 2 s


@pytest.fixture(autouse=True)
def _beats(settings):
    settings.HEARTBEAT_SECONDS = BEAT  # this process judges staleness with the same interval


def _database_url() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or '5432'}/{s['NAME']}"


def _spawn(tmp_path, *args):
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": "",
        "VAR_DIR": str(tmp_path),
        "Q_CLUSTER_NAME": settings.Q_CLUSTER["name"],
        "HEARTBEAT_SECONDS": str(BEAT),
        "INGEST_POLL_SECONDS": "0",
        "LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop(proc) -> None:
    os.killpg(proc.pid, signal.SIGCONT)
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _wait_for_workers(client, predicate) -> list[dict]:
    deadline = time.monotonic() + WAIT_SECONDS
    workers = []
    while time.monotonic() < deadline:
        workers = client.get("/readyz?verbose=1").json()["workers"]
        if predicate(workers):
            return workers
        time.sleep(0.2)
    raise AssertionError(f"workers never matched: {workers}")


def _cluster(pid):
    return lambda workers: [w for w in workers if w["kind"] == "cluster" and w["pid"] == pid]


def test_a_frozen_cluster_is_stale_on_the_dashboard_and_in_readyz(admin_client, tmp_path):
    cluster = _spawn(tmp_path, "qcluster")
    try:
        live = _wait_for_workers(
            admin_client, lambda ws: any(not w["stale"] for w in _cluster(cluster.pid)(ws))
        )
        assert [w["pid"] for w in live if w["kind"] == "cluster"] == [cluster.pid]
        page = admin_client.get("/admin/").content.decode()
        assert "No live consumer" not in page

        os.killpg(cluster.pid, signal.SIGSTOP)  # the whole cluster: sentinel, workers, pusher
        stale = _wait_for_workers(
            admin_client, lambda ws: all(w["stale"] for w in _cluster(cluster.pid)(ws))
        )
        assert _cluster(cluster.pid)(stale)[0]["stale"] is True
        ready = admin_client.get("/readyz?verbose=1").json()
        assert ready["live_workers"]["cluster"] == 0
        page = admin_client.get("/admin/").content.decode()
        assert "No live consumer" in page
        assert "No live workflow runner" in page
        assert ">stale<" in page

        os.killpg(cluster.pid, signal.SIGCONT)
        _wait_for_workers(
            admin_client, lambda ws: any(not w["stale"] for w in _cluster(cluster.pid)(ws))
        )
        assert "No live consumer" not in admin_client.get("/admin/").content.decode()
    finally:
        _stop(cluster)


def test_a_runner_beats_while_it_runs_and_leaves_the_list_when_stopped(admin_client, tmp_path):
    runner = _spawn(tmp_path, "runworkflows", "--poll", "0.5")
    try:
        workers = _wait_for_workers(
            admin_client,
            lambda ws: any(w["kind"] == "runner" and w["pid"] == runner.pid for w in ws),
        )
        assert not [w for w in workers if w["kind"] == "runner"][0]["stale"]
        page = admin_client.get("/admin/").content.decode()
        assert "No live workflow runner" not in page
        assert "No live consumer" in page
    finally:
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=30) == 0
    assert admin_client.get("/readyz?verbose=1").json()["workers"] == []
