"""`daily` deliveries → daily_summary, one row per (user, source, written date)."""

from django.db import connection
from django.utils import timezone

from ingest.models import DailySummary, RawEvent
from ingest.normalizers.common import (
    data_items,
    dig,
    integer,
    minutes,
    not_connected,
    number,
    resolve,
    source_of,
    written_date,
)
from ingest.registry import NormalizeResult, register
from ingest.upsert import upsert_keep_non_null

# Sleep's resting HR / HRV win over the daily's: once a sleep wrote them (vitals_from_sleep),
# a daily — early or late — must not replace them.
VITALS = ("resting_heart_rate", "heart_rate_variability")


def daily_values(item: dict) -> dict:
    low = minutes(dig(item, "active_durations_data", "low_intensity_seconds"))
    moderate = minutes(dig(item, "active_durations_data", "moderate_intensity_seconds"))
    vigorous = minutes(dig(item, "active_durations_data", "vigorous_intensity_seconds"))
    zones = [v for v in (low, moderate, vigorous) if v is not None]
    return {
        "steps": integer(dig(item, "distance_data", "steps")),
        "distance_meters": number(dig(item, "distance_data", "distance_meters")),
        "total_burned_calories": number(dig(item, "calories_data", "total_burned_calories")),
        "fatburn_active_zone_minutes": low,
        "cardio_active_zone_minutes": moderate,
        "peak_active_zone_minutes": vigorous,
        "active_zone_minutes": sum(zones) if zones else None,
        "stress_management_score": number(dig(item, "stress_data", "avg_stress_level")),
        "strain": number(dig(item, "strain_data", "strain_level")),
        "recovery_score": number(dig(item, "scores", "recovery")),
        "sleep_score": number(dig(item, "scores", "sleep")),
    }


def daily_vitals(item: dict) -> dict:
    return {
        "resting_heart_rate": number(dig(item, "heart_rate_data", "summary", "resting_hr_bpm")),
        "heart_rate_variability": number(dig(item, "heart_rate_data", "summary", "avg_hrv_rmssd")),
    }


def _write_vitals_unless_from_sleep(key: dict, vitals: dict) -> None:
    """One conditional UPDATE (atomic on both databases), so a sleep landing concurrently still
    wins: the row is only touched while vitals_from_sleep is false and a value differs. Plain
    SQL because it runs for every daily item and the ORM's update() cost more than the
    statement; `col IS NULL OR col <> v` is what the ORM wrote for ~Q(col=v)."""
    present = {name: value for name, value in vitals.items() if value is not None}
    if not present:
        return
    q, ops = connection.ops.quote_name, connection.ops
    assignments = ", ".join(f"{q(name)} = %s" for name in [*present, "updated_at"])
    differs = " OR ".join(f"{q(name)} IS NULL OR {q(name)} <> %s" for name in present)
    sql = (
        f"UPDATE {q(DailySummary._meta.db_table)} SET {assignments} "
        f"WHERE {q('user_id')} = %s AND {q('source')} = %s AND {q('date')} = %s "
        f"AND {q('vitals_from_sleep')} = %s AND ({differs})"
    )
    params = [
        *present.values(),
        ops.adapt_datetimefield_value(timezone.now()),
        key["user_id"],
        key["source"],
        ops.adapt_datefield_value(key["date"]),
        False,
        *present.values(),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


@register("daily")
def normalize_daily(raw_event: RawEvent) -> NormalizeResult:
    user = resolve(raw_event)
    if user is None:
        return not_connected()
    source = source_of(raw_event)
    rows = 0
    for item in data_items(raw_event):
        day = written_date(dig(item, "metadata", "start_time"))
        if day is None:
            continue
        key = {"user_id": user.pk, "source": source, "date": day}
        upsert_keep_non_null(
            DailySummary,
            key=key,
            values={**daily_values(item), "vitals_from_sleep": False},
            keep_existing={"vitals_from_sleep"},
        )
        _write_vitals_unless_from_sleep(key, daily_vitals(item))
        rows += 1
    return NormalizeResult(ok=True, rows=rows)
