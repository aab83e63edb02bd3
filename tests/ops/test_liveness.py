"""Worker heartbeats and what the console's front page and /readyz?verbose=1 make of them."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import Schedule

from ops.liveness import CLUSTER, RUNNER, heartbeat_beat, heartbeat_remove
from ops.models import ApiKey, WorkerHeartbeat
from ops.services import api_key_create

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _beats(settings):
    settings.HEARTBEAT_SECONDS = 15
    settings.HEARTBEAT_FORGET_SECONDS = 3600


def _age(kind: str, pid: int, seconds: float) -> None:
    WorkerHeartbeat.objects.filter(kind=kind, pid=pid).update(
        last_seen_at=timezone.now() - timedelta(seconds=seconds)
    )


def _workers(client) -> list[dict]:
    _, key = api_key_create(name=f"prom-{ApiKey.objects.count()}", scopes=["metrics:read"])
    return client.get("/readyz?verbose=1", HTTP_X_ADMIN_KEY=key).json()["workers"]


def test_a_beat_records_the_process_once_and_refreshes_it(client):
    heartbeat_beat(kind=CLUSTER, pid=101, host="box-a")
    first = WorkerHeartbeat.objects.get()
    _age(CLUSTER, 101, 10)
    heartbeat_beat(kind=CLUSTER, pid=101, host="box-a")
    row = WorkerHeartbeat.objects.get()
    assert row.started_at == first.started_at
    assert row.last_seen_at >= first.last_seen_at
    assert row.version
    [worker] = _workers(client)
    assert worker["kind"] == "cluster" and worker["host"] == "box-a" and worker["pid"] == 101
    assert worker["stale"] is False and worker["last_seen"]


def test_a_process_is_stale_after_two_missed_beats_and_forgotten_later(client):
    heartbeat_beat(kind=CLUSTER, pid=1, host="a")
    heartbeat_beat(kind=CLUSTER, pid=2, host="a")
    heartbeat_beat(kind=RUNNER, pid=3, host="a")
    _age(CLUSTER, 2, 31)  # two 15 s beats missed
    _age(RUNNER, 3, 3601)  # beyond HEARTBEAT_FORGET_SECONDS
    workers = {w["pid"]: w for w in _workers(client)}
    assert workers[1]["stale"] is False
    assert workers[2]["stale"] is True
    assert 3 not in workers
    heartbeat_beat(kind=CLUSTER, pid=1, host="a", forget=True)
    assert not WorkerHeartbeat.objects.filter(pid=3).exists()


def test_a_clean_stop_leaves_the_list(client):
    heartbeat_beat(kind=RUNNER, pid=7, host="a")
    heartbeat_remove(kind=RUNNER, pid=7, host="a")
    assert _workers(client) == []


def test_dashboard_says_no_live_consumer_and_no_runner_when_nothing_beats(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert "No live consumer" in page
    assert "No live workflow runner" in page


def test_dashboard_marks_a_stale_cluster_and_counts_a_live_runner(admin_client):
    heartbeat_beat(kind=CLUSTER, pid=11, host="box-a")
    heartbeat_beat(kind=RUNNER, pid=12, host="box-b")
    _age(CLUSTER, 11, 60)
    page = admin_client.get("/admin/").content.decode()
    assert "No live consumer" in page
    # A runworkflows process keeps workflows moving without a cluster.
    assert "No live workflow runner" not in page
    assert "stale" in page and "box-a" in page and "box-b" in page


def test_a_live_cluster_clears_both_banners(admin_client):
    heartbeat_beat(kind=CLUSTER, pid=11, host="box-a")
    page = admin_client.get("/admin/").content.decode()
    assert "No live consumer" not in page
    assert "No live workflow runner" not in page


def test_dashboard_lists_a_schedule_not_run_for_twice_its_period(admin_client):
    now = timezone.now()
    Schedule.objects.create(
        name="terra-drain",
        func="ingest.tasks.drain",
        schedule_type=Schedule.MINUTES,
        minutes=5,
        next_run=now - timedelta(minutes=6),  # last run ~11 min ago
    )
    Schedule.objects.create(
        name="fine-schedule",
        func="ingest.tasks.drain",
        schedule_type=Schedule.MINUTES,
        minutes=5,
        next_run=now - timedelta(minutes=2),  # last run ~7 min ago: late, not 2x
    )
    page = admin_client.get("/admin/").content.decode()
    assert "terra-drain" in page and "overdue" in page
    assert "fine-schedule" not in page


def test_dashboard_shows_the_oldest_pending_raw_event_age(admin_client):
    from tests.factories import RawEventFactory

    RawEventFactory(received_at=timezone.now() - timedelta(minutes=10))
    page = admin_client.get("/admin/").content.decode()
    assert "Oldest pending raw event" in page
    assert "s old" in page


def test_dashboard_workflows_panel_counts_errored_and_overdue_waits(admin_client):
    from workflows.models import Status, TaskKind, WorkflowInstance, WorkflowTask

    now = timezone.now()
    common = {"workflow_name": "wf", "version": 1, "created_at": now, "updated_at": now}
    WorkflowInstance.objects.create(instance_id="e1", status=Status.ERRORED, **common)
    waiting = WorkflowInstance.objects.create(instance_id="w1", status=Status.WAITING, **common)
    WorkflowTask.objects.create(
        instance=waiting,
        run_number=1,
        kind=TaskKind.WAKE,
        priority=0,
        run_at=now - timedelta(minutes=5),
        created_at=now,
    )
    page = admin_client.get("/admin/").content.decode()
    assert "errored: 1" in page and "waiting: 1" in page
    assert "Errored in the last 24 h: <strong" in page
    assert "waits overdue (sleeps ended, waits timed out): <strong" in page
