"""Access audit: every operator read of a user's health data (API and console) leaves a
`<thing>.read` row with the actor, the user concerned and the request id, never the values;
repeated reads of one user by one actor within 10 minutes are one row with a count; 403s are
audited, bounded under a flood; the console's audit log filters by the user concerned."""

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from ingest.traces import trace_write
from labs.models import Biomarker, LabUpload
from ops.models import AuditLog
from ops.services import AUDIT_FLOOD_PER_IP, api_key_create
from tests.factories import RawEventFactory, TerraConnectionFactory
from tests.labs.helpers import PDF

pytestmark = pytest.mark.django_db

SECRET_VALUE = 187.5  # a value read: never in an audit row


@pytest.fixture
def ops(operator_api):
    return operator_api("ingest:admin", name="oncall")


@pytest.fixture
def console(client, staff):
    client.force_login(staff)
    return client


def reads(action=None):
    rows = AuditLog.objects.filter(action__endswith=".read").order_by("id")
    return list(rows.filter(action=action) if action else rows)


def event_of(user, **fields):
    payload = {"type": "body", "data": [{"blood_pressure": {"systolic": SECRET_VALUE}}]}
    return RawEventFactory(user=user, payload=payload, **fields)


def test_reading_a_raw_events_payload_is_audited_with_actor_user_and_request_id(ops, alice):
    row = event_of(alice)
    response = ops.get(f"/v1/admin/raw-events/{row.pk}", HTTP_X_REQUEST_ID="req-42")
    assert response.status_code == 200 and response.json()["payload"]
    [audit] = reads()
    assert audit.action == "raw_event.read" and audit.actor.endswith(":oncall")
    assert (audit.subject_id, audit.request_id, audit.count) == (alice.pk, "req-42", 1)
    assert audit.resource == f"raw_event:{row.pk}"
    fields = json.dumps([audit.resource, audit.metadata, audit.actor, audit.result])
    assert str(SECRET_VALUE) not in fields


def test_a_delivery_not_yet_resolved_is_audited_against_its_connections_user(ops, alice):
    TerraConnectionFactory(user=alice, terra_user_id="t-alice")
    row = RawEventFactory(terra_user_id="t-alice", state="parked")
    ops.get(f"/v1/admin/raw-events/{row.pk}")
    assert reads()[0].subject_id == alice.pk


def test_repeated_reads_of_one_user_within_ten_minutes_are_one_row_with_a_count(
    ops, alice, bob, operator_api
):
    for row in (event_of(alice), event_of(alice), event_of(alice)):
        ops.get(f"/v1/admin/raw-events/{row.pk}")
    ops.get(f"/v1/admin/raw-events/{event_of(bob).pk}")
    operator_api("ingest:admin", name="other").get(f"/v1/admin/raw-events/{event_of(alice).pk}")
    rows = reads("raw_event.read")
    assert [(r.subject_id, r.actor.split(":")[-1], r.count) for r in rows] == [
        (alice.pk, "oncall", 3),
        (bob.pk, "oncall", 1),
        (alice.pk, "other", 1),
    ]
    assert rows[0].last_at >= rows[0].created_at


def test_a_read_after_the_window_has_ended_opens_a_new_row(ops, alice, monkeypatch):
    from ops import access

    monkeypatch.setattr(access, "READ_WINDOW_SECONDS", 0)
    row = event_of(alice)
    ops.get(f"/v1/admin/raw-events/{row.pk}")
    ops.get(f"/v1/admin/raw-events/{row.pk}")
    assert [r.count for r in reads()] == [1, 1]


def test_a_users_overview_is_audited_over_the_api_and_in_the_console(ops, console, alice):
    ops.get("/v1/admin/users/alice")
    console.get("/admin/ingest/terraconnection/users/alice/")
    assert [(r.action, r.subject_id, r.actor) for r in reads()] == [
        ("user.read", alice.pk, reads()[0].actor),
        ("user.read", alice.pk, "user:charlie"),
    ]


def test_traces_are_audited_once_per_user_they_concern(ops, alice, bob):
    mine = event_of(alice, request_id="req-1")
    trace_write("normalized", raw_event_id=mine.pk, request_id="req-1")
    trace_write("backfill_requested", user_id=bob.pk, request_id="req-1")
    trace_write("drain_run", request_id="req-1")  # nobody's
    ops.get("/v1/admin/traces", {"request_id": "req-1"})
    ops.get("/v1/admin/traces", {"user": "alice"})
    rows = reads("trace_event.read")
    assert sorted((r.subject_id, r.count) for r in rows) == [(alice.pk, 1), (bob.pk, 1)]


