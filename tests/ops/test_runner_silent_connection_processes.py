"""A real `runworkflows` whose database connection goes silent after a step (a proxy between it
and PostgreSQL stops forwarding both ways without closing: no FIN, no RST, every byte still
acknowledged) drops that connection within 60 s and finishes the instance once the proxy forwards
again; while it is stuck it keeps beating and is shown stuck.

Only the proxy's connections are silenced, never the database, so no private cluster is needed."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.blackhole_proxy import (
    DROPPED_WITHIN,
    dropped_mid_statement,
    proxied_database_url,
    to_the_test_database,
    wait_until,
)
from tests.ops import silent_workflows  # noqa: F401  (registers the workflow here too)
from workflows import get_workflow
from workflows.models import WorkflowInstance

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
def runner(proxy, tmp_path, settings):
    settings.HEARTBEAT_SECONDS = 1  # this process judges staleness with the runner's interval
    settings.WORKER_STUCK_SECONDS = 3
    env = {
        **os.environ,
        "DATABASE_URL": proxied_database_url(proxy),
        "REDIS_URL": "",
        "VAR_DIR": str(tmp_path),
        "WORKFLOWS_MODULES": "tests.ops.silent_workflows",
        "WORKFLOWS_LEASE_SECONDS": "3",
        "WORKFLOWS_WAKE_TASKS": "false",
        "HEARTBEAT_SECONDS": "1",
        "LOG_LEVEL": "WARNING",
    }
    with open(tmp_path / "runner.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "runworkflows", "--poll", "0.2"],
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


def runner_worker(client, pid: int) -> dict | None:
    workers = client.get("/readyz?verbose=1").json()["workers"] or []
    return next((w for w in workers if w["kind"] == "runner" and w["pid"] == pid), None)


def heartbeat_ports(proxy) -> set[int]:
    """The proxy's upstream ports whose backend last ran a heartbeat statement."""
    ports = [link.upstream_port for link in proxy.links if link.upstream_port]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT client_port FROM pg_stat_activity "
            "WHERE client_port = ANY(%s) AND query ILIKE %s",
            [ports, "%worker_heartbeats%"],
        )
        return {port for (port,) in cursor.fetchall()}


def silence_during_a_step(proxy, runner, admin_client, tmp_path) -> None:
    """Start an instance, silence every connection of the runner but its heartbeat's (and hold
    new ones) while its second step runs (the first one's boundary is written), then let the
    step return: its boundary write goes into the silence."""
    wait_until("the runner beats", lambda: runner_worker(admin_client, runner.pid))
    folder = tmp_path / "steps"
    folder.mkdir()
    get_workflow("liveness-silent-boundary").create(id="silent", params={"folder": str(folder)})
    wait_until("the second step running", lambda: (folder / "stalled").exists())
    # Its first beat ends with a COMMIT (the row is created); the next ones are one UPDATE.
    beating = wait_until("the heartbeat's connection", lambda: heartbeat_ports(proxy))
    assert proxy.blackhole(lambda link: link.upstream_port not in beating, new=True) >= 1
    (folder / "go").touch()


def completed() -> bool:
    return WorkflowInstance.objects.filter(instance_id="silent", status="complete").exists()


def test_a_runner_whose_connection_goes_silent_after_a_boundary_drops_it_and_completes(
    runner, proxy, admin_client, tmp_path
):
    # Seen: a runworkflows whose connection went silent after a step-boundary write hung for
    # as long as anyone watched (with default TCP keepalives, about two hours) while it beat
    # every 2 s; its instance stayed active until another runner took the lease.
    silence_during_a_step(proxy, runner, admin_client, tmp_path)
    [silent, *_] = wait_until(
        "a silent connection dropped by the runner",
        lambda: dropped_mid_statement(proxy),
        DROPPED_WITHIN,
    )
    print(
        f"\nrunner: silent connection dropped {silent.client_closed_at - silent.held_since:.1f} s after its statement"
    )
    proxy.heal()
    wait_until("the instance completed", completed)
    assert WorkflowInstance.objects.get(instance_id="silent").output == 3  # 0 + 1 + 2


def test_a_runner_that_beats_but_writes_no_boundary_while_a_task_is_due_is_shown_stuck(
    runner, proxy, admin_client, tmp_path
):
    wait_until("the runner beats", lambda: runner_worker(admin_client, runner.pid))
    silence_during_a_step(proxy, runner, admin_client, tmp_path)
    # Its lease (3 s) runs out while it hangs: the task is due and nobody writes a boundary.
    stuck = wait_until(
        "the runner shown stuck",
        lambda: (w := runner_worker(admin_client, runner.pid)) and w["stuck"] and w,
    )
    assert stuck["state"] == "stuck" and stuck["stale"] is False
    page = admin_client.get("/admin/").content.decode()
    assert "Stuck workflow runner" in page
    wait_until(
        "a silent connection dropped by the runner",
        lambda: dropped_mid_statement(proxy),
        DROPPED_WITHIN,
    )
    proxy.heal()
    wait_until("the instance completed", completed)
    wait_until(
        "the runner no longer stuck",
        lambda: (runner_worker(admin_client, runner.pid) or {}).get("state") == "live",
    )
