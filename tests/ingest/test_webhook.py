"""The webhook endpoint: routes, answers, dedup, lab-report detection, body limits, queue and
database faults."""

import json

import pytest
from django.db import OperationalError

from ingest.models import RawEvent, RawEventState, TraceEvent
from tests.conftest import load_fixture, sign

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/webhook/terra", "/webhook", "/terra", "/"])
def test_every_terra_path_reaches_the_one_handler(deliver, path):
    response = deliver(load_fixture("daily.json"), path=path)
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    assert body["type"] == "daily"
    assert body["raw_event_id"] == RawEvent.objects.get().pk
    assert body["request_id"] == response["X-Request-ID"]


def test_new_delivery_is_stored_with_its_envelope(deliver):
    raw = json.dumps(load_fixture("daily.json")).encode()
    response = deliver(raw, headers={"HTTP_X_REQUEST_ID": "req-123"})
    row = RawEvent.objects.get(pk=response.json()["raw_event_id"])
    assert response.json()["request_id"] == "req-123"
    assert row.event_type == "daily"
    assert row.terra_user_id == "40f7b0e1-89e2-43ac-a5b8-1e29c8d47cad"
    assert row.reference_id == "your-user-123"
    assert row.provider == "GARMIN"
    assert row.payload == load_fixture("daily.json")
    assert row.signature_verified is True
    assert row.request_id == "req-123"
    assert row.state == RawEventState.PENDING
    assert row.processed_at is None and row.process_error is None and row.attempts == 0
    import hashlib

    assert row.dedup_key == hashlib.sha256(raw).hexdigest()
    assert TraceEvent.objects.filter(raw_event=row, event="webhook_received").exists()


def test_new_delivery_is_queued_in_its_own_transaction_on_the_orm_broker(deliver):
    from django_q.models import OrmQ

    deliver(load_fixture("daily.json"))
    assert OrmQ.objects.count() == 1  # committed with the row, or not at all
    events = set(TraceEvent.objects.values_list("event", flat=True))
    assert events == {"webhook_received", "queue_published"}


def test_new_delivery_is_pushed_after_commit_on_an_outside_broker(
    deliver, django_capture_on_commit_callbacks, monkeypatch
):
    from ingest import queue

    monkeypatch.setattr(queue, "tickets_used", lambda: False)
    with django_capture_on_commit_callbacks() as callbacks:
        deliver(load_fixture("daily.json"))
    assert len(callbacks) == 1


def test_duplicate_delivery_is_acknowledged_and_not_requeued(
    deliver, django_capture_on_commit_callbacks
):
    raw = json.dumps(load_fixture("daily.json")).encode()
    deliver(raw)
    with django_capture_on_commit_callbacks() as callbacks:
        response = deliver(raw)
    assert response.status_code == 200
    assert response.json() == {"ok": True, "duplicate": True}
    from django_q.models import OrmQ

    assert callbacks == []
    assert OrmQ.objects.count() == 1
    assert RawEvent.objects.count() == 1


def test_duplicate_without_terra_user_dedupes_too(deliver):
    raw = json.dumps(load_fixture("lab_report.failed.json")).encode()
    assert "duplicate" not in deliver(raw).json()
    assert deliver(raw).json() == {"ok": True, "duplicate": True}
    assert RawEvent.objects.get().terra_user_id == ""


def test_same_body_bytes_differ_by_a_space_are_two_deliveries(deliver):
    deliver(b'{"type": "daily", "data": []}')
    deliver(b'{"type": "daily",  "data": []}')
    assert RawEvent.objects.count() == 2


@pytest.mark.parametrize(
    ("fixture", "reference"),
    [
        ("lab_report.completed.json", "upl_9d6e5f2a1c7b"),
        ("lab_report.completed.flat_results_draft.json", "upl_4a2b8c1d"),
        ("lab_report.failed.flat_results_draft.json", "upl_4a2b8c1d"),
        # No top-level upload_id: the data's reference_id is all there is.
        ("lab_report.failed.json", "your-patient-123"),
    ],
)
def test_lab_report_envelopes_are_detected(deliver, fixture, reference):
    response = deliver(load_fixture(fixture))
    assert response.json()["type"] == "lab_report"
    row = RawEvent.objects.get()
    assert row.event_type == "lab_report"
    assert row.reference_id == reference
    assert row.terra_user_id == ""


def test_oldest_lab_shape_without_type_is_detected_by_shape(deliver):
    payload = {"upload_id": "upl_old", "data": [{"results": [{"biomarker": "hemoglobin"}]}]}
    response = deliver(payload)
    assert response.json()["type"] == "lab_report"
    assert RawEvent.objects.get().reference_id == "upl_old"


def test_upload_id_alone_without_data_list_is_not_a_lab_report(deliver):
    response = deliver({"upload_id": "upl_x", "data": {"a": 1}})
    assert response.json()["type"] == "unknown"


def test_user_reauth_row_belongs_to_the_new_terra_id(deliver):
    deliver(load_fixture("user_reauth.json"))
    assert RawEvent.objects.get().terra_user_id == "9c8b7a65-4321-4fed-a0b9-87c6d5e4f321"


def test_get_is_not_allowed(client):
    response = client.get("/webhook/terra")
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"


