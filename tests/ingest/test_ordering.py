"""Newest data wins: every raw event keeps Terra's ordering time, and a record is
written by the delivery Terra emitted last, whatever order the deliveries arrive in."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from ingest.actions import do_raw_events_replay
from ingest.models import RawEvent
from tests.conftest import load_fixture

pytestmark = pytest.mark.django_db

ORDERING = "HTTP_X_TERRA_ORDERING_TIMESTAMP"


def test_the_ordering_header_is_stored_as_the_events_ordering_time(deliver):
    response = deliver(load_fixture("daily.json"), headers={ORDERING: "1782890000123"})
    row = RawEvent.objects.get(pk=response.json()["raw_event_id"])
    assert row.ordered_at == datetime(2026, 7, 1, 7, 13, 20, 123000, tzinfo=UTC)


@pytest.mark.parametrize("header", [None, "", "soon", "-5", "12", "1.5e12", "99999999999999"])
def test_without_a_usable_header_the_ordering_time_is_the_receipt(deliver, header):
    before = timezone.now()
    headers = {ORDERING: header} if header is not None else {}
    response = deliver(load_fixture("daily.json"), headers=headers)
    row = RawEvent.objects.get(pk=response.json()["raw_event_id"])
    assert row.ordered_at == row.received_at
    assert row.received_at >= before


@pytest.mark.parametrize("ahead", [timedelta(hours=1), timedelta(hours=23)])
def test_an_unsigned_stamp_never_beats_the_receipt_by_more_than_the_trusted_skew(
    deliver, settings, ahead
):
    # Seen: the header is not covered by the signature, and a stamp up to 24 h ahead was
    # believed, pinning its record for a day.
    settings.TERRA_ORDERING_MAX_AHEAD_SECONDS = 300
    stamp = int((timezone.now() + ahead).timestamp() * 1000)
    response = deliver(load_fixture("daily.json"), headers={ORDERING: str(stamp)})
    row = RawEvent.objects.get(pk=response.json()["raw_event_id"])
    assert row.ordered_at == row.received_at


def test_a_stamp_a_little_ahead_is_believed(deliver, settings):
    settings.TERRA_ORDERING_MAX_AHEAD_SECONDS = 300
    stamp = int((timezone.now() + timedelta(seconds=60)).timestamp() * 1000)
    response = deliver(load_fixture("daily.json"), headers={ORDERING: str(stamp)})
    row = RawEvent.objects.get(pk=response.json()["raw_event_id"])
    assert row.ordered_at == datetime.fromtimestamp(stamp / 1000, tz=UTC)


def test_a_replay_keeps_the_original_ordering_time(deliver, django_capture_on_commit_callbacks):
    response = deliver(load_fixture("daily.json"), headers={ORDERING: "1782890000123"})
    pk = response.json()["raw_event_id"]
    with django_capture_on_commit_callbacks(execute=False):
        do_raw_events_replay(ids=[pk], actor="test")
    assert RawEvent.objects.get(pk=pk).ordered_at == datetime(
        2026, 7, 1, 7, 13, 20, 123000, tzinfo=UTC
    )


# --- newest wins, per record -------------------------------------------------------------

T1, T2, T3 = "1782890000000", "1782890060000", "1782890120000"  # ms, a minute apart


def stamped(ms: str) -> dict:
    return {"headers": {ORDERING: ms}}


def daily(fixture_payload, *, steps, calories=None, extra=None) -> dict:
    payload = fixture_payload("daily.json", reference="alice")
    item = payload["data"][0]
    item["distance_data"]["steps"] = steps
    if calories is not None:
        item["calories_data"]["total_burned_calories"] = calories
    item.update(extra or {})
    return payload


def trace_data(pk: int) -> dict:
    from ingest.models import TraceEvent

    return TraceEvent.objects.get(raw_event_id=pk, event="normalized").data


def test_a_revised_daily_wins_over_the_original_arriving_late(post, fixture_payload, alice):
    from ingest.models import DailySummary

    original = daily(fixture_payload, steps=1000, calories=1500.0)
    revised = daily(fixture_payload, steps=2000, calories=2400.0)
    post(revised, **stamped(T2))
    late = post(original, **stamped(T1)).json()["raw_event_id"]
    row = DailySummary.objects.get()
    assert (row.steps, row.total_burned_calories) == (2000, 2400.0)
    # The late one says why it changed nothing.
    assert trace_data(late)["stale"] == {"steps": 1, "total_burned_calories": 1}
    assert trace_data(late)["changed"] == 0


def test_a_re_serialized_retry_of_the_original_does_not_win_again(post, fixture_payload, alice):
    import json

    from ingest.models import DailySummary

    original = daily(fixture_payload, steps=1000)
    post(original, **stamped(T1))
    post(daily(fixture_payload, steps=2000), **stamped(T2))
    # Terra's retry of A: same ordering stamp, other bytes (so not a duplicate).
    post(json.dumps(original, indent=1).encode(), **stamped(T1))
    assert DailySummary.objects.get().steps == 2000


def test_a_null_in_the_newer_daily_does_not_erase_and_an_older_one_fills_no_newer_value(
    post, fixture_payload, alice
):
    from ingest.models import DailySummary

    newer = daily(fixture_payload, steps=2000)
    del newer["data"][0]["calories_data"]
    older = daily(fixture_payload, steps=1000, calories=1500.0)
    post(newer, **stamped(T2))
    post(older, **stamped(T1))
    row = DailySummary.objects.get()
    # steps: the newer value; calories: only the older delivery had one.
    assert (row.steps, row.total_burned_calories) == (2000, 1500.0)


def sleep(fixture_payload, *, summary_id, start, end, asleep, deep, rem=None) -> dict:
    payload = fixture_payload("sleep.json", reference="alice")
    item = payload["data"][0]
    item["metadata"].update(summary_id=summary_id, start_time=start, end_time=end)
    durations = item["sleep_durations_data"]["asleep"]
    durations["duration_asleep_state_seconds"] = asleep
    durations["duration_deep_sleep_state_seconds"] = deep
    if rem is not None:
        durations["duration_REM_sleep_state_seconds"] = rem
    return payload


def test_a_sleep_revision_with_the_same_summary_id_updates_its_one_row(
    post, fixture_payload, alice
):
    from ingest.models import DailySummary, SleepSession

    first = sleep(
        fixture_payload,
        summary_id="s-1",
        start="2026-06-30T23:12:00+01:00",
        end="2026-07-01T07:02:00+01:00",
        asleep=25200,
        deep=5400,
    )
    revised = sleep(
        fixture_payload,
        summary_id="s-1",
        start="2026-06-30T23:40:00+01:00",
        end="2026-07-01T07:02:00+01:00",
        asleep=24000,
        deep=6000,
    )
    post(first, **stamped(T1))
    post(revised, **stamped(T2))
    session = SleepSession.objects.get()
    assert session.start_time == datetime(2026, 6, 30, 22, 40, tzinfo=UTC)
    assert (session.sleep_minutes, session.deep_sleep_minutes) == (400, 100)
    day = DailySummary.objects.get()
    assert day.sleep_minutes == 400
    assert day.bed_time == session.start_time
    assert day.deep_sleep_percent == pytest.approx(100 / (400 + 25) * 100)


def test_an_older_sleep_revision_arriving_late_changes_nothing(post, fixture_payload, alice):
    from ingest.models import SleepSession

    first = sleep(
        fixture_payload,
        summary_id="s-1",
        start="2026-06-30T23:12:00+01:00",
        end="2026-07-01T07:02:00+01:00",
        asleep=25200,
        deep=5400,
    )
    revised = sleep(
        fixture_payload,
        summary_id="s-1",
        start="2026-06-30T23:40:00+01:00",
        end="2026-07-01T07:02:00+01:00",
        asleep=24000,
        deep=6000,
    )
    post(revised, **stamped(T2))
    late = post(first, **stamped(T1)).json()["raw_event_id"]
    session = SleepSession.objects.get()
    assert session.sleep_minutes == 400
    assert trace_data(late)["stale"] == {"sleep_session": 1}


def activity(fixture_payload, *, start, calories) -> dict:
    payload = fixture_payload("activity.json", reference="alice")
    item = payload["data"][0]
    item["metadata"]["start_time"] = start
    item["calories_data"]["total_burned_calories"] = calories
    return payload


@pytest.mark.parametrize("order", ["in_order", "reversed"])
def test_an_activity_revision_updates_its_one_row_in_any_order(post, fixture_payload, alice, order):
    from ingest.models import Activity

    first = activity(fixture_payload, start="2026-07-01T07:04:11+01:00", calories=500.0)
    revised = activity(fixture_payload, start="2026-07-01T07:05:00+01:00", calories=530.0)
    pairs = [(first, T1), (revised, T2)]
    for payload, ms in pairs if order == "in_order" else reversed(pairs):
        post(payload, **stamped(ms))
    row = Activity.objects.get()
    assert row.record_key == "123e4567-e89b-12d3-a456-426614174000"
    assert row.start_time == datetime(2026, 7, 1, 6, 5, tzinfo=UTC)
    assert row.calories == 530.0


def test_activities_without_a_summary_id_are_told_apart_by_start(post, fixture_payload, alice):
    from ingest.models import Activity

    for start in ("2026-07-01T07:04:11+01:00", "2026-07-01T18:00:00+01:00"):
        payload = activity(fixture_payload, start=start, calories=500.0)
        del payload["data"][0]["metadata"]["summary_id"]
        post(payload)
    assert Activity.objects.count() == 2


@pytest.mark.parametrize("order", ["in_order", "reversed"])
def test_the_newest_body_delivery_wins_for_its_day(post, fixture_payload, alice, order):
    from labs.models import Biomarker

    def body(weight):
        payload = fixture_payload("body.json", reference="alice")
        payload["data"][0]["measurements_data"]["measurements"][0]["weight_kg"] = weight
        return payload

    pairs = [(body(72.4), T1), (body(71.9), T2)]
    for payload, ms in pairs if order == "in_order" else reversed(pairs):
        post(payload, **stamped(ms))
    assert Biomarker.objects.get(code="weight_kg").value == 71.9
