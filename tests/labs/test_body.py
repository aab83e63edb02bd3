"""Body webhooks → biomarkers: per day written in the payload, per `<provider>_body` source."""

import copy
from datetime import date

from ingest.consumer import raw_event_consume
from ingest.models import RawEvent, TraceEvent
from labs.models import Biomarker
from tests.conftest import load_fixture
from tests.factories import TerraConnectionFactory


def body_payload(*, reference_id: str = "alice") -> dict:
    payload = load_fixture("body.json")
    payload["user"]["reference_id"] = reference_id
    item = payload["data"][0]
    item["blood_pressure_data"] = {
        "blood_pressure_samples": [
            {"timestamp": "2026-07-01T07:00:00+01:00", "systolic_bp": 120, "diastolic_bp": 80},
            {"timestamp": "2026-07-01T12:00:00+01:00", "systolic_bp": 130, "diastolic_bp": 85},
            {"timestamp": "2026-07-01T20:00:00+01:00", "systolic_bp": 125, "diastolic_bp": None},
        ]
    }
    item["glucose_data"] = {
        "blood_glucose_samples": [{"timestamp": "t", "blood_glucose_mg_per_dL": 90}] * 3,
        "detailed_blood_glucose_samples": [{"timestamp": "t", "blood_glucose_mg_per_dL": 91}] * 2,
    }
    return payload


def consumed(deliver, payload) -> RawEvent:
    response = deliver(payload)
    assert response.status_code == 200, response.content
    raw_event_consume(response.json()["raw_event_id"])
    return RawEvent.objects.get(pk=response.json()["raw_event_id"])


def values(user) -> dict[str, tuple]:
    return {
        b.code: (b.source, b.measured_on, b.value, b.unit)
        for b in Biomarker.objects.filter(user=user)
    }


def test_body_day_becomes_biomarkers(alice, deliver):
    event = consumed(deliver, body_payload())

    assert event.state == "processed", event.process_error
    assert event.user == alice  # the console links the delivery to its user
    day = date(2026, 7, 1)  # written as 2026-07-01T00:00+01:00: not shifted to June 30 (UTC)
    assert values(alice) == {
        "systolic_bp": ("garmin_body", day, 125.0, "mmHg"),  # mean of 120, 130, 125
        "diastolic_bp": ("garmin_body", day, 82.5, "mmHg"),  # mean of 80, 85 (null ignored)
        "weight_kg": ("garmin_body", day, 72.4, "kg"),
        "body_fat_percent": ("garmin_body", day, 17.9, "%"),
        "resting_heart_rate": ("garmin_body", day, 52.0, "bpm"),
    }


def test_glucose_streams_are_skipped_and_counted(alice, deliver):
    event = consumed(deliver, body_payload())

    assert not Biomarker.objects.filter(code__icontains="glucose").exists()
    trace = TraceEvent.objects.get(raw_event=event, event="body_glucose_skipped")
    assert trace.data == {"glucose_samples": 5}


def test_glucose_only_body_is_acknowledged_as_skipped(alice, deliver):
    payload = body_payload()
    item = payload["data"][0]
    for key in ("blood_pressure_data", "measurements_data", "heart_data"):
        item.pop(key)

    event = consumed(deliver, payload)

    assert event.state == "skipped"
    assert event.process_error == "skipped:glucose_only:5"
    assert Biomarker.objects.count() == 0


def test_latest_weight_of_the_day_wins_and_days_stay_apart(alice, deliver):
    payload = body_payload()
    first = payload["data"][0]
    first["measurements_data"]["measurements"].append(
        {"measurement_time": "2026-07-01T21:00:00+01:00", "weight_kg": 72.0}
    )
    second = copy.deepcopy(first)
    second["metadata"] = {
        "start_time": "2026-07-02T00:00:00-07:00",
        "end_time": "2026-07-03T00:00:00-07:00",
    }
    second["measurements_data"] = {
        "measurements": [{"measurement_time": "2026-07-02T08:00:00-07:00", "weight_kg": 71.5}]
    }
    second["blood_pressure_data"] = {"blood_pressure_samples": []}
    payload["data"].append(second)

    consumed(deliver, payload)

    weights = dict(
        Biomarker.objects.filter(user=alice, code="weight_kg").values_list("measured_on", "value")
    )
    assert weights == {date(2026, 7, 1): 72.0, date(2026, 7, 2): 71.5}
    assert not Biomarker.objects.filter(measured_on=date(2026, 7, 2), code="systolic_bp").exists()


def test_body_user_found_by_connection_when_reference_is_unknown(bob, deliver):
    payload = body_payload(reference_id="someone-else")
    TerraConnectionFactory(user=bob, terra_user_id=payload["user"]["user_id"], provider="WITHINGS")
    payload["user"]["provider"] = "WITHINGS"

    event = consumed(deliver, payload)

    assert event.state == "processed", event.process_error
    assert {b.source for b in Biomarker.objects.filter(user=bob)} == {"withings_body"}


def test_body_for_an_unknown_user_is_parked(db, deliver):
    event = consumed(deliver, body_payload(reference_id="nobody"))

    assert event.state == "parked"
    assert event.process_error == "no_connection_for_terra_user"


def test_redelivered_body_day_overwrites_without_erasing(alice, deliver):
    consumed(deliver, body_payload())
    later = body_payload()
    item = later["data"][0]
    item["measurements_data"]["measurements"][0]["weight_kg"] = 72.9
    item.pop("blood_pressure_data")

    consumed(deliver, later)

    got = values(alice)
    assert got["weight_kg"][2] == 72.9
    assert got["systolic_bp"][2] == 125.0  # not in the new delivery: kept
