"""Wearable normalizers through the real endpoint and the queue: daily, sleep (and their merge),
activity, connection events. Payloads are Terra's published examples."""

import copy
from datetime import date, datetime, timedelta, timezone

import pytest

from ingest.models import (
    Activity,
    DailySummary,
    RawEvent,
    RawEventState,
    SleepSession,
    TerraConnection,
)
from tests.factories import TerraConnectionFactory
from tests.ingest.conftest import TERRA_USER

pytestmark = pytest.mark.django_db
JULY_1 = date(2026, 7, 1)
PLUS_ONE = timezone(timedelta(hours=1))


def daily_full(**overrides) -> dict:
    item = {
        "metadata": {
            "start_time": "2026-07-01T00:00:00.000000+01:00",
            "end_time": "2026-07-02T00:00:00.000000+01:00",
        },
        "distance_data": {"steps": 11894, "distance_meters": 9412.7},
        "calories_data": {"total_burned_calories": 2450.8},
        "heart_rate_data": {"summary": {"resting_hr_bpm": 58, "avg_hrv_rmssd": 41.5}},
        "active_durations_data": {
            "low_intensity_seconds": 3600,
            "moderate_intensity_seconds": 1200,
            "vigorous_intensity_seconds": 300,
        },
        "stress_data": {"avg_stress_level": 31},
        "strain_data": {"strain_level": 12.5},
        "scores": {"recovery": 77, "sleep": 81},
    }
    item.update(overrides)
    return item


def with_items(payload: dict, *items) -> dict:
    payload = copy.deepcopy(payload)
    payload["data"] = list(items)
    return payload


def test_daily_maps_every_field_on_the_date_written(post, fixture_payload, alice):
    payload = with_items(fixture_payload("daily.json", reference="alice"), daily_full())
    assert post(payload).status_code == 200
    row = DailySummary.objects.get()
    assert (row.user, row.source, row.date) == (alice, "garmin", JULY_1)
    assert row.steps == 11894
    assert row.distance_meters == 9412.7
    assert row.total_burned_calories == 2450.8
    assert row.resting_heart_rate == 58
    assert row.heart_rate_variability == 41.5
    assert row.fatburn_active_zone_minutes == 60
    assert row.cardio_active_zone_minutes == 20
    assert row.peak_active_zone_minutes == 5
    assert row.active_zone_minutes == 85
    assert row.stress_management_score == 31
    assert row.strain == 12.5
    assert row.recovery_score == 77
    assert row.sleep_score == 81
    event = RawEvent.objects.get()
    assert event.state == RawEventState.PROCESSED
    assert event.processed_at is not None and event.process_error is None
    assert event.user == alice


def test_daily_from_the_fixture_uses_the_written_date_not_the_utc_one(post, fixture_payload, alice):
    # 2026-07-01T00:00:00+01:00 is 2026-06-30 in UTC; the day is the one written.
    post(fixture_payload("daily.json", reference="alice"))
    assert DailySummary.objects.get().date == JULY_1


def test_redelivery_of_the_same_day_with_new_values_updates_the_row(post, fixture_payload, alice):
    post(with_items(fixture_payload("daily.json", reference="alice"), daily_full()))
    changed = daily_full(distance_data={"steps": 15000})
    post(with_items(fixture_payload("daily.json", reference="alice"), changed))
    row = DailySummary.objects.get()
    assert row.steps == 15000
    assert row.distance_meters == 9412.7  # absent from the redelivery: kept, never nulled
    assert RawEvent.objects.filter(state=RawEventState.PROCESSED).count() == 2


