"""User API: connect, me (reconciled against Terra's subscriptions), import; auth errors."""

import httpx
import pytest

from ingest.models import ImportJob, RawEventState, TerraConnection
from tests.factories import RawEventFactory, TerraConnectionFactory

pytestmark = pytest.mark.django_db


def subscriptions(*users):
    return (200, {"users": list(users)})


@pytest.mark.parametrize(
    "method,path", [("post", "/v1/connect"), ("get", "/v1/me"), ("post", "/v1/import")]
)
def test_user_endpoints_need_a_bearer_token(api, method, path):
    response = getattr(api, method)(path, {}, format="json")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_required"


def test_an_unknown_token_is_refused(api):
    api.credentials(HTTP_AUTHORIZATION="Bearer vfu_nope")
    response = api.get("/v1/me")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_required"


def test_an_operator_key_is_not_a_user(operator_api):
    response = operator_api("ingest:admin").get("/v1/me")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


def test_connect_asks_terra_for_a_widget_with_the_username_as_reference(user_api, terra):
    terra.on(
        "POST",
        "/v2/auth/generateWidgetSession",
        (200, {"url": "https://widget.tryterra.co/session/x", "session_id": "x"}),
    )
    response = user_api.post("/v1/connect", {"provider": "oura"}, format="json")
    assert response.status_code == 200
    assert response.json() == {
        "url": "https://widget.tryterra.co/session/x",
        "session_id": "x",
        "reference_id": "alice",
    }
    sent = terra.calls("POST", "/v2/auth/generateWidgetSession")[0]
    assert b'"reference_id":"alice"' in sent.content.replace(b" ", b"")
    assert b"OURA" in sent.content


def test_connect_reports_terra_down_as_502(user_api, terra):
    terra.on("POST", "/v2/auth/generateWidgetSession", httpx.ConnectError("down"))
    response = user_api.post("/v1/connect", {}, format="json")
    assert response.status_code == 502
    assert response.json()["code"] == "terra_unavailable"