def test_body_bigger_than_djangos_default_limit_is_accepted(deliver):
    payload = load_fixture("daily.json")
    payload["data"][0]["heart_rate_data"] = {
        "detailed": {
            "hr_samples": [
                {"timestamp": f"2026-07-01T00:{i % 60:02d}:00+01:00", "bpm": 60 + i % 40}
                for i in range(60_000)
            ]
        }
    }
    raw = json.dumps(payload).encode()
    assert len(raw) > 2_621_440
    response = deliver(raw)
    assert response.status_code == 200
    assert (
        len(RawEvent.objects.get().payload["data"][0]["heart_rate_data"]["detailed"]["hr_samples"])
        == 60_000
    )


def test_body_over_the_cap_is_413(deliver, settings):
    settings.TERRA_WEBHOOK_MAX_BYTES = 1000
    response = deliver(b'{"type": "daily", "pad": "' + b"x" * 1000 + b'"}')
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert not RawEvent.objects.exists()


def test_body_exactly_at_the_cap_is_accepted(deliver, settings):
    raw = b'{"type": "daily", "pad": "' + b"x" * 100 + b'"}'
    settings.TERRA_WEBHOOK_MAX_BYTES = len(raw)
    assert deliver(raw).status_code == 200


@pytest.mark.parametrize("orm_broker", [True, False])
def test_enqueue_failure_leaves_the_row_for_the_drain(
    deliver, django_capture_on_commit_callbacks, monkeypatch, orm_broker
):
    import django_q.tasks

    from ingest import queue
    from ops import tracing

    def broken(*args, **kwargs):
        raise ConnectionError("redis is down")

    monkeypatch.setattr(django_q.tasks, "async_task", broken)
    # With OpenTelemetry's SDK left installed by tests/ops/test_tracing.py, the ORM case would
    # build its own message without async_task (tested there).
    monkeypatch.setattr(tracing, "traceparent", lambda: "")
    monkeypatch.setattr(queue, "tickets_used", lambda: orm_broker)
    with django_capture_on_commit_callbacks(execute=True):
        response = deliver(load_fixture("daily.json"))
    assert response.status_code == 200
    row = RawEvent.objects.get()
    assert row.state == RawEventState.PENDING
    trace = TraceEvent.objects.get(raw_event=row, event="queue_publish_failed")
    assert "redis is down" in trace.data["error"]

    from ingest.drain import drain_candidates

    assert list(drain_candidates()) == [row]


@pytest.mark.parametrize(
    "error",
    [OperationalError("database is locked"), OperationalError("server closed the connection")],
)
def test_database_fault_is_503_with_retry_after(deliver, monkeypatch, error):
    from ingest import recording

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(recording, "_record", fail)
    response = deliver(load_fixture("daily.json"))
    assert response.status_code == 503
    assert response["Retry-After"]
    assert response.json()["code"] == "database_unavailable"


def test_signature_header_value_uses_first_character_exactly(client):
    body = b'{"type": "daily"}'
    response = client.generic(
        "POST",
        "/webhook/terra",
        body,
        content_type="application/json",
        HTTP_TERRA_SIGNATURE=" " + sign(body),
    )
    assert response.status_code == 401
    assert response.json()["reason"] == "malformed_header"


def test_big_bodies_streamed_to_the_database_are_stored_whole_and_dedupe(deliver, monkeypatch):
    from ingest.store import deliveries

    monkeypatch.setattr(deliveries, "STAGE_ABOVE_BYTES", 64)  # PostgreSQL streams via COPY
    payload = load_fixture("sleep.json")
    payload["note"] = "é" * 500  # multi-byte UTF-8 across chunk boundaries
    raw = json.dumps(payload, ensure_ascii=False).encode()
    first = deliver(raw)
    assert first.status_code == 200
    assert RawEvent.objects.get().payload == payload
    assert deliver(raw).json() == {"ok": True, "duplicate": True}
    deliver(raw.replace(b"sleep", b"sleep ", 1))
    assert RawEvent.objects.count() == 2


def test_json_with_a_nul_escape_is_stored_as_sent(deliver):
    # jsonb refused \u0000 (a 400, and Terra does not retry 4xx); the body is bytes now.
    raw = b'{"type": "daily", "note": "nul \\u0000 here"}'
    assert deliver(raw).status_code == 200
    assert bytes(RawEvent.objects.get().body) == raw


def test_a_driver_level_connection_fault_is_503(deliver, monkeypatch):
    """The fault comes from the database driver itself, as when the server goes away."""
    from django.db import connection

    if connection.vendor == "postgresql":
        import psycopg

        def gone(*args, **kwargs):
            raise psycopg.OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(psycopg.Cursor, "execute", gone)
    else:
        import sqlite3

        from django.db.backends.sqlite3.base import SQLiteCursorWrapper

        def locked(self, query, params=None):
            if query.lstrip().upper().startswith("INSERT INTO"):
                raise sqlite3.OperationalError("database is locked")
            return original(self, query, params)

        original = SQLiteCursorWrapper.execute
        monkeypatch.setattr(SQLiteCursorWrapper, "execute", locked)
    response = deliver(load_fixture("daily.json"))
    assert response.status_code == 503
    assert response.json()["code"] == "database_unavailable"
    assert response["Retry-After"]
