"""The merged daily row does not depend on arrival order: each scenario is
delivered through the signed webhook in every permutation and the resulting rows compared."""

import copy
import itertools
from datetime import date

import pytest

from ingest.models import DailySummary, RawEvent, SleepSession
from ingest.normalizers.daily_merge import PRECEDENCE
from tests.conftest import load_fixture

pytestmark = pytest.mark.django_db
JULY_1 = date(2026, 7, 1)
ORDERING = "HTTP_X_TERRA_ORDERING_TIMESTAMP"
VOLATILE = {"id", "created_at", "updated_at"}


def daily(**item) -> dict:
    payload = load_fixture("daily.json")
    payload["user"]["reference_id"] = "alice"
    payload["data"][0].update(copy.deepcopy(item))
    return payload


def sleep(summary_id, start, end, *, asleep, deep, rem, light, awake, **extra) -> dict:
    payload = load_fixture("sleep.json")
    payload["user"]["reference_id"] = "alice"
    payload["data"] = [
        {
            "metadata": {
                "summary_id": summary_id,
                "start_time": start,
                "end_time": end,
                "is_nap": False,
            },
            "sleep_durations_data": {
                "asleep": {
                    "duration_asleep_state_seconds": asleep,
                    "duration_deep_sleep_state_seconds": deep,
                    "duration_REM_sleep_state_seconds": rem,
                    "duration_light_sleep_state_seconds": light,
                },
                "awake": {"duration_awake_state_seconds": awake},
            },
            **copy.deepcopy(extra),
        }
    ]
    return payload


def daily_row() -> dict:
    row = DailySummary.objects.values().get()
    return {name: value for name, value in row.items() if name not in VOLATILE}


def rows_for_every_order(post, deliveries: list[tuple[dict, str]]) -> list[tuple]:
    """Deliver (payload, ordering ms) in every order from a clean slate; (order, row) each."""
    seen = []
    for order in itertools.permutations(range(len(deliveries))):
        DailySummary.objects.all().delete()
        SleepSession.objects.all().delete()
        RawEvent.objects.all().delete()  # the same bodies again are new deliveries
        for index in order:
            payload, ms = deliveries[index]
            assert post(payload, headers={ORDERING: ms}).status_code == 200
        seen.append((order, daily_row()))
    return seen


def assert_one_row(seen: list[tuple]) -> dict:
    first_order, first = seen[0]
    for order, row in seen[1:]:
        differs = {k: (first[k], row[k]) for k in first if first[k] != row[k]}
        assert not differs, f"order {order} differs from {first_order}: {differs}"
    return first


def test_scores_follow_one_precedence_per_column_in_both_orders(post, alice):
    deliveries = [
        (daily(scores={"recovery": 65, "sleep": 80}), "1782890000000"),
        (
            sleep(
                "night",
                "2026-06-30T23:00:00+01:00",
                "2026-07-01T07:00:00+01:00",
                asleep=27000,
                deep=5400,
                rem=6300,
                light=15300,
                awake=1800,
                readiness_data={"readiness": 70},
                scores={"sleep": 85},
            ),
            "1782890060000",
        ),
    ]
    row = assert_one_row(rows_for_every_order(post, deliveries))
    assert PRECEDENCE["recovery_score"][0] == "daily"
    assert row["recovery_score"] == 65
    assert row["sleep_score"] == 85


def test_a_sleep_without_hrv_does_not_block_the_dailys_hrv(post, alice):
    deliveries = [
        (
            daily(heart_rate_data={"summary": {"resting_hr_bpm": 58, "avg_hrv_rmssd": 41.5}}),
            "1782890000000",
        ),
        (
            sleep(
                "night",
                "2026-06-30T23:00:00+01:00",
                "2026-07-01T07:00:00+01:00",
                asleep=27000,
                deep=5400,
                rem=6300,
                light=15300,
                awake=1800,
                heart_rate_data={"summary": {"resting_hr_bpm": 49}},
            ),
            "1782890060000",
        ),
    ]
    row = assert_one_row(rows_for_every_order(post, deliveries))
    assert row["resting_heart_rate"] == 49  # sleep's, by precedence
    assert row["heart_rate_variability"] == 41.5  # the sleep had none: the daily's


def test_two_non_nap_sleeps_on_one_wake_date_give_the_longest_sessions_columns(post, alice):
    night = sleep(
        "night",
        "2026-06-30T23:00:00+01:00",
        "2026-07-01T07:00:00+01:00",
        asleep=27000,
        deep=5400,
        rem=6300,
        light=15300,
        awake=1800,
        heart_rate_data={"summary": {"resting_hr_bpm": 49, "avg_hrv_rmssd": 70}},
        respiration_data={"oxygen_saturation_data": {"avg_saturation_percentage": 96}},
        scores={"sleep": 85},
    )
    early = sleep(
        "early-morning",
        "2026-07-01T08:00:00+01:00",
        "2026-07-01T09:30:00+01:00",
        asleep=4800,
        deep=600,
        rem=1200,
        light=3000,
        awake=600,
        heart_rate_data={"summary": {"resting_hr_bpm": 55}},
        respiration_data={"breaths_data": {"avg_breaths_per_min": 15}},
        scores={"sleep": 60},
    )
    deliveries = [
        (night, "1782890000000"),
        (early, "1782890060000"),
        (daily(heart_rate_data={"summary": {"avg_hrv_rmssd": 41.5}}), "1782890120000"),
    ]
    row = assert_one_row(rows_for_every_order(post, deliveries))
    assert row["sleep_record_key"] == "night"
    assert row["sleep_minutes"] == 450
    assert row["spo2"] == 96 and row["respiratory_rate"] is None  # nothing from the other
    assert row["resting_heart_rate"] == 49 and row["heart_rate_variability"] == 70
    assert row["sleep_score"] == 85
    percents = ("deep_sleep_percent", "rem_sleep_percent", "light_sleep_percent", "awake_percent")
    assert sum(row[name] for name in percents) == pytest.approx(100)


def test_newer_and_older_dailies_merge_to_the_same_row_in_every_order(post, alice):
    deliveries = [
        (daily(distance_data={"steps": 1000}, strain_data={"strain_level": 3}), "1782890000000"),
        (daily(distance_data={"steps": 2000}, scores={"recovery": 60}), "1782890060000"),
        (daily(distance_data={"steps": 3000}), "1782890120000"),
    ]
    row = assert_one_row(rows_for_every_order(post, deliveries))
    # Each column: the newest delivery that carried a value for it.
    assert (row["steps"], row["strain"], row["recovery_score"]) == (3000, 3, 60)
