"""Lists filter by time range (?since=…&until=…, UTC unless an offset is given); a value that
is not a time is refused the admin's way, never a 500."""

from datetime import UTC, datetime, timedelta

from ops.models import AuditLog
from tests.factories import RawEventFactory
from workflows.models import WorkflowInstance


def rows(console, url) -> str:
    response = console.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_instances_filter_by_created_since_and_until(console, harness):
    harness.create("console-many", id="early", params={"steps": 1})
    harness.advance("2 hours")
    harness.create("console-many", id="late", params={"steps": 1})
    base = "/admin/workflows/workflowinstance/"
    since = rows(console, base + "?since=2026-01-01T13:00")
    assert ">late<" in since and ">early<" not in since
    until = rows(console, base + "?until=2026-01-01T13:00:00%2B00:00")
    assert ">early<" in until and ">late<" not in until


def test_raw_events_filter_by_received_time_range(console):
    now = datetime.now(UTC)
    RawEventFactory(terra_user_id="old-one", received_at=now - timedelta(days=3))
    RawEventFactory(terra_user_id="new-one", received_at=now)
    since = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    html = rows(console, f"/admin/ingest/rawevent/?since={since}")
    assert "new-one" in html and "old-one" not in html


def test_audit_log_filters_by_time_range(console):
    AuditLog.objects.create(action="x.old", actor="a", request_id="req-old")
    old = AuditLog.objects.get(action="x.old")
    AuditLog.objects.filter(pk=old.pk).update(created_at=datetime(2020, 1, 1, tzinfo=UTC))
    AuditLog.objects.create(action="x.new", actor="a", request_id="req-new")
    html = rows(console, "/admin/ops/auditlog/?since=2025-01-01")
    assert "req-new" in html and "req-old" not in html


def test_a_since_that_is_not_a_time_is_refused_without_an_error_page(console, db):
    response = console.get("/admin/workflows/workflowinstance/?since=yesterday-ish")
    assert response.status_code == 302 and "e=1" in response["Location"]
    assert WorkflowInstance.objects.count() == 0
