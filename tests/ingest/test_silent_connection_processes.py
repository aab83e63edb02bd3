"""A real qcluster whose database connection goes silent (a proxy between it and PostgreSQL stops
forwarding both ways without closing: no FIN, no RST, every byte still acknowledged) is shown
stuck while it keeps beating, drops that connection within 60 s, and finishes the work once the
proxy forwards again.

Only the proxy's connections are silenced, never the database: the test database serves
everything else as usual, so no private cluster is needed."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from ingest.models import RawEvent, RawEventState
from ingest.queue import queue_publish
from tests.blackhole_proxy import (
    DROPPED_WITHIN,
    dropped_mid_statement,
    proxied_database_url,
    to_the_test_database,
    wait_until,
)
from tests.factories import RawEventFactory

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.slow,
]


@pytest.fixture
def proxy():
    with to_the_test_database() as proxy:
        yield proxy


@pytest.fixture
def cluster(proxy, tmp_path, settings):
    settings.HEARTBEAT_SECONDS = 1  # this process judges staleness with the cluster's interval
    settings.WORKER_STUCK_SECONDS = 3
    (tmp_path / "stall").mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": proxied_database_url(proxy),
        "REDIS_URL": "",
        "VAR_DIR": str(tmp_path),
        "Q_CLUSTER_NAME": settings.Q_CLUSTER["name"],
        "Q_WORKERS": "1",  # its one worker stuck is the whole cluster stuck
        "HEARTBEAT_SECONDS": "1",
        "INGEST_LEASE_SECONDS": "3",
        "HARNESS_STALL_DIR": str(tmp_path / "stall"),
        "LOG_LEVEL": "WARNING",
    }
    with open(tmp_path / "cluster.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests/ingest/qcluster_harness.py")],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def cluster_worker(client, pid: int) -> dict | None:
    workers = client.get("/readyz?verbose=1").json()["workers"] or []
    return next((w for w in workers if w["kind"] == "cluster" and w["pid"] == pid), None)


def client_port_of(backend: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT client_port FROM pg_stat_activity WHERE pid = %s", [backend])
        return cursor.fetchone()[0]


def noop_rows(n: int) -> list[RawEvent]:
    return [
        RawEventFactory(event_type="noop_test", payload={"type": "noop_test"}) for _ in range(n)
    ]


def all_processed(rows: list[RawEvent]) -> bool:
    states = RawEvent.objects.filter(pk__in=[row.pk for row in rows]).values_list(
        "state", flat=True
    )
    return set(states) == {RawEventState.PROCESSED}


def test_a_cluster_whose_connection_goes_silent_is_shown_stuck_then_drops_it_and_finishes(
    cluster, proxy, admin_client, tmp_path
):
    # Seen: a qcluster whose workers were stuck for 20 minutes stayed "live" on the console and
    # in /readyz?verbose=1 (its heartbeat is a thread), and a connection that went silent
    # (no FIN, no RST) hung its worker for as long as anyone watched.
    first = noop_rows(1)
    queue_publish(first[0].pk)
    wait_until("the first row processed", lambda: all_processed(first))
    wait_until(
        "the cluster's progress shown",
        lambda: (cluster_worker(admin_client, cluster.pid) or {}).get("last_progress"),
    )

    stall = RawEventFactory(event_type="stall_once", payload={"type": "stall_once"})
    waiting = noop_rows(3)
    queue_publish(stall.pk)
    folder = tmp_path / "stall"
    backend = int(wait_until("the worker's backend", lambda: _read(folder / "backend")))
    port = client_port_of(backend)
    # That connection goes silent; connections made from now on are held too (the worker's
    # reconnects fail on connect_timeout). The heartbeat's own connection keeps working.
    assert proxy.blackhole(lambda link: link.upstream_port == port, new=True) == 1
    (folder / "go").touch()

    stuck = wait_until(
        "the cluster shown stuck",
        lambda: (w := cluster_worker(admin_client, cluster.pid)) and w["stuck"] and w,
    )
    assert stuck["state"] == "stuck" and stuck["stale"] is False and stuck["stuck_seconds"] >= 0
    page = admin_client.get("/admin/").content.decode()
    assert "Stuck consumer" in page and "No live consumer" not in page

    [silent] = wait_until(
        "the silent connection dropped", lambda: dropped_mid_statement(proxy), DROPPED_WITHIN
    )
    assert silent.upstream_port == port
    print(
        f"\nconsumer: silent connection dropped {silent.client_closed_at - silent.held_since:.1f} s after its statement"
    )

    proxy.heal()
    wait_until("every row processed", lambda: all_processed([stall, *waiting]))
    wait_until(
        "the cluster no longer stuck",
        lambda: (cluster_worker(admin_client, cluster.pid) or {}).get("state") == "live",
    )


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None
