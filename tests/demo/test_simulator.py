"""Demo mode: the Terra simulator transport, the demo payloads, and terra_simulate."""

import json
from datetime import date, timedelta
from io import StringIO

import httpx
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.utils import timezone

from demo import payloads as demo_payloads
from demo import simulator
from demo.management.commands import terra_simulate
from ingest.models import (
    Activity,
    DailySummary,
    RawEvent,
    RawEventState,
    SleepSession,
    TerraConnection,
)
from ingest.normalizers import s3_payload
from ingest.terra import client as terra_client
from ingest.terra.signature import signature_verify
from tests.factories import TerraConnectionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    """Deliveries the simulator would post later, captured instead of sent from a thread."""
    captured: list[dict] = []
    monkeypatch.setattr(simulator, "_deliver_later", captured.extend)
    terra_client.set_transport(simulator.simulator_transport())
    return captured


def test_backfill_answers_at_once_and_delivers_one_payload_per_day(sent, alice):
    connection = TerraConnectionFactory(user=alice, provider="OURA")
    end = date(2026, 7, 10)
    answer = terra_client.get_terra_client().request_backfill(
        terra_user_id=connection.terra_user_id,
        data_type="sleep",
        start_date=end - timedelta(days=2),
        end_date=end,
    )
    assert answer["status"] == "success"
    assert [p["type"] for p in sent] == ["sleep"] * 3
    assert {p["user"]["user_id"] for p in sent} == {connection.terra_user_id}
    assert {p["user"]["reference_id"] for p in sent} == {"alice"}
    assert {p["user"]["provider"] for p in sent} == {"OURA"}
    wake_dates = [p["data"][0]["metadata"]["end_time"][:10] for p in sent]
    assert wake_dates[-1] == "2026-07-10"


def test_simulated_deliveries_normalize_through_the_real_endpoint(sent, post, alice):
    connection = TerraConnectionFactory(user=alice)
    client = terra_client.get_terra_client()
    for kind in ("daily", "sleep", "activity"):
        client.request_backfill(
            terra_user_id=connection.terra_user_id,
            data_type=kind,
            start_date=date(2026, 7, 1),
            end_date=date(2026, 7, 3),
        )
    for payload in sent:
        assert post(payload).status_code == 200
    assert set(RawEvent.objects.values_list("state", flat=True)) == {RawEventState.PROCESSED}
    assert DailySummary.objects.filter(user=alice).count() == 3
    assert SleepSession.objects.filter(user=alice).count() == 3
    assert Activity.objects.filter(user=alice).count() == 3
    day = DailySummary.objects.get(date=date(2026, 7, 2))
    assert day.steps and day.sleep_minutes and day.resting_heart_rate


def test_widget_session_answers_a_url_and_then_an_auth_arrives(sent):
    answer = terra_client.get_terra_client().generate_widget_session(
        reference_id="dora", providers=["whoop"]
    )
    assert answer["url"].startswith("https://")
    assert sent[0]["type"] == "auth" and sent[0]["user"]["reference_id"] == "dora"
    assert sent[0]["user"]["provider"] == "WHOOP"


def test_subscriptions_list_our_connections(sent, alice):
    TerraConnectionFactory(user=alice, terra_user_id="t-1")
    users = terra_client.get_terra_client().list_subscriptions()
    assert [u["user_id"] for u in users] == ["t-1"]


def test_lab_report_upload_answers_an_upload_id_then_a_completed_report(sent):
    answer = terra_client.get_terra_client().upload_lab_report(
        reference_id="alice", filename="r.pdf", content=b"%PDF-1.4", content_type="application/pdf"
    )
    assert answer["upload_id"].startswith("upl_")
    assert answer["current_status"] == "processing"
    report = sent[0]
    assert report["type"] == "lab_report.completed"
    assert report["upload_id"] == answer["upload_id"]
    assert report["data"]["reference_id"] == "alice"
    assert report["data"]["results"][0]["measurement"]["numeric"] > 0


