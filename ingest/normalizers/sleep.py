"""`sleep` deliveries → sleep_sessions (one per start time) and merged into daily_summary on the
wake date (the calendar date written in metadata.end_time)."""

from ingest.models import DailySummary, RawEvent, SleepSession
from ingest.normalizers.common import (
    data_items,
    dig,
    instant,
    minutes,
    not_connected,
    number,
    resolve,
    source_of,
    written_date,
)
from ingest.registry import NormalizeResult, register
from ingest.upsert import upsert_keep_non_null


def _percent(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return part / whole * 100


def sleep_figures(item: dict) -> dict:
    """Stages the payload lacks stay None: light sleep is never inferred as asleep − deep − REM."""
    asleep = dig(item, "sleep_durations_data", "asleep") or {}
    figures = {
        "sleep_minutes": minutes(dig(asleep, "duration_asleep_state_seconds")),
        "deep_sleep_minutes": minutes(dig(asleep, "duration_deep_sleep_state_seconds")),
        "rem_sleep_minutes": minutes(dig(asleep, "duration_REM_sleep_state_seconds")),
        "light_sleep_minutes": minutes(dig(asleep, "duration_light_sleep_state_seconds")),
        "awake_minutes": minutes(
            dig(item, "sleep_durations_data", "awake", "duration_awake_state_seconds")
        ),
        "resting_heart_rate": number(dig(item, "heart_rate_data", "summary", "resting_hr_bpm")),
        "heart_rate_variability": number(dig(item, "heart_rate_data", "summary", "avg_hrv_rmssd")),
        "spo2": number(
            dig(item, "respiration_data", "oxygen_saturation_data", "avg_saturation_percentage")
        ),
        "respiratory_rate": number(
            dig(item, "respiration_data", "breaths_data", "avg_breaths_per_min")
        ),
        "skin_temperature": number(dig(item, "temperature_data", "delta")),
        "sleep_score": number(dig(item, "scores", "sleep")),
        "recovery_score": number(dig(item, "readiness_data", "recovery_level")),
    }
    if figures["recovery_score"] is None:
        figures["recovery_score"] = number(dig(item, "readiness_data", "readiness"))
    return figures


def daily_sleep_values(item: dict, figures: dict) -> dict:
    asleep, awake = figures["sleep_minutes"], figures["awake_minutes"]
    in_bed = asleep + awake if asleep is not None and awake is not None else None
    values = {
        name: figures[name]
        for name in (
            "sleep_minutes",
            "deep_sleep_minutes",
            "rem_sleep_minutes",
            "light_sleep_minutes",
            "awake_minutes",
            "resting_heart_rate",
            "heart_rate_variability",
            "spo2",
            "respiratory_rate",
            "skin_temperature",
            "sleep_score",
            "recovery_score",
        )
    }
    values.update(
        deep_sleep_percent=_percent(figures["deep_sleep_minutes"], in_bed),
        rem_sleep_percent=_percent(figures["rem_sleep_minutes"], in_bed),
        light_sleep_percent=_percent(figures["light_sleep_minutes"], in_bed),
        awake_percent=_percent(awake, in_bed),
        bed_time=instant(dig(item, "metadata", "start_time")),
        wake_up_time=instant(dig(item, "metadata", "end_time")),
    )
    return values


@register("sleep")
def normalize_sleep(raw_event: RawEvent) -> NormalizeResult:
    user = resolve(raw_event)
    if user is None:
        return not_connected()
    source = source_of(raw_event)
    rows = 0
    for item in data_items(raw_event):
        start = instant(dig(item, "metadata", "start_time"))
        if start is None:
            continue
        figures = sleep_figures(item)
        is_nap = dig(item, "metadata", "is_nap")
        upsert_keep_non_null(
            SleepSession,
            key={"user_id": user.pk, "source": source, "start_time": start},
            values={
                **figures,
                "end_time": instant(dig(item, "metadata", "end_time")),
                "is_nap": is_nap if isinstance(is_nap, bool) else None,
                "sleep_efficiency": number(dig(item, "sleep_durations_data", "sleep_efficiency")),
                "raw": item,
            },
        )
        rows += 1
        wake_date = written_date(dig(item, "metadata", "end_time"))
        # A nap must not overwrite the night's figures on the day it happened.
        if wake_date is None or is_nap is True:
            continue
        values = daily_sleep_values(item, figures)
        from_sleep = (
            values["resting_heart_rate"] is not None or values["heart_rate_variability"] is not None
        )
        upsert_keep_non_null(
            DailySummary,
            key={"user_id": user.pk, "source": source, "date": wake_date},
            values={**values, "vitals_from_sleep": from_sleep},
            # A sleep without vitals must not release the daily's claim on them either way.
            keep_existing=set() if from_sleep else {"vitals_from_sleep"},
        )
        rows += 1
    return NormalizeResult(ok=True, rows=rows)