def test_sleep_maps_sessions_and_merges_into_the_wake_date(post, fixture_payload, alice):
    item = {
        "metadata": {
            "start_time": "2026-06-30T23:12:00.000000+01:00",
            "end_time": "2026-07-01T07:02:00.000000+01:00",
            "is_nap": False,
        },
        "sleep_durations_data": {
            "asleep": {
                "duration_asleep_state_seconds": 25200,
                "duration_deep_sleep_state_seconds": 5400,
                "duration_REM_sleep_state_seconds": 5100,
                "duration_light_sleep_state_seconds": 14700,
            },
            "awake": {"duration_awake_state_seconds": 2800},
            "sleep_efficiency": 90,
        },
        "heart_rate_data": {"summary": {"resting_hr_bpm": 49, "avg_hrv_rmssd": 71.2}},
        "respiration_data": {
            "oxygen_saturation_data": {"avg_saturation_percentage": 96.5},
            "breaths_data": {"avg_breaths_per_min": 14.2},
        },
        "temperature_data": {"delta": -0.3},
        "scores": {"sleep": 88},
        "readiness_data": {"recovery_level": 4, "readiness": 80},
    }
    post(with_items(fixture_payload("sleep.json", reference="alice"), item))
    session = SleepSession.objects.get()
    assert session.start_time == datetime(2026, 6, 30, 23, 12, tzinfo=PLUS_ONE)
    assert session.end_time == datetime(2026, 7, 1, 7, 2, tzinfo=PLUS_ONE)
    assert session.is_nap is False
    assert session.sleep_minutes == 420
    assert session.sleep_efficiency == 90
    assert session.raw == item
    day = DailySummary.objects.get()
    assert day.date == JULY_1
    assert day.sleep_minutes == 420
    assert day.deep_sleep_minutes == 90
    assert day.rem_sleep_minutes == 85
    assert day.light_sleep_minutes == 245
    assert day.awake_minutes == pytest.approx(2800 / 60)
    in_bed = 25200 + 2800
    assert day.deep_sleep_percent == pytest.approx(5400 / in_bed * 100)
    assert day.rem_sleep_percent == pytest.approx(5100 / in_bed * 100)
    assert day.light_sleep_percent == pytest.approx(14700 / in_bed * 100)
    assert day.awake_percent == pytest.approx(2800 / in_bed * 100)
    assert day.bed_time == session.start_time and day.wake_up_time == session.end_time
    assert (day.resting_heart_rate, day.heart_rate_variability) == (49, 71.2)
    assert (day.spo2, day.respiratory_rate, day.skin_temperature) == (96.5, 14.2, -0.3)
    assert day.sleep_score == 88
    assert day.recovery_score == 4


def test_sleep_recovery_falls_back_to_readiness(post, fixture_payload, alice):
    payload = fixture_payload("sleep.json", reference="alice")
    payload["data"][0]["readiness_data"] = {"readiness": 80}
    post(payload)
    assert DailySummary.objects.get().recovery_score == 80


def test_a_missing_sleep_stage_stays_null(post, fixture_payload, alice):
    # The fixture has asleep, deep and REM but no light stage: never inferred.
    post(fixture_payload("sleep.json", reference="alice"))
    day = DailySummary.objects.get()
    assert day.light_sleep_minutes is None and day.light_sleep_percent is None
    assert SleepSession.objects.get().light_sleep_minutes is None
    assert day.deep_sleep_minutes == 90


@pytest.mark.parametrize("order", [("daily", "sleep"), ("sleep", "daily")])
def test_daily_and_sleep_for_the_same_day_merge_into_one_row(post, fixture_payload, alice, order):
    payloads = {
        "daily": with_items(fixture_payload("daily.json", reference="alice"), daily_full()),
        "sleep": fixture_payload("sleep.json", reference="alice"),
    }
    payloads["sleep"]["data"][0]["heart_rate_data"] = {
        "summary": {"resting_hr_bpm": 47, "avg_hrv_rmssd": 80.0}
    }
    for kind in order:
        assert post(payloads[kind]).status_code == 200
    row = DailySummary.objects.get()
    assert row.steps == 11894  # from daily
    assert row.sleep_minutes == 420  # from sleep
    assert row.deep_sleep_minutes == 90
    # Sleep's vitals win whatever the order.
    assert (row.resting_heart_rate, row.heart_rate_variability) == (47, 80.0)


