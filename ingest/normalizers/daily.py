"""`daily` deliveries → daily_summary, one row per (user, source, written date)."""

from ingest.models import RawEvent
from ingest.normalizers.common import (
    ITEM_READS,
    MappingReport,
    dig,
    integer,
    minutes,
    not_connected,
    number,
    resolve,
    source_of,
    written_date,
)
from ingest.normalizers.daily_merge import daily_merge
from ingest.registry import NormalizeResult, ValueOutOfRange, register

# Every item path daily_values and daily_vitals read (a big delivery keeps only these).
DAILY_READS = (
    *ITEM_READS,
    "active_durations_data.low_intensity_seconds",
    "active_durations_data.moderate_intensity_seconds",
    "active_durations_data.vigorous_intensity_seconds",
    "distance_data.steps",
    "distance_data.distance_meters",
    "calories_data.total_burned_calories",
    "stress_data.avg_stress_level",
    "strain_data.strain_level",
    "scores.recovery",
    "scores.sleep",
    "heart_rate_data.summary.resting_hr_bpm",
    "heart_rate_data.summary.avg_hrv_rmssd",
)


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


@register("daily", reads=DAILY_READS)
def normalize_daily(raw_event: RawEvent) -> NormalizeResult:
    """Each item merges into daily_summary on the date written in metadata.start_time (Terra's
    record identity for daily: the local 24-hour window), column by column, newest wins."""
    user = resolve(raw_event)
    if user is None:
        return not_connected()
    source = source_of(raw_event)
    report = MappingReport(raw_event)
    for item in report.items():
        day = written_date(dig(item, "metadata", "start_time"))
        if day is None:
            report.unmapped(item, "bad_start_time")
            continue
        values = {**daily_values(item), **daily_vitals(item)}
        if not report.mapped(values):
            continue
        try:
            merged = daily_merge(
                user_id=user.pk,
                source=source,
                day=day,
                values=values,
                ordered_at=raw_event.ordered_at,
            )
        except ValueOutOfRange as exc:
            report.refused(item, exc)
            continue
        report.written(merged.written, stale=merged.stale)
    return report.result()
