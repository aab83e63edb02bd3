"""Timers on time with real processes on PostgreSQL: an idle `runworkflows`
sleeps on LISTEN, not on a poll, and is woken by the NOTIFY that new work, an event or a
suspension committed elsewhere sends. The runners here get an idle cap (--poll) far longer
than the waits below, so only a notification (or the due time it then reads) can wake them.
Correctness only: wake latency is measured by bench/workflows.py --only makerun."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from workflows import services
from workflows.engine import run_one, wake
from workflows.models import WorkflowInstance, WorkflowTask

pytestmark = [pytest.mark.postgres_only, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
IDLE_CAP = "600"  # seconds: far beyond every wait below


@pytest.fixture
def idle_runner(tmp_path):
    """One `runworkflows --poll 600` on the test database, started and listening."""
    s = connection.settings_dict
    url = (
        f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or '127.0.0.1'}:"
        f"{s['PORT'] or 5432}/{s['NAME']}"
    )
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "WORKFLOWS_MODULES": "tests.workflows.sample_workflows",
        "LOG_LEVEL": "WARNING",
    }
    log = open(tmp_path / "runner.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "runworkflows", "--poll", IDLE_CAP],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=log,
    )
    try:
        # Up and idle: it LISTENs (or, a runner that cannot, has surely started by then).
        deadline = time.monotonic() + 30
        while not listening() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # past its first look for work: from here on it sleeps until woken
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def listening() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN workflows_wake%%'"
        )
        return cursor.fetchone()[0] > 0


def wait_for(predicate, *, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def status_of(instance_id: str) -> str:
    return WorkflowInstance.objects.get(instance_id=instance_id).status


def waits_for_go(instance_id: str) -> bool:
    return WorkflowTask.objects.filter(
        instance__instance_id=instance_id, wait_event_type="go", locked_until__isnull=True
    ).exists()


def test_an_idle_runner_runs_new_work_its_two_second_sleep_and_an_event(idle_runner):
    services.instance_create(workflow_name="nap-and-event", instance_id="n1")
    # New work woke it; it ran to the sleep, read the due time, woke again for it.
    wait_for(lambda: waits_for_go("n1"), what="the sleep to be over", timeout=30)
    services.instance_send_event(
        instance=WorkflowInstance.objects.get(instance_id="n1"), type="go", payload={"ok": 1}
    )
    wait_for(lambda: status_of("n1") == "complete", what="the event to wake it", timeout=30)
    assert WorkflowInstance.objects.get(instance_id="n1").output == {"ok": 1}


def test_a_sleep_suspended_by_another_process_wakes_the_idle_runner(idle_runner, monkeypatch):
    # Another process (a cluster's wake task, here the test) runs the instance to its sleep;
    # the idle runner learns the new due time only from the suspension's NOTIFY.
    with monkeypatch.context() as quiet:
        quiet.setattr(wake, "schedule_wake", lambda: None)  # a create it never hears of
        services.instance_create(workflow_name="sleepy", instance_id="s1")
    assert run_one(owner="test-process") == "suspended"
    wait_for(lambda: status_of("s1") == "complete", what="the runner to wake it", timeout=30)
