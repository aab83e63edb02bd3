"""The ingest console through the Django test client as staff: lists and filters, raw event page,
actions with confirmation pages (replay, mark skipped), drain, backfill, user overview and wipe,
and the dashboard at the admin index."""

import re
from datetime import timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ingest.models import RawEvent, RawEventState, TerraConnection
from ingest.traces import trace_write
from ops.models import AuditLog
from tests.factories import RawEventFactory, TerraConnectionFactory, UserFactory

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/ingest/rawevent/"


@pytest.fixture
def console(client, staff):
    client.force_login(staff)
    return client


def test_raw_event_list_filters_and_search(console, alice):
    TerraConnectionFactory(user=alice, provider="GARMIN")
    dead = RawEventFactory(state="dead", process_error="KeyError", user=alice, request_id="rq-9")
    RawEventFactory(state="processed", event_type="sleep")
    RawEventFactory(state="skipped", process_error="skipped:athlete")
    page = console.get(CHANGELIST + "?triage=dlq").content.decode()
    assert f">{dead.pk}<" in page and "KeyError" in page and "alice" in page
    assert "skipped:athlete" not in page
    for query in (
        "state__exact=dead",
        "q=rq-9",
        f"q={dead.pk}",
        f"q={dead.terra_user_id}",
        "received=24h",
        "event_type=daily",
        "provider=GARMIN",
    ):
        response = console.get(f"{CHANGELIST}?{query}")
        assert response.status_code == 200, query
        assert f"/admin/ingest/rawevent/{dead.pk}/change/" in response.content.decode()
    assert f"/rawevent/{dead.pk}/" not in console.get(CHANGELIST + "?q=nope").content.decode()
    assert (
        f"/rawevent/{dead.pk}/" not in console.get(CHANGELIST + "?provider=OURA").content.decode()
    )
    assert (
        f"/rawevent/{dead.pk}/"
        not in console.get(CHANGELIST + "?event_type=sleep").content.decode()
    )


def test_raw_event_list_has_no_n_plus_1(console):
    users = [UserFactory() for _ in range(3)]
    for i in range(30):
        RawEventFactory(state="dead", user=users[i % 3])
    with CaptureQueriesContext(connection) as few:
        console.get(CHANGELIST)
    for _ in range(30):
        RawEventFactory(state="parked", user=UserFactory())
    with CaptureQueriesContext(connection) as more:
        console.get(CHANGELIST)
    assert len(more) == len(few)


def test_raw_event_page_shows_pretty_payload_and_links_to_traces_and_user(console, alice):
    row = RawEventFactory(
        payload={"type": "daily", "data": [{"steps": 5}]}, user=alice, request_id="rq-1"
    )
    trace_write("webhook_received", raw_event_id=row.pk, request_id="rq-1")
    page = console.get(f"/admin/ingest/rawevent/{row.pk}/change/").content.decode()
    assert "&quot;steps&quot;: 5" in page  # indented JSON, escaped
    assert f"/admin/ingest/traceevent/?raw_event__id__exact={row.pk}" in page
    assert "/admin/ingest/terraconnection/users/alice/" in page
    assert "webhook_received" in page  # the trace timeline inline
    traces = console.get(f"/admin/ingest/traceevent/?raw_event__id__exact={row.pk}")
    assert traces.status_code == 200 and "webhook_received" in traces.content.decode()


def test_replay_action_confirms_then_replays_with_audit(console):
    rows = [RawEventFactory(state="dead", process_error="boom") for _ in range(2)]
    ids = [str(r.pk) for r in rows]
    data = {"action": "replay_selected", ACTION_CHECKBOX_NAME: ids}
    confirm = console.post(CHANGELIST, data)
    assert confirm.status_code == 200
    assert "Replay raw events" in confirm.content.decode()
    assert RawEvent.objects.filter(state="dead").count() == 2  # nothing yet
    done = console.post(CHANGELIST, {**data, "confirm": "yes"}, follow=True)
    assert "Replayed 2 raw event(s)." in done.content.decode()
    assert RawEvent.objects.filter(state="pending").count() == 2
    assert AuditLog.objects.get(action="raw_events.replay").actor == "user:charlie"


