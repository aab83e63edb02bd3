"""Cron triggers with the harness on SQLite and PostgreSQL: ids and params of a
fire, first sight fires nothing earlier, missed fire times collapse into the most recent one,
the id is the lock, pause/resume (audited), time zones, the runner's wake time, the API."""

from datetime import UTC, datetime, timedelta

import pytest

from ops.models import AuditLog
from tests.workflows.test_http_support import ALL_SCOPES, READ
from workflows import services, triggers
from workflows.engine import next_due_at
from workflows.errors import InvalidWorkflowDefinition
from workflows.models import WorkflowInstance, WorkflowSchedule


def cron_ids(name: str = "cron-quarter") -> list[str]:
    return sorted(
        WorkflowInstance.objects.filter(workflow_name=name).values_list("instance_id", flat=True)
    )


def test_a_fire_creates_cron_id_with_scheduled_time_and_runs(harness, cron_fleet):
    harness.run_until_idle()  # first sight at 12:00: rows created, nothing fired
    assert cron_ids() == []
    harness.advance("15 minutes")
    assert cron_ids() == ["cron-20260101T1215Z"]
    assert harness.status("cron-quarter", "cron-20260101T1215Z") == {
        "status": "complete",
        "output": {"scheduled_time": "2026-01-01T12:15:00Z"},
    }


def test_a_schedule_seen_for_the_first_time_fires_nothing_earlier(harness, cron_fleet):
    harness.runtime.set(datetime(2026, 1, 1, 12, 14, 59, tzinfo=UTC))
    harness.run_until_idle()
    assert cron_ids() == []
    row = WorkflowSchedule.objects.get(workflow_name="cron-quarter", expression="*/15 * * * *")
    assert row.next_fire_at == datetime(2026, 1, 1, 12, 15, tzinfo=UTC)


def test_missed_fire_times_run_once_for_the_most_recent(harness, cron_fleet):
    harness.run_until_idle()
    harness.runtime.advance(timedelta(hours=3, minutes=20))  # nothing ran for 3 h 20 min
    harness.run_until_idle()
    # Not 16 instances: each schedule fires its most recent time once ("*/15": 15:15, "0 *": 15:00).
    assert cron_ids() == ["cron-20260101T1500Z", "cron-20260101T1515Z"]
    harness.advance("10 minutes")  # 15:30 fires normally afterwards
    assert cron_ids() == ["cron-20260101T1500Z", "cron-20260101T1515Z", "cron-20260101T1530Z"]


def test_the_id_is_the_lock(harness, cron_fleet):
    harness.run_until_idle()
    # Another cluster already fired 12:15 (same database, same id).
    services.instance_create(
        workflow_name="cron-quarter", instance_id="cron-20260101T1215Z", params={"other": 1}
    )
    harness.runtime.advance(timedelta(minutes=15))
    quarter = [c for c in triggers.fire_due() if c.startswith("cron-quarter/")]
    assert quarter == []  # nothing new created
    assert triggers.fire_due() == []  # and the rows moved on, so no second attempt
    assert cron_ids() == ["cron-20260101T1215Z"]
    kept = WorkflowInstance.objects.get(
        workflow_name="cron-quarter", instance_id="cron-20260101T1215Z"
    )
    assert kept.params == {"other": 1}


def test_two_schedules_of_one_workflow_due_the_same_minute_create_one_instance(harness, cron_fleet):
    harness.run_until_idle()
    harness.advance("60 minutes")  # 13:00 matches "*/15" and "0 *"
    assert cron_ids() == ["cron-20260101T1300Z"]


def test_schedules_fire_in_their_time_zone(harness, cron_fleet):
    harness.run_until_idle()
    harness.advance("20 hours")  # 09:00 Berlin on Jan 2 is 08:00 UTC
    assert cron_ids("cron-berlin") == ["cron-20260102T0800Z"]
    assert harness.status("cron-berlin", "cron-20260102T0800Z")["output"] == (
        "2026-01-02T08:00:00Z"
    )


def test_the_runner_wakes_for_the_next_fire_time(harness, cron_fleet):
    harness.run_until_idle()
    assert next_due_at() == datetime(2026, 1, 1, 12, 1, tzinfo=UTC)  # cron-minutely
    triggers.pause(workflow_name="cron-minutely")
    assert next_due_at() == datetime(2026, 1, 1, 12, 15, tzinfo=UTC)


def test_paused_schedules_do_not_fire_and_resume_skips_what_was_missed(harness, cron_fleet):
    harness.run_until_idle()
    triggers.pause(workflow_name="cron-quarter")
    harness.advance("1 hour")
    assert cron_ids() == []
    harness.runtime.advance(timedelta(minutes=5))  # 13:05
    triggers.resume(workflow_name="cron-quarter")
    harness.run_until_idle()
    assert cron_ids() == []  # 13:00 was missed while paused: skipped
    harness.advance("10 minutes")
    assert cron_ids() == ["cron-20260101T1315Z"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"schedules": ["*/15 * * *"]},
        {"schedules": ["61 * * * *"]},
        {"schedules": ["* * * * * *"]},  # no seconds field: ids have minute resolution
        {"schedules": [5]},
        {"schedules": ["* * * * *"], "schedule_timezone": "Mars/Olympus"},
    ],
)
def test_bad_schedules_are_definition_errors(kwargs):
    from workflows import workflow

    with pytest.raises(InvalidWorkflowDefinition):
        workflow(name="never-registered", **kwargs)


# -- API, audit ----------------------------------------------------------------------------


def test_get_workflow_lists_schedules_with_next_fire_and_paused(operator_api, harness, cron_fleet):
    api = operator_api(READ)
    body = api.get("/v1/workflows/cron-quarter").json()
    assert body["name"] == "cron-quarter"
    assert body["versions"] == [1] and body["active_version"] == 1
    assert body["schedules"] == [
        {
            "cron": "*/15 * * * *",
            "timezone": "UTC",
            "next_fire_at": "2026-01-01T12:15:00Z",
            "paused": False,
            "last_fired_at": None,
        },
        {
            "cron": "0 * * * *",
            "timezone": "UTC",
            "next_fire_at": "2026-01-01T13:00:00Z",
            "paused": False,
            "last_fired_at": None,
        },
    ]
    assert body["concurrency"] is None
    assert body["retention"] is None


def test_pause_and_resume_schedules_over_http_are_audited(operator_api, harness, cron_fleet):
    api = operator_api(*ALL_SCOPES)
    paused = api.post("/v1/workflows/cron-quarter/schedules/pause")
    assert paused.status_code == 200
    assert {s["paused"] for s in paused.json()["schedules"]} == {True}
    harness.advance("1 hour")
    assert cron_ids() == []
    resumed = api.post("/v1/workflows/cron-quarter/schedules/resume")
    assert {s["paused"] for s in resumed.json()["schedules"]} == {False}
    actions = list(
        AuditLog.objects.filter(resource="workflow:cron-quarter")
        .order_by("id")
        .values_list("action", "result")
    )
    assert actions == [
        ("workflow.schedules_pause", "ok"),
        ("workflow.schedules_resume", "ok"),
    ]


def test_pausing_needs_the_manage_scope_and_a_known_workflow(operator_api, cron_fleet):
    reader = operator_api(READ)
    assert reader.post("/v1/workflows/cron-quarter/schedules/pause").status_code == 403
    missing = operator_api(*ALL_SCOPES).post("/v1/workflows/nope/schedules/pause")
    assert (missing.status_code, missing.json()["code"]) == (404, "workflow_not_found")
    assert reader.get("/v1/workflows/nope").status_code == 404