def test_connect_refuses_a_body_that_is_not_an_object(user_api):
    response = user_api.post("/v1/connect", [1], format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


def test_me_reconciles_connections_against_terra_first(user_api, alice, terra):
    kept = TerraConnectionFactory(user=alice, terra_user_id="t-kept")
    gone = TerraConnectionFactory(user=alice, terra_user_id="t-gone")
    parked = RawEventFactory(
        terra_user_id="t-new",
        state=RawEventState.PARKED,
        process_error="no_connection_for_terra_user",
    )
    terra.on(
        "GET",
        "/v2/subscriptions",
        subscriptions(
            {"user_id": "t-kept", "provider": "GARMIN", "reference_id": "alice", "active": True},
            {"user_id": "t-new", "provider": "OURA", "reference_id": "alice", "scopes": "a,b"},
            {"user_id": "t-other", "provider": "OURA", "reference_id": "bob"},
        ),
    )
    response = user_api.get("/v1/me")
    assert response.status_code == 200
    body = response.json()
    assert body["username"] == "alice"
    assert body["reconcile"] == {
        "created": ["t-new"],
        "reactivated": [],
        "deactivated": ["t-gone"],
        "error": None,
        "skipped": False,
    }
    states = {c["terra_user_id"]: c["active"] for c in body["connections"]}
    assert states == {"t-kept": True, "t-gone": False, "t-new": True}
    gone.refresh_from_db()
    kept.refresh_from_db()
    assert gone.deactivated_at is not None and kept.deactivated_at is None
    assert TerraConnection.objects.get(terra_user_id="t-new").provider == "OURA"
    assert not TerraConnection.objects.filter(terra_user_id="t-other").exists()
    parked.refresh_from_db()
    assert parked.state == RawEventState.PENDING  # released for the consumer at once


def test_me_still_answers_when_terra_is_down(user_api, alice, terra):
    TerraConnectionFactory(user=alice, terra_user_id="t-1")
    terra.on("GET", "/v2/subscriptions", httpx.ConnectTimeout("slow"))
    response = user_api.get("/v1/me")
    assert response.status_code == 200
    assert response.json()["reconcile"]["error"]
    assert response.json()["connections"][0]["active"] is True


def test_import_requests_one_backfill_per_connection_and_type(user_api, alice, terra):
    TerraConnectionFactory(user=alice, terra_user_id="t-1")
    TerraConnectionFactory(user=alice, terra_user_id="t-2")
    terra.on(
        "GET",
        "/v2/subscriptions",
        subscriptions(
            {"user_id": "t-1", "provider": "GARMIN"}, {"user_id": "t-2", "provider": "OURA"}
        ),
    )
    response = user_api.post("/v1/import", {"days": 30}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert body["days"] == 30 and body["requests"] == 8 and body["requests_failed"] == 0
    assert {(r["terra_user_id"], r["type"]) for r in body["requested"]} == {
        (t, k) for t in ("t-1", "t-2") for k in ("activity", "sleep", "daily", "body")
    }
    calls = [
        r for r in terra.requests if r.url.path.startswith("/v2/") and "user_id" in r.url.params
    ]
    assert len(calls) == 8
    assert all(r.url.params["to_webhook"] == "true" for r in calls)
    assert ImportJob.objects.get(user=alice).days == 30


def test_import_defaults_to_a_year(user_api, alice, terra):
    TerraConnectionFactory(user=alice, terra_user_id="t-1")
    terra.on("GET", "/v2/subscriptions", subscriptions({"user_id": "t-1", "provider": "GARMIN"}))
    response = user_api.post("/v1/import", {}, format="json")
    assert response.status_code == 202
    assert response.json()["days"] == 365


@pytest.mark.parametrize("days", [0, 1461, -5, "30", 2.5, True, None])
def test_import_refuses_days_out_of_range(user_api, days):
    body = {"days": days} if days is not None else {"days": None}
    response = user_api.post("/v1/import", body, format="json")
    if days is None:  # an explicit null means "the default"
        assert response.json()["code"] != "invalid_days"
        return
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_days"


def test_import_without_a_connection_is_409(user_api, terra):
    terra.on("GET", "/v2/subscriptions", subscriptions())
    response = user_api.post("/v1/import", {"days": 10}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "no_active_connection"


def test_one_failing_backfill_type_does_not_stop_the_others(user_api, alice, terra):
    TerraConnectionFactory(user=alice, terra_user_id="t-1")
    terra.on("GET", "/v2/subscriptions", subscriptions({"user_id": "t-1", "provider": "GARMIN"}))
    terra.on("GET", "/v2/sleep", (500, {"message": "boom"}))
    body = user_api.post("/v1/import", {"days": 5}, format="json").json()
    assert body["requests"] == 4 and body["requests_failed"] == 1
    assert {r["type"]: r["status"] for r in body["requested"]}["sleep"] == "failed"


def test_import_progress_shows_in_me(user_api, alice, terra):
    TerraConnectionFactory(user=alice, terra_user_id="t-1")
    terra.on("GET", "/v2/subscriptions", subscriptions({"user_id": "t-1", "provider": "GARMIN"}))
    user_api.post("/v1/import", {"days": 5}, format="json")
    RawEventFactory(terra_user_id="t-1", event_type="daily", state=RawEventState.PROCESSED)
    RawEventFactory(terra_user_id="t-1", event_type="sleep", state=RawEventState.PENDING)
    from ingest.models import DailySummary
    from tests.factories import day

    DailySummary.objects.create(user=alice, source="garmin", date=day(1), steps=10)
    job = user_api.get("/v1/me").json()["imports"][0]
    assert job["requests"] == 4
    assert job["chunks_received"] == 2
    assert job["chunks_pending"] == 1
    assert job["rows_normalized"] == 1


def test_import_when_terra_refuses_everything_is_502_and_starts_nothing(user_api, alice, terra):
    TerraConnectionFactory(user=alice, terra_user_id="t-1")
    terra.on("GET", "/v2/subscriptions", subscriptions({"user_id": "t-1", "provider": "GARMIN"}))
    for data_type in ("activity", "sleep", "daily", "body"):
        terra.on("GET", f"/v2/{data_type}", (401, {"message": "bad key"}))
    response = user_api.post("/v1/import", {"days": 5}, format="json")
    assert response.status_code == 502
    assert response.json()["code"] == "terra_unavailable"
    assert len(response.json()["requested"]) == 4
    assert not ImportJob.objects.exists()
