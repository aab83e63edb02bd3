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


# -- progress: a process that beats but finishes nothing while work waits is stuck -------------


def _progressed(kind: str, pid: int, seconds_ago: float) -> None:
    WorkerHeartbeat.objects.filter(kind=kind, pid=pid).update(
        last_progress_at=timezone.now() - timedelta(seconds=seconds_ago)
    )


def _pending_since(minutes: float):
    from tests.factories import RawEventFactory

    return RawEventFactory(received_at=timezone.now() - timedelta(minutes=minutes))


def test_a_beat_carries_the_last_progress_and_a_cluster_keeps_its_latest(client):
    heartbeat_beat(kind=CLUSTER, pid=21, host="a")
    assert _workers(client)[0]["last_progress"] is None
    heartbeat_beat(kind=CLUSTER, pid=21, host="a", progress_ago=5)
    first = WorkerHeartbeat.objects.get().last_progress_at
    assert timedelta(seconds=3) < timezone.now() - first < timedelta(seconds=7)
    # Another worker process of the same cluster finished something longer ago: kept as is.
    heartbeat_beat(kind=CLUSTER, pid=21, host="a", progress_ago=100)
    assert WorkerHeartbeat.objects.get().last_progress_at == first
    heartbeat_beat(kind=CLUSTER, pid=21, host="a", progress_ago=0)
    assert WorkerHeartbeat.objects.get().last_progress_at > first
    [worker] = _workers(client)
    assert worker["last_progress"] and worker["state"] == "live" and worker["stuck"] is False


def test_a_first_beat_with_progress_records_it(client):
    heartbeat_beat(kind=RUNNER, pid=22, host="a", progress_ago=1)
    assert WorkerHeartbeat.objects.get().last_progress_at is not None


def test_a_cluster_that_beats_but_finished_nothing_while_rows_wait_is_stuck(client, admin_client):
    heartbeat_beat(kind=CLUSTER, pid=31, host="box-a")
    _progressed(CLUSTER, 31, 20 * 60)
    _pending_since(minutes=12)
    [worker] = _workers(client)
    assert worker["state"] == "stuck" and worker["stuck"] is True and worker["stale"] is False
    assert 11 * 60 < worker["stuck_seconds"] < 13 * 60  # since the work began to wait
    page = admin_client.get("/admin/").content.decode()
    assert "Stuck consumer" in page
    assert "box-a pid 31 beats but has finished nothing for 12" in page
    assert ">stuck</strong> for 12" in page
    assert "No live consumer" not in page  # it is there: stuck is what is wrong


def test_a_cluster_that_never_progressed_is_stuck_once_work_has_waited(client):
    heartbeat_beat(kind=CLUSTER, pid=32, host="a")
    _pending_since(minutes=3)
    ready = client.get("/readyz?verbose=1", HTTP_X_ADMIN_KEY=_key()).json()
    assert [w["state"] for w in ready["workers"]] == ["stuck"]
    assert ready["stuck_workers"] == {"cluster": 1, "runner": 0}
    assert ready["live_workers"]["cluster"] == 1


def _key() -> str:
    _, key = api_key_create(name=f"prom-{ApiKey.objects.count()}", scopes=["metrics:read"])
    return key


def test_an_idle_cluster_with_nothing_waiting_is_not_stuck(client):
    heartbeat_beat(kind=CLUSTER, pid=33, host="a")
    _progressed(CLUSTER, 33, 3600)
    [worker] = _workers(client)
    assert worker["state"] == "live" and worker["stuck_seconds"] is None


def test_work_that_arrived_a_moment_ago_does_not_make_a_cluster_stuck(client):
    heartbeat_beat(kind=CLUSTER, pid=34, host="a")
    _progressed(CLUSTER, 34, 3600)
    _pending_since(minutes=0.5)
    assert _workers(client)[0]["state"] == "live"


def test_a_cluster_that_keeps_finishing_rows_is_not_stuck_behind_an_old_backlog(client):
    heartbeat_beat(kind=CLUSTER, pid=35, host="a", progress_ago=10)
    _pending_since(minutes=60)
    assert _workers(client)[0]["state"] == "live"


def test_a_row_due_again_counts_as_waiting_work_from_when_it_fell_due(client):
    from ingest.models import RawEventState
    from tests.factories import RawEventFactory

    heartbeat_beat(kind=CLUSTER, pid=36, host="a")
    _progressed(CLUSTER, 36, 3600)
    RawEventFactory(
        received_at=timezone.now() - timedelta(hours=1),
        state=RawEventState.RETRYING,
        attempts=1,
        next_attempt_at=timezone.now() - timedelta(minutes=5),
    )
    [worker] = _workers(client)
    assert worker["state"] == "stuck" and 4 * 60 < worker["stuck_seconds"] < 6 * 60


def test_rows_leased_or_backing_off_are_not_waiting_work(client):
    from ingest.models import RawEventState
    from tests.factories import RawEventFactory

    heartbeat_beat(kind=CLUSTER, pid=37, host="a")
    _progressed(CLUSTER, 37, 3600)
    later = timezone.now() + timedelta(minutes=5)
    RawEventFactory(received_at=timezone.now() - timedelta(hours=1), next_attempt_at=later)
    RawEventFactory(state=RawEventState.RETRYING, attempts=1, next_attempt_at=later)
    RawEventFactory(state=RawEventState.PARKED, next_attempt_at=None)  # waits for an event
    assert _workers(client)[0]["state"] == "live"


def test_a_stale_cluster_is_stale_not_stuck(client):
    heartbeat_beat(kind=CLUSTER, pid=38, host="a")
    _age(CLUSTER, 38, 60)
    _pending_since(minutes=30)
    [worker] = _workers(client)
    assert worker["state"] == "stale" and worker["stuck"] is False


def test_a_runner_is_judged_only_on_work_registered_for_runners(client):
    heartbeat_beat(kind=RUNNER, pid=39, host="a")
    _pending_since(minutes=30)  # a consumer's work, not a runner's
    assert _workers(client)[0]["state"] == "live"


def test_a_failing_work_reader_leaves_the_list_readable(client, monkeypatch):
    from ops import liveness

    def broken():
        raise RuntimeError("table missing")

    monkeypatch.setitem(liveness._work, RUNNER, {"broken": broken})
    heartbeat_beat(kind=RUNNER, pid=40, host="a")
    assert _workers(client)[0]["state"] == "live"


def test_stuck_after_is_a_setting(client, settings):
    settings.WORKER_STUCK_SECONDS = 3600
    heartbeat_beat(kind=CLUSTER, pid=41, host="a")
    _pending_since(minutes=30)
    assert _workers(client)[0]["state"] == "live"