def test_mark_skipped_needs_a_reason_and_leaves_finished_rows(console):
    dead = RawEventFactory(state="dead", process_error="boom")
    done = RawEventFactory(state="processed")
    data = {"action": "mark_skipped", ACTION_CHECKBOX_NAME: [dead.pk, done.pk]}
    page = console.post(CHANGELIST, data).content.decode()
    assert 'name="reason"' in page and "1 selected are not eligible" in page
    console.post(CHANGELIST, {**data, "confirm": "yes", "reason": ""})
    dead.refresh_from_db()
    assert dead.state == "dead"
    result = console.post(
        CHANGELIST, {**data, "confirm": "yes", "reason": "bad device data"}, follow=True
    )
    assert "Marked 1 raw event(s) skipped (1 left alone" in result.content.decode()
    dead.refresh_from_db()
    done.refresh_from_db()
    assert dead.state == RawEventState.SKIPPED
    assert dead.process_error == "skipped:manual:bad device data"
    assert done.state == RawEventState.PROCESSED
    audit = AuditLog.objects.get(action="raw_events.mark_skipped")
    assert audit.metadata["changed"] == 1


def test_drain_page_confirms_then_drains(console):
    RawEventFactory(state="pending")
    RawEventFactory(state="parked", process_error="no_connection_for_terra_user")
    page = console.get("/admin/ingest/rawevent/drain/").content.decode()
    assert "1 row(s) match" in page
    result = console.post(
        "/admin/ingest/rawevent/drain/",
        {"limit": 100, "include_no_connection": "on", "confirm": "yes"},
        follow=True,
    )
    assert "Drain picked 2 raw event(s)" in result.content.decode()
    assert AuditLog.objects.get(action="raw_events.drain").actor == "user:charlie"


def test_connection_backfill_n_days(console, alice, terra):
    conn = TerraConnectionFactory(user=alice, terra_user_id="t-a")
    page = console.get(f"/admin/ingest/terraconnection/{conn.pk}/change/").content.decode()
    assert f"/admin/ingest/terraconnection/{conn.pk}/backfill/" in page
    form = console.get(f"/admin/ingest/terraconnection/{conn.pk}/backfill/")
    assert "Request backfill" in form.content.decode()
    assert (
        console.post(
            f"/admin/ingest/terraconnection/{conn.pk}/backfill/", {"days": 0, "confirm": "yes"}
        ).status_code
        == 200
    )
    assert not terra.requests
    result = console.post(
        f"/admin/ingest/terraconnection/{conn.pk}/backfill/",
        {"days": 14, "confirm": "yes"},
        follow=True,
    )
    assert "Requested 4 of 4 backfill(s) of 14 day(s) for t-a." in result.content.decode()
    assert len(terra.requests) == 4
    audit = AuditLog.objects.get(action="terra_connection.backfill")
    assert audit.metadata["days"] == 14


def test_user_overview_and_wipe_with_confirmation(console, alice):
    TerraConnectionFactory(user=alice, terra_user_id="t-a")
    RawEventFactory(terra_user_id="t-a", state="parked", process_error="x")
    page = console.get("/admin/ingest/terraconnection/users/alice/").content.decode()
    assert "t-a" in page and "1 in the DLQ" in page and "Wipe all data" in page
    confirm = console.get("/admin/ingest/terraconnection/users/alice/wipe/").content.decode()
    assert "<td>terra_connections</td><td>1</td>" in confirm
    assert "<td>raw_events</td><td>1</td>" in confirm
    wrong = console.post(
        "/admin/ingest/terraconnection/users/alice/wipe/",
        {"confirm_username": "bob", "confirm": "yes"},
    )
    assert wrong.status_code == 200 and type(alice).objects.filter(username="alice").exists()
    done = console.post(
        "/admin/ingest/terraconnection/users/alice/wipe/",
        {"confirm_username": "alice", "confirm": "yes"},
        follow=True,
    )
    assert f"Wiped user #{alice.pk}" in done.content.decode()
    assert not type(alice).objects.filter(username="alice").exists()
    assert not TerraConnection.objects.exists() and not RawEvent.objects.exists()
    assert AuditLog.objects.get(action="user.wipe").actor == "user:charlie"