def test_daily_vitals_stay_when_the_sleep_has_none(post, fixture_payload, alice):
    post(fixture_payload("sleep.json", reference="alice"))  # no heart-rate data
    post(with_items(fixture_payload("daily.json", reference="alice"), daily_full()))
    row = DailySummary.objects.get()
    assert (row.resting_heart_rate, row.heart_rate_variability) == (58, 41.5)
    assert row.sleep_minutes == 420


def test_a_nap_gets_a_session_but_does_not_overwrite_the_night(post, fixture_payload, alice):
    post(fixture_payload("sleep.json", reference="alice"))
    nap = fixture_payload("sleep.json", reference="alice")
    nap["data"][0]["metadata"].update(
        start_time="2026-07-01T14:00:00.000000+01:00",
        end_time="2026-07-01T14:30:00.000000+01:00",
        is_nap=True,
    )
    nap["data"][0]["sleep_durations_data"]["asleep"]["duration_asleep_state_seconds"] = 1800
    post(nap)
    assert SleepSession.objects.count() == 2
    assert DailySummary.objects.get().sleep_minutes == 420


def test_activity_maps_fields_and_keeps_the_offset(post, fixture_payload, alice):
    post(fixture_payload("activity.json", reference="alice"))
    row = Activity.objects.get()
    assert row.start_time == datetime(2026, 7, 1, 7, 4, 11, tzinfo=PLUS_ONE)
    assert row.end_time == datetime(2026, 7, 1, 7, 52, 48, tzinfo=PLUS_ONE)
    assert row.name == "Morning Run"
    assert row.activity_type == 8
    assert row.duration_seconds == 48 * 60 + 37
    assert row.calories == 512.5
    assert row.distance_meters == 8250.4
    assert row.average_heart_rate == 148.2
    assert row.source == "garmin"


def test_activity_type_zero_is_a_real_code(post, fixture_payload, alice):
    payload = fixture_payload("activity.json", reference="alice")
    payload["data"][0]["metadata"]["type"] = 0
    post(payload)
    assert Activity.objects.get().activity_type == 0


def test_source_is_the_provider_lower_cased(post, fixture_payload, alice):
    payload = fixture_payload("daily.json", reference="alice")
    payload["user"]["provider"] = "WHOOP"
    post(payload)
    assert DailySummary.objects.get().source == "whoop"


def test_data_resolves_through_the_connection_when_reference_is_unknown(post, fixture_payload, bob):
    TerraConnectionFactory(user=bob, terra_user_id=TERRA_USER)
    post(fixture_payload("daily.json"))  # reference_id "your-user-123" names nobody
    assert DailySummary.objects.get().user == bob


# --- connection events -------------------------------------------------------------------


def test_auth_connects_the_user_and_requests_a_90_day_backfill(post, fixture_payload, terra):
    post(fixture_payload("auth.json"))
    connection = TerraConnection.objects.get()
    assert connection.terra_user_id == TERRA_USER
    assert connection.user.username == "your-user-123"
    assert connection.provider == "GARMIN"
    assert connection.reference_id == "your-user-123"
    assert connection.scopes == "ACTIVITY_EXPORT,HEALTH_EXPORT"
    assert connection.deactivated_at is None
    paths = sorted(r.url.path for r in terra.requests)
    assert paths == ["/v2/activity", "/v2/body", "/v2/daily", "/v2/sleep"]
    params = terra.requests[0].url.params
    assert params["user_id"] == TERRA_USER
    start, end = date.fromisoformat(params["start_date"]), date.fromisoformat(params["end_date"])
    assert (end - start).days == 90
    assert params["to_webhook"] == "true"
    assert RawEvent.objects.get().state == RawEventState.PROCESSED


