"""`sleep` deliveries → sleep_sessions (one per summary_id) and merged into daily_summary on the
wake date (the calendar date written in metadata.end_time)."""

from ingest.models import RawEvent, SleepSession
from ingest.normalizers.common import (
    ITEM_READS,
    MappingReport,
    dig,
    instant,
    minutes,
    not_connected,
    number,
    record_key,
    resolve,
    source_of,
    written_date,
)
from ingest.normalizers.daily_merge import sleep_merge
from ingest.normalizers.rows import Upserted, upsert_newest
from ingest.registry import NormalizeResult, ValueOutOfRange, register
from ingest.store import rows as store

# Every item path the sleep normalizer reads (a big delivery keeps only these, and so does the
# session's `raw`).
SLEEP_READS = (
    *ITEM_READS,
    "sleep_durations_data.asleep.duration_asleep_state_seconds",
    "sleep_durations_data.asleep.duration_deep_sleep_state_seconds",
    "sleep_durations_data.asleep.duration_REM_sleep_state_seconds",
    "sleep_durations_data.asleep.duration_light_sleep_state_seconds",
    "sleep_durations_data.awake.duration_awake_state_seconds",
    "sleep_durations_data.sleep_efficiency",
    "heart_rate_data.summary.resting_hr_bpm",
    "heart_rate_data.summary.avg_hrv_rmssd",
    "respiration_data.oxygen_saturation_data.avg_saturation_percentage",
    "respiration_data.breaths_data.avg_breaths_per_min",
    "temperature_data.delta",
    "scores.sleep",
    "readiness_data.recovery_level",
    "readiness_data.readiness",
)


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


def efficiency_percent(value) -> float | None:
    """sleep_efficiency on a 0–100 scale: providers send a fraction (0.89) or a percentage
    (91.5); values that are neither are dropped."""
    figure = number(value)
    if figure is None or figure < 0:
        return None
    if figure <= 1:
        figure *= 100
    return figure if figure <= 100 else None


@register("sleep", reads=SLEEP_READS)
def normalize_sleep(raw_event: RawEvent) -> NormalizeResult:
    """Each item is one session, identified by (user, source, metadata.summary_id) — by its
    start when the id is absent — written when no newer delivery of it was; then the daily rows
    of the wake dates it affects are re-merged (daily_merge.sleep_merge)."""
    user = resolve(raw_event)
    if user is None:
        return not_connected()
    source = source_of(raw_event)
    report = MappingReport(raw_event)
    for item in report.items():
        start = instant(dig(item, "metadata", "start_time"))
        key = record_key(item, start)
        if start is None or key is None:
            report.unmapped(item, "bad_start_time")
            continue
        figures = sleep_figures(item)
        is_nap = dig(item, "metadata", "is_nap")
        end_time = dig(item, "metadata", "end_time")
        values = {
            **figures,
            "end_time": instant(end_time),
            "is_nap": is_nap if isinstance(is_nap, bool) else None,
            "sleep_efficiency": efficiency_percent(
                dig(item, "sleep_durations_data", "sleep_efficiency")
            ),
        }
        if not report.mapped(values):
            continue
        before = store.sleep_session_wake(user.pk, source, key)
        try:
            outcome = upsert_newest(
                SleepSession,
                key={"user_id": user.pk, "source": source, "record_key": key},
                values={
                    **values,
                    "start_time": start,
                    "wake_date": written_date(end_time),  # the daily row it feeds
                    "ordered_at": raw_event.ordered_at,
                    "raw": item,
                },
            )
        except ValueOutOfRange as exc:
            report.refused(item, exc)
            continue
        if outcome is Upserted.STALE:
            report.written(False, stale=["sleep_session"])
            continue
        changed = outcome is Upserted.WRITTEN
        # The upsert keeps stored values where this item has none (COALESCE): so does this.
        wake, nap = written_date(end_time), values["is_nap"]
        after = (
            wake if wake is not None else (before[0] if before else None),
            nap if nap is not None else (before[1] if before else None),
        )
        days = {}
        for stored in (before, after):
            if stored is not None and stored[0] is not None:
                # A nap never feeds the daily row; the day it counted for is re-merged.
                days[stored[0]] = days.get(stored[0], False) or stored[1] is not True
        for day, counts in sorted(days.items()):
            changed |= sleep_merge(user_id=user.pk, source=source, day=day, create=counts)
        report.written(changed)
    return report.result()