def test_front_page_lookup_of_an_unknown_name_answers_with_an_admin_message(console, alice):
    # Seen: the front page's "User overview" box with a typo landed on a JSON 404 page.
    page = console.get("/admin/ingest/terraconnection/users/?username=nobody", follow=True)
    assert page.status_code == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert "No user named &#x27;nobody&#x27;." in page.content.decode()
    assert page.redirect_chain[-1][0] == "/admin/"
    overview = console.get("/admin/ingest/terraconnection/users/nobody/", follow=True)
    assert "No user named" in overview.content.decode()
    lookup = console.get("/admin/ingest/terraconnection/users/?username=alice")
    assert lookup.status_code == 302 and lookup["Location"].endswith("/users/alice/")


def test_wipe_message_counts_the_rows_the_confirmation_lists(console, alice):
    # Seen: the confirmation listed users 1 among the tables but the message's total left it
    # out, so the two numbers never matched.
    TerraConnectionFactory(user=alice, terra_user_id="t-a")
    RawEventFactory(terra_user_id="t-a", state="parked", process_error="x")
    RawEventFactory(terra_user_id="t-a", state="processed")
    url = "/admin/ingest/terraconnection/users/alice/wipe/"
    confirm = console.get(url).content.decode()
    listed = [int(n) for n in re.findall(r"<tr><td>\w+</td><td>(\d+)</td></tr>", confirm)]
    done = console.post(url, {"confirm_username": "alice", "confirm": "yes"}, follow=True)
    message = str(list(done.context["messages"])[0])
    assert re.search(r"Wiped user #\d+: (\d+) row\(s\)", message).group(1) == str(sum(listed))
    assert f"<strong>{sum(listed)}</strong> row(s) will be touched" in confirm


def test_wipe_needs_delete_user_permission(client, alice):
    limited = UserFactory(username="viewer", is_staff=True)
    client.force_login(limited)
    assert client.get("/admin/ingest/terraconnection/users/alice/wipe/").status_code == 403


def test_dashboard_at_the_admin_index(console):
    now = timezone.now()
    RawEventFactory(state="processed")
    RawEventFactory(state="dead", received_at=now - timedelta(hours=3))
    RawEventFactory(state="parked", received_at=now - timedelta(days=3))
    trace_write("drain_run", data={"selected": 3})
    page = console.get("/admin/").content.decode()
    assert "Ingest — last 24 hours" in page
    assert "<strong>2</strong> raw events received" in page
    assert "DLQ: 2" in page
    assert "<svg" in page and "<rect" in page and "cdn" not in page.lower()
    assert "events</title>" in page
    assert "{&#x27;selected&#x27;: 3}" in page or "selected" in page


def test_imports_and_traces_lists_render(console, alice):
    from ingest.models import ImportJob

    job = ImportJob.objects.create(
        user=alice, days=3, start_date=timezone.now().date(), end_date=timezone.now().date()
    )
    from ingest.models import DailySummary

    DailySummary.objects.create(user=alice, source="garmin", date=timezone.now().date())
    trace_write("normalized", user_id=alice.pk, request_id="rq-x")
    assert console.get("/admin/ingest/importjob/").status_code == 200
    assert console.get(f"/admin/ingest/importjob/{job.pk}/change/").status_code == 200
    job.refresh_from_db()
    assert job.rows_normalized == 1
    assert "rq-x" in console.get("/admin/ingest/traceevent/?request_id=rq-x").content.decode()
    assert "rq-x" in console.get("/admin/ingest/traceevent/?event=normalized").content.decode()
    assert "rq-x" not in console.get("/admin/ingest/traceevent/?event=dead").content.decode()


def test_staff_without_change_permission_sees_no_actions_and_cannot_drain(client):
    from django.contrib.auth.models import Permission

    viewer = UserFactory(username="viewer", is_staff=True)
    viewer.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_rawevent", "view_terraconnection"])
    )
    client.force_login(viewer)
    page = client.get(CHANGELIST)
    assert page.status_code == 200 and "replay_selected" not in page.content.decode()
    assert client.get("/admin/ingest/rawevent/drain/").status_code == 403


def test_the_changelist_offers_the_actions_to_operators(console):
    RawEventFactory(state="dead")
    page = console.get(CHANGELIST).content.decode()
    assert 'value="replay_selected"' in page and 'value="mark_skipped"' in page
    assert "/admin/ingest/rawevent/drain/" in page