def test_a_trace_page_that_concerns_nobody_writes_nothing(ops):
    trace_write("drain_run")
    ops.get("/v1/admin/traces")
    assert reads() == []


def test_console_pages_of_health_data_are_audited(console, alice, bob):
    row = event_of(alice)
    trace_write("normalized", raw_event_id=row.pk)
    key = default_storage.save("lab-uploads/alice/r.pdf", ContentFile(PDF))
    upload = LabUpload.objects.create(
        user=alice, storage_key=key, content_type="application/pdf", size=len(PDF), sha256="0"
    )
    marker = Biomarker.objects.create(
        user=bob, source="terra_lab", code="ldl", value=SECRET_VALUE, measured_on="2026-07-01"
    )
    pages = [
        f"/admin/ingest/rawevent/{row.pk}/change/",
        "/admin/ingest/traceevent/",
        f"/admin/labs/labupload/{upload.pk}/change/",
        f"/admin/labs/labupload/{upload.pk}/download/",
        f"/admin/labs/biomarker/{marker.pk}/change/",
        "/admin/labs/biomarker/",
    ]
    for page in pages:
        response = console.get(page)
        assert response.status_code == 200, page
        if hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)
    assert sorted((r.action, r.subject_id, r.count) for r in reads()) == [
        ("biomarker.read", bob.pk, 2),
        ("lab_upload.read", alice.pk, 2),
        ("raw_event.read", alice.pk, 1),
        ("trace_event.read", alice.pk, 1),
    ]
    assert all(r.actor == "user:charlie" for r in reads())


def test_a_key_without_the_scope_is_refused_and_the_denial_audited(operator_api, alice):
    row = event_of(alice)
    response = operator_api("workflows:read", name="reader").get(f"/v1/admin/raw-events/{row.pk}")
    assert response.status_code == 403
    denial = AuditLog.objects.get(action="auth.denied")
    assert denial.actor.endswith(":reader") and denial.result == "denied"
    assert denial.resource == f"GET /v1/admin/raw-events/{row.pk}"
    assert reads() == []


@pytest.mark.parametrize("path", ["/v1/sync", "/v1/biomarkers/wide", "/v1/labs/uploads"])
def test_operator_credentials_get_no_users_data_and_the_denial_is_audited(operator_api, path):
    response = operator_api("*").get(path)
    assert response.status_code == 403
    assert AuditLog.objects.filter(action="auth.denied", resource=f"GET {path}").count() == 1


def test_denials_are_bounded_under_a_flood(operator_api):
    client = operator_api("workflows:read")
    for _ in range(AUDIT_FLOOD_PER_IP + 5):
        assert client.get("/v1/admin/dlq").status_code == 403
    assert AuditLog.objects.filter(action="auth.denied").count() == AUDIT_FLOOD_PER_IP
    assert AuditLog.objects.filter(action="auth.denied.suppressed").count() == 1


def test_a_console_page_refused_to_a_staff_member_is_audited(client, alice):
    from tests.factories import UserFactory

    client.force_login(UserFactory(username="viewer", is_staff=True))
    assert client.get("/admin/ingest/terraconnection/users/alice/wipe/").status_code == 403
    denial = AuditLog.objects.get(action="auth.denied")
    assert denial.actor == "user:viewer"


def test_the_audit_log_filters_by_the_user_concerned(ops, console, alice, bob):
    ops.get(f"/v1/admin/raw-events/{event_of(alice).pk}")
    ops.get(f"/v1/admin/raw-events/{event_of(bob).pk}")
    by_id = console.get("/admin/ops/auditlog/", {"subject__id__exact": alice.pk})
    by_name = console.get("/admin/ops/auditlog/", {"q": "bob"})
    assert [r.subject_id for r in by_id.context["cl"].result_list] == [alice.pk]
    assert bob.pk in [r.subject_id for r in by_name.context["cl"].result_list]
    assert f"alice (#{alice.pk})" in by_id.content.decode()


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_concurrent_reads_by_one_operator_are_one_row_with_every_read_counted(tmp_path, alice):
    from tests.ops.live_server import gunicorn_server

    row = event_of(alice)
    _, raw = api_key_create(name="burst", scopes=["ingest:admin"])
    with gunicorn_server(tmp_path, workers=3) as base:

        def read(_):
            url = f"{base}/v1/admin/raw-events/{row.pk}"
            return httpx.get(url, headers={"X-Admin-Key": raw}, timeout=30).status_code

        with ThreadPoolExecutor(max_workers=12) as pool:
            statuses = list(pool.map(read, range(36)))
    assert statuses == [200] * 36
    [audit] = reads()
    assert (audit.subject_id, audit.count) == (alice.pk, 36)
