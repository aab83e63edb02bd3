"""Nothing that maps to nothing is called "processed", deterministic errors park at
once, and the smaller points of §7 (last_webhook_at, sleep_efficiency on 0–100)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ingest import recording
from ingest.models import RawEvent, RawEventState, SleepSession, TerraConnection, TraceEvent
from tests.factories import TerraConnectionFactory
from tests.ingest.conftest import TERRA_USER

pytestmark = pytest.mark.django_db


def outcome(response) -> RawEvent:
    return RawEvent.objects.get(pk=response.json()["raw_event_id"])


def normalized_trace(row: RawEvent) -> dict:
    return TraceEvent.objects.get(raw_event=row, event="normalized").data


def legacy_daily(fixture_payload) -> dict:
    payload = fixture_payload("daily.json", reference="alice")
    payload["version"] = "2021-04-06"
    payload["data"] = [{"date": "2021-06-01", "steps": 9000, "calories": 2100}]
    return payload


def data_object(fixture_payload) -> dict:
    payload = fixture_payload("sleep.json", reference="alice")
    payload["data"] = payload["data"][0]
    return payload


def missing_metadata(fixture_payload) -> dict:
    payload = fixture_payload("activity.json", reference="alice")
    del payload["data"][0]["metadata"]
    return payload


def bad_start_time(fixture_payload) -> dict:
    payload = fixture_payload("daily.json", reference="alice")
    payload["data"][0]["metadata"]["start_time"] = "yesterday"
    return payload


def body_bad_start_time(fixture_payload) -> dict:
    payload = fixture_payload("body.json", reference="alice")
    payload["data"][0]["metadata"]["start_time"] = 1782890000
    return payload


@pytest.mark.parametrize(
    "make, reason",
    [
        (legacy_daily, "legacy_shape"),
        (data_object, "data_not_a_list"),
        (missing_metadata, "missing_metadata"),
        (bad_start_time, "bad_start_time"),
        (body_bad_start_time, "bad_start_time"),
    ],
)
def test_a_delivery_that_maps_to_nothing_is_skipped_as_unmappable_and_in_the_dlq(
    post, fixture_payload, alice, operator_api, make, reason
):
    row = outcome(post(make(fixture_payload)))
    assert row.state == RawEventState.SKIPPED
    assert row.process_error == f"skipped:unmappable:{reason}"
    dlq = operator_api("ingest:admin").get("/v1/admin/dlq", {"state": "skipped"}).json()
    assert [item["id"] for item in dlq["raw_events"]] == [row.pk]


def test_an_empty_data_list_is_processed_with_no_rows(post, fixture_payload, alice):
    payload = fixture_payload("daily.json", reference="alice")
    payload["data"] = []
    row = outcome(post(payload))
    assert (row.state, row.process_error) == (RawEventState.PROCESSED, None)


def test_an_item_mapped_in_part_records_the_absent_fields_in_its_trace(
    post, fixture_payload, alice
):
    payload = fixture_payload("daily.json", reference="alice")
    old = {
        "metadata": {"start_time": "2026-07-02T00:00:00+01:00"},
        "steps": 5000,
        "calories_data": {"total_burned_calories": 2000},
    }
    payload["data"].append(old)  # an old-style item inside a modern data[]
    payload["data"].append({"steps": 1})  # and two that cannot be mapped at all
    payload["data"].append({"metadata": {"start_time": "2026-07-03T00:00:00+01:00"}})
    row = outcome(post(payload))
    assert row.state == RawEventState.PROCESSED
    trace = normalized_trace(row)
    assert trace["rows"] == 2
    assert trace["absent_fields"]["steps"] == 1  # the old item's steps were not where expected
    assert trace["absent_fields"]["strain"] == 2
    assert trace["unmapped"] == {"missing_metadata": 1, "no_known_fields": 1}


def test_a_delivery_whose_only_item_is_out_of_range_is_skipped_with_a_clear_message(
    post, fixture_payload, alice
):
    # Items are mapped one by one: an item its columns can never hold is left out; when it was
    # the only one, the delivery is unmappable, the value named (tests/ingest/test_hostile_strings
    # has the item beside good ones).
    payload = fixture_payload("daily.json", reference="alice")
    payload["data"][0]["distance_data"]["steps"] = 1e20
    row = outcome(post(payload))
    assert row.state == RawEventState.SKIPPED
    assert row.process_error.startswith(
        "skipped:unmappable:value_out_of_range: daily_summary.steps = "
    )
    assert "out of range" in row.process_error


def test_last_webhook_at_is_stamped_from_deliveries_at_most_once_a_minute(
    post, fixture_payload, alice, monkeypatch
):
    monkeypatch.setattr(recording, "_last_seen", {})
    TerraConnectionFactory(user=alice, terra_user_id=TERRA_USER)
    first = outcome(post(fixture_payload("daily.json", reference="alice")))
    stamped = TerraConnection.objects.get().last_webhook_at
    assert stamped == first.received_at
    post(fixture_payload("sleep.json", reference="alice"))
    assert TerraConnection.objects.get().last_webhook_at == stamped  # within the minute
    # A minute on (another process, or this one's memo expired): stamped again.
    monkeypatch.setattr(recording, "_last_seen", {})
    TerraConnection.objects.update(last_webhook_at=stamped - timedelta(minutes=2))
    later = outcome(post(fixture_payload("activity.json", reference="alice")))
    assert TerraConnection.objects.get().last_webhook_at == later.received_at
    assert later.received_at <= timezone.now()


@pytest.mark.parametrize("sent, stored", [(0.89, 89.0), (91.5, 91.5), (1.0, 100.0), (140, None)])
def test_sleep_efficiency_is_stored_on_a_0_to_100_scale(post, fixture_payload, alice, sent, stored):
    payload = fixture_payload("sleep.json", reference="alice")
    payload["data"][0]["sleep_durations_data"]["sleep_efficiency"] = sent
    post(payload)
    assert SleepSession.objects.get().sleep_efficiency == pytest.approx(stored)
