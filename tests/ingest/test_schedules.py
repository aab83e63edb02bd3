"""Schedules: each app registers its own, setup is idempotent, and each task does its job (drain,
reconcile, clean-up)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import Schedule

from ingest import tasks
from ingest.models import RawEventState, TraceEvent
from ingest.traces import trace_write
from ops import schedules
from ops import tasks as ops_tasks
from ops.models import IdempotencyKey
from tests.factories import RawEventFactory, TerraConnectionFactory

pytestmark = pytest.mark.django_db


def snapshot():
    return sorted(
        Schedule.objects.values_list("id", "name", "func", "schedule_type", "minutes", "next_run")
    )


def test_setup_twice_leaves_the_same_rows():
    schedules.schedules_setup()
    first = snapshot()
    created = schedules.schedules_setup()
    assert snapshot() == first
    assert not any(was_created for _, was_created in created)
    by_name = {row[1]: row for row in first}
    assert by_name["terra-drain"][2:5] == ("ingest.tasks.drain_task", Schedule.MINUTES, 5)
    assert by_name["terra-reconcile"][2:4] == ("ingest.tasks.reconcile_task", Schedule.DAILY)
    reconcile_at = by_name["terra-reconcile"][5]
    assert (reconcile_at.hour, reconcile_at.minute) == (3, 0)
    assert reconcile_at > timezone.now()
    assert by_name["ingest-cleanup"][2] == "ingest.tasks.cleanup_task"
    assert by_name["ops-cleanup"][2] == "ops.tasks.cleanup"
    assert by_name["workflows-sweep"][2:5] == ("workflows.tasks.sweep", Schedule.MINUTES, 1)
    assert by_name["workflows-gc"][2] == "workflows.tasks.gc"


def test_setup_repairs_a_changed_row_and_drops_duplicates():
    schedules.schedules_setup()
    Schedule.objects.filter(name="terra-drain").update(minutes=60)
    Schedule.objects.create(name="terra-drain", func="x.y", schedule_type=Schedule.ONCE)
    schedules.schedules_setup()
    drains = Schedule.objects.filter(name="terra-drain")
    assert drains.count() == 1 and drains.get().minutes == 5


def test_every_schedule_points_at_a_task_that_exists():
    from django.utils.module_loading import import_string

    assert {spec.name for spec in schedules.schedule_specs()} >= {
        "terra-drain",
        "terra-reconcile",
        "ingest-cleanup",
        "ops-cleanup",
        "workflows-sweep",
        "workflows-gc",
    }
    for spec in schedules.schedule_specs():
        assert callable(import_string(spec.func)), spec


def test_drain_task_runs_the_default_drain_and_traces_it():
    pending = RawEventFactory(state=RawEventState.PENDING)
    RawEventFactory(state=RawEventState.PARKED, process_error="no_connection_for_terra_user")
    summary = tasks.drain_task()
    assert summary["ids"] == [pending.pk]
    run = TraceEvent.objects.get(event="drain_run")
    assert run.data["selected"] == 1 and run.data["source"] == "schedule"


def test_reconcile_task_backfills_every_active_connection_and_survives_one_failure(terra):
    TerraConnectionFactory(terra_user_id="t-ok")
    TerraConnectionFactory(terra_user_id="t-bad")
    TerraConnectionFactory(terra_user_id="t-off", deactivated_at=timezone.now())

    def answer(request):
        if request.url.params["user_id"] == "t-bad":
            return (500, {"message": "nope"})
        return (200, {"status": "processing"})

    for data_type in ("activity", "sleep", "daily", "body"):
        terra.on("GET", f"/v2/{data_type}", answer)
    summary = tasks.reconcile_task()
    assert summary == {"connections": 2, "requested": 4, "failed": 4, "days": 7}
    asked = {r.url.params["user_id"] for r in terra.requests}
    assert asked == {"t-ok", "t-bad"}
    one = terra.requests[0].url.params
    assert (
        timezone.datetime.fromisoformat(one["end_date"]).date()
        - timezone.datetime.fromisoformat(one["start_date"]).date()
    ).days == 7
    assert TraceEvent.objects.filter(event="reconcile_run").count() == 1


def test_reconcile_goes_on_when_a_connection_raises_unexpectedly(monkeypatch, terra):
    TerraConnectionFactory(terra_user_id="t-1")
    TerraConnectionFactory(terra_user_id="t-2")
    from ingest import connections

    real = connections.connection_backfill

    def flaky(*, connection, days, **kw):
        if connection.terra_user_id == "t-1":
            raise RuntimeError("bug")
        return real(connection=connection, days=days, **kw)

    monkeypatch.setattr(connections, "connection_backfill", flaky)
    summary = connections.connections_backfill_recent()
    assert summary["connections"] == 2 and summary["requested"] == 4 and summary["failed"] == 4


def test_cleanup_deletes_expired_keys_and_old_traces(settings):
    settings.TRACE_RETENTION_DAYS = 30
    now = timezone.now()
    for key, expires in (("old", now - timedelta(hours=1)), ("live", now + timedelta(hours=1))):
        IdempotencyKey.objects.create(
            principal="p", key=key, endpoint="/e", body_hash="h", expires_at=expires
        )
    trace_write("normalized")
    trace_write("normalized")
    TraceEvent.objects.filter(pk=TraceEvent.objects.first().pk).update(
        created_at=now - timedelta(days=31)
    )
    assert tasks.cleanup_task() == {"traces": 1, "wiped_deliveries": 0, "wiped_references": 0}
    assert ops_tasks.cleanup() == {"idempotency_keys": 1}
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["live"]
    assert TraceEvent.objects.count() == 1