def test_auth_backfill_failure_does_not_fail_the_event(post, fixture_payload, terra):
    terra.on("GET", "/v2/sleep", (500, {"message": "boom"}))
    terra.on("GET", "/v2/daily", ConnectionError("unreachable"))
    post(fixture_payload("auth.json"))
    assert RawEvent.objects.get().state == RawEventState.PROCESSED
    assert TerraConnection.objects.count() == 1


def test_auth_reactivates_a_deactivated_connection(post, fixture_payload, alice):
    TerraConnectionFactory(
        user=alice, terra_user_id=TERRA_USER, deactivated_at=datetime(2026, 1, 1, tzinfo=PLUS_ONE)
    )
    post(fixture_payload("auth.json", reference="alice"))
    assert TerraConnection.objects.get().deactivated_at is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [("auth_cancelled.json", "skipped:auth_cancelled"), ("auth_error", "skipped:auth_error")],
)
def test_failed_or_cancelled_auth_is_skipped(post, fixture_payload, name, reason):
    if name == "auth_error":
        payload = fixture_payload("auth.json")
        payload["status"] = "error"
    else:
        payload = fixture_payload(name)
    post(payload)
    row = RawEvent.objects.get()
    assert (row.state, row.process_error) == (RawEventState.SKIPPED, reason)
    assert row.processed_at is not None
    assert not TerraConnection.objects.exists()


def test_user_reauth_moves_the_connection_to_the_new_id(post, fixture_payload, alice):
    TerraConnectionFactory(user=alice, terra_user_id=TERRA_USER)
    post(fixture_payload("user_reauth.json", reference="alice"))
    connection = TerraConnection.objects.get()
    assert connection.terra_user_id == "9c8b7a65-4321-4fed-a0b9-87c6d5e4f321"
    assert connection.user == alice and connection.deactivated_at is None


def test_data_for_the_new_id_after_reauth_reaches_the_same_user(post, fixture_payload, alice):
    TerraConnectionFactory(user=alice, terra_user_id=TERRA_USER)
    post(fixture_payload("user_reauth.json", reference="alice"))
    post(fixture_payload("daily.json", terra_user="9c8b7a65-4321-4fed-a0b9-87c6d5e4f321"))
    assert DailySummary.objects.get().user == alice


@pytest.mark.parametrize("name", ["deauth.json", "access_revoked.json"])
def test_deauth_and_access_revoked_deactivate_the_connection(post, fixture_payload, alice, name):
    TerraConnectionFactory(user=alice, terra_user_id=TERRA_USER)
    post(fixture_payload(name))
    assert TerraConnection.objects.get().deactivated_at is not None
    assert RawEvent.objects.get().state == RawEventState.PROCESSED


def test_data_after_deauth_parks_when_only_the_connection_named_the_user(
    post, fixture_payload, bob
):
    TerraConnectionFactory(user=bob, terra_user_id=TERRA_USER)
    post(fixture_payload("deauth.json"))
    post(fixture_payload("daily.json"))
    assert RawEvent.objects.get(event_type="daily").process_error == "no_connection_for_terra_user"


def test_auth_without_scopes_or_provider_still_connects_and_keeps_what_we_know(
    post, fixture_payload, alice
):
    TerraConnectionFactory(user=alice, terra_user_id=TERRA_USER, scopes="OLD_SCOPE")
    payload = fixture_payload("auth.json", reference="alice")
    del payload["user"]["scopes"], payload["user"]["provider"]
    post(payload)
    connection = TerraConnection.objects.get()
    assert (connection.scopes, connection.provider) == ("OLD_SCOPE", "GARMIN")
    assert RawEvent.objects.get().state == RawEventState.PROCESSED


def test_first_auth_without_scopes_creates_the_connection(post, fixture_payload):
    payload = fixture_payload("auth.json")
    del payload["user"]["scopes"]
    post(payload)
    assert TerraConnection.objects.get().scopes == ""