def test_unknown_simulator_path_is_404():
    terra_client.set_transport(simulator.simulator_transport())
    with pytest.raises(terra_client.TerraError):
        terra_client.get_terra_client()._request("GET", "/v2/nothing")


def test_demo_payloads_are_stable_per_user_and_day():
    day = date(2026, 7, 1)
    assert demo_payloads.daily_payload("a", day) == demo_payloads.daily_payload("a", day)
    assert demo_payloads.daily_payload("a", day) != demo_payloads.daily_payload("b", day)
    sleep = demo_payloads.sleep_payload("a", day)
    assert sleep["data"][0]["metadata"]["end_time"].startswith("2026-07-01")


def test_webhook_post_signs_with_the_first_secret(settings):
    settings.TERRA_WEBHOOK_SECRETS = ["first", "second"]
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["verdict"] = signature_verify(
            header=request.headers["terra-signature"], body=request.content, secrets=["first"]
        )
        return httpx.Response(200, json={"ok": True})

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        simulator.webhook_post(client, "http://x/webhook/terra", {"type": "healthcheck"})
    assert seen["verdict"].ok


@pytest.fixture
def in_process_http(monkeypatch):
    """terra_simulate's HTTP client answers from this process's Django app, inside the test
    transaction (like the test client, without closing the connection after each request)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    monkeypatch.setattr(
        terra_simulate,
        "http_client",
        lambda: httpx.Client(transport=httpx.WSGITransport(app=WSGIHandler())),
    )
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_terra_simulate_posts_an_auth_and_n_days(
    in_process_http, sync_queue, django_capture_on_commit_callbacks, terra
):
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command(
            "terra_simulate",
            "--url",
            "http://testserver/webhook/terra",
            "--user",
            "dora",
            "--days",
            "2",
            stdout=out,
        )
    text = out.getvalue()
    assert "sent 9 deliveries" in text and "accepted: 9" in text
    connection = TerraConnection.objects.get()
    assert connection.user.username == "dora"
    types = sorted(RawEvent.objects.values_list("event_type", flat=True))
    assert types == sorted(["auth"] + ["daily", "sleep", "activity", "body"] * 2)
    assert DailySummary.objects.filter(user__username="dora").count() >= 2
    assert DailySummary.objects.filter(date=timezone.localdate()).exists()
    assert len(terra.calls("GET", "/v2/daily")) == 1  # the auth asked for its backfill

    # The same days again: identical bytes, acknowledged as duplicates.
    out = StringIO()
    call_command(
        "terra_simulate",
        "--url",
        "http://testserver/webhook/terra",
        "--user",
        "dora",
        "--days",
        "2",
        stdout=out,
    )
    assert "duplicate: 9" in out.getvalue()
    assert json.loads(out.getvalue().splitlines()[0].split("→ 200 ", 1)[1]) == {
        "ok": True,
        "duplicate": True,
    }


@pytest.fixture
def simulated_bucket():
    """The simulator's payload bucket, as the demo app's ready() installs it in demo mode."""
    s3_payload.set_simulated_bucket(simulator.PING_HOST, simulator.simulator_transport())
    yield
    s3_payload.set_simulated_bucket(None)


def test_terra_simulate_can_send_ping_mode(
    in_process_http,
    sync_queue,
    django_capture_on_commit_callbacks,
    terra,
    simulated_bucket,
):
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command(
            "terra_simulate",
            "--url",
            "http://testserver/webhook/terra",
            "--user",
            "dora",
            "--days",
            "1",
            "--ping",
            stdout=out,
        )
    assert "sent 5 deliveries" in out.getvalue()
    pings = RawEvent.objects.filter(event_type="s3_payload")
    assert pings.count() == 4
    assert {p.process_error.rsplit(":", 1)[0] for p in pings} == {"skipped:s3_payload:fetched"}
    fetched = set(
        RawEvent.objects.exclude(event_type__in=["s3_payload", "auth"]).values_list(
            "event_type", "state"
        )
    )
    assert fetched == {(t, RawEventState.PROCESSED) for t in ("daily", "sleep", "activity", "body")}
    assert TerraConnection.objects.get().user.username == "dora"
