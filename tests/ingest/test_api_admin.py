"""Operator API under /v1/admin: DLQ, raw events, replay, drain, users, traces — success and error
paths, auth (401 without credentials, 403 without the scope) and the audit rows."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.models import RawEventState
from ingest.traces import trace_write
from ops.models import AuditLog
from tests.factories import RawEventFactory, TerraConnectionFactory, UserFactory

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    ("get", "/v1/admin/dlq"),
    ("get", "/v1/admin/raw-events/1"),
    ("post", "/v1/admin/raw-events/1/replay"),
    ("post", "/v1/admin/replay"),
    ("post", "/v1/admin/drain"),
    ("get", "/v1/admin/users/alice"),
    ("post", "/v1/admin/users/alice/wipe"),
    ("get", "/v1/admin/traces"),
]


@pytest.fixture
def ops(operator_api):
    return operator_api("ingest:admin")


@pytest.mark.parametrize("method,path", ENDPOINTS)
def test_operator_endpoints_answer_401_without_credentials(api, method, path):
    response = getattr(api, method)(path, {}, format="json")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_required"


@pytest.mark.parametrize("method,path", ENDPOINTS)
def test_operator_endpoints_answer_403_without_the_scope(operator_api, method, path):
    response = getattr(operator_api("workflows:read"), method)(path, {}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


@pytest.mark.parametrize("method,path", ENDPOINTS)
def test_a_user_token_is_not_an_operator(user_api, method, path):
    assert getattr(user_api, method)(path, {}, format="json").status_code == 403


def test_a_staff_session_is_an_operator(client, staff):
    client.force_login(staff)
    assert client.get("/v1/admin/dlq").status_code == 200


def test_dlq_lists_parked_retrying_and_dead_never_skipped(ops, alice):
    old = timezone.now() - timedelta(hours=5)
    parked = RawEventFactory(state="parked", process_error="x" * 500, received_at=old, user=alice)
    retrying = RawEventFactory(state="retrying", process_error="boom", event_type="sleep")
    dead = RawEventFactory(state="dead", process_error="KeyError: 'data'")
    RawEventFactory(state="skipped", process_error="skipped:athlete")
    RawEventFactory(state="processed")
    RawEventFactory(state="pending")
    body = ops.get("/v1/admin/dlq").json()
    assert [r["id"] for r in body["raw_events"]] == [dead.pk, retrying.pk, parked.pk]
    assert body["cursor"] is None and body["has_next_page"] is False
    first = body["raw_events"][2]
    assert len(first["error"]) == 200 and first["user"] == "alice"
    assert first["age_seconds"] >= 5 * 3600 - 5
    assert [r["id"] for r in ops.get("/v1/admin/dlq?type=sleep").json()["raw_events"]] == [
        retrying.pk
    ]
    assert [r["id"] for r in ops.get("/v1/admin/dlq?error=keyerror").json()["raw_events"]] == [
        dead.pk
    ]
    assert [r["id"] for r in ops.get("/v1/admin/dlq?older_than=1h").json()["raw_events"]] == [
        parked.pk
    ]


def test_dlq_pages_50_rows_by_default_and_the_cursor_gives_the_rest(ops):
    rows = [RawEventFactory(state="dead", process_error="e") for _ in range(55)]
    first = ops.get("/v1/admin/dlq").json()
    assert len(first["raw_events"]) == 50 and first["has_next_page"] is True
    rest = ops.get("/v1/admin/dlq", {"cursor": first["cursor"]}).json()
    assert len(rest["raw_events"]) == 5 and rest["has_next_page"] is False
    seen = [r["id"] for r in first["raw_events"] + rest["raw_events"]]
    assert sorted(seen) == sorted(row.pk for row in rows)
    assert len(ops.get("/v1/admin/dlq?limit=55").json()["raw_events"]) == 55


@pytest.mark.parametrize("query", ["older_than=soon", "state=nope", "limit=0", "limit=x"])
def test_dlq_bad_filters_are_400(ops, query):
    response = ops.get(f"/v1/admin/dlq?{query}")
    assert response.status_code == 400
    assert response.json()["code"] in ("invalid_filter", "invalid_limit")


def test_raw_event_detail_has_the_full_row_and_payload(ops):
    row = RawEventFactory(payload={"type": "daily", "data": [{"x": 1}]}, process_error="e" * 300)
    body = ops.get(f"/v1/admin/raw-events/{row.pk}").json()
    assert body["payload"] == {"type": "daily", "data": [{"x": 1}]}
    assert len(body["process_error"]) == 300
    assert body["traces_url"] == f"/v1/admin/traces?raw_event_id={row.pk}"


def test_unknown_raw_event_is_404_raw_event_not_found(ops):
    for method, path in [
        ("get", "/v1/admin/raw-events/999"),
        ("post", "/v1/admin/raw-events/999/replay"),
    ]:
        response = getattr(ops, method)(path)
        assert response.status_code == 404
        assert response.json()["code"] == "raw_event_not_found"


def test_replay_one_resets_the_row_and_is_audited(ops):
    row = RawEventFactory(state="dead", process_error="boom", attempts=5)
    response = ops.post(f"/v1/admin/raw-events/{row.pk}/replay")
    assert response.json() == {"replayed": 1, "ids": [row.pk]}
    row.refresh_from_db()
    assert row.state == RawEventState.PENDING and row.attempts == 0
    audit = AuditLog.objects.get(action="raw_events.replay")
    assert audit.actor.startswith("api_key:")


def test_replay_by_ids_and_by_filter(ops):
    a, b = RawEventFactory(state="dead"), RawEventFactory(state="dead")
    c = RawEventFactory(state="parked", event_type="sleep")
    assert (
        ops.post("/v1/admin/replay", {"ids": [a.pk, b.pk, 9999]}, format="json").json()["replayed"]
        == 2
    )
    body = ops.post(
        "/v1/admin/replay", {"filter": {"type": "sleep", "state": ["parked"]}}, format="json"
    ).json()
    assert body == {"replayed": 1, "ids": [c.pk]}
    assert AuditLog.objects.filter(action="raw_events.replay").count() == 2


def test_replay_without_ids_or_filter_is_400(ops):
    response = ops.post("/v1/admin/replay", {}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


def test_drain_skips_skipped_and_no_connection_rows_by_default(ops):
    pending = RawEventFactory(state="pending")
    parked = RawEventFactory(state="parked", process_error="no_normalizer")
    RawEventFactory(state="parked", process_error="no_connection_for_terra_user")
    RawEventFactory(state="skipped", process_error="skipped:athlete")
    body = ops.post("/v1/admin/drain", {}, format="json").json()
    assert sorted(body["ids"]) == sorted([pending.pk, parked.pk])
    assert body["selected"] == 2
    assert AuditLog.objects.filter(action="raw_events.drain").count() == 1
    body = ops.post(
        "/v1/admin/drain",
        {"include_skipped": True, "include_no_connection": True, "limit": 100},
        format="json",
    ).json()
    assert body["selected"] == 4


def test_drain_refuses_a_limit_over_100(ops):
    response = ops.post("/v1/admin/drain", {"limit": 101}, format="json")
    assert response.status_code == 400


def test_user_overview(ops, alice):
    TerraConnectionFactory(user=alice, terra_user_id="t-a")
    TerraConnectionFactory(user=alice, terra_user_id="t-old", deactivated_at=timezone.now())
    RawEventFactory(terra_user_id="t-a", state="parked", process_error="x")
    last = RawEventFactory(terra_user_id="t-old", state="processed")
    RawEventFactory(terra_user_id="someone-else", state="parked")
    body = ops.get("/v1/admin/users/alice").json()
    assert body["username"] == "alice"
    assert {c["terra_user_id"]: c["active"] for c in body["connections"]} == {
        "t-a": True,
        "t-old": False,
    }
    assert body["parked"] == 1 and body["raw_events"] == 2
    assert body["counts"]["daily_summary"] == 0
    assert body["last_event_received_at"].startswith(last.received_at.date().isoformat())


def test_unknown_user_is_404(ops):
    for method in ("get", "post"):
        path = "/v1/admin/users/nobody" + ("/wipe" if method == "post" else "")
        response = getattr(ops, method)(path)
        assert response.status_code == 404
        assert response.json()["code"] == "user_not_found"


def test_traces_filter_and_paginate_newest_first(ops, alice):
    row = RawEventFactory()
    for i in range(7):
        trace_write("normalized", raw_event_id=row.pk, request_id="rq-1", data={"i": i})
    trace_write("parked", user_id=alice.pk, request_id="rq-2", level="warning")
    body = ops.get("/v1/admin/traces?request_id=rq-1&limit=5").json()
    assert [t["data"]["i"] for t in body["traces"]] == [6, 5, 4, 3, 2]
    assert body["has_next_page"] is True
    body = ops.get(f"/v1/admin/traces?request_id=rq-1&limit=5&cursor={body['cursor']}").json()
    assert [t["data"]["i"] for t in body["traces"]] == [1, 0]
    assert body["cursor"] is None and body["has_next_page"] is False
    assert [t["event"] for t in ops.get("/v1/admin/traces?user=alice").json()["traces"]] == [
        "parked"
    ]
    assert len(ops.get("/v1/admin/traces?level=warning").json()["traces"]) == 1
    assert len(ops.get(f"/v1/admin/traces?raw_event_id={row.pk}").json()["traces"]) == 7


def test_traces_bad_level_is_400(ops):
    assert ops.get("/v1/admin/traces?level=loud").status_code == 400
    assert ops.get("/v1/admin/traces?cursor=zzz").json()["code"] == "invalid_cursor"


def test_wipe_over_the_api_is_audited(ops):
    gone = UserFactory(username="gone")
    body = ops.post("/v1/admin/users/gone/wipe").json()
    assert body["username"] == "gone" and body["deleted"]["users"] == 1
    audit = AuditLog.objects.get(action="user.wipe")
    # by id: the audit row outlives the user and must not name them
    assert (audit.resource, audit.subject_id) == (f"user:{gone.pk}", gone.pk)


def test_schema_lists_the_ingest_endpoints(ops, client, staff):
    client.force_login(staff)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    for path in ("/v1/sync", "/v1/admin/dlq", "/v1/admin/users/{username}/wipe", "/v1/import"):
        assert path in schema


def test_replay_with_an_id_beyond_64_bits_is_400_not_a_server_error(ops):
    response = ops.post("/v1/admin/replay", {"ids": [2**64]}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
