"""`activity` deliveries → activities, one row per (user, source, summary_id)."""

from ingest.models import Activity, RawEvent
from ingest.normalizers.common import (
    ITEM_READS,
    MappingReport,
    dig,
    instant,
    integer,
    not_connected,
    number,
    record_key,
    resolve,
    source_of,
)
from ingest.normalizers.rows import Upserted, upsert_newest
from ingest.registry import NormalizeResult, ValueOutOfRange, register

# Every item path activity_values reads (a big delivery keeps only these, and so does `raw`).
ACTIVITY_READS = (
    *ITEM_READS,
    "active_durations_data.activity_seconds",
    "distance_data.summary.distance_meters",
    "distance_data.distance_meters",
    "calories_data.total_burned_calories",
    "heart_rate_data.summary.avg_hr_bpm",
)


def activity_values(item: dict) -> dict:
    start = instant(dig(item, "metadata", "start_time"))
    end = instant(dig(item, "metadata", "end_time"))
    duration = number(dig(item, "active_durations_data", "activity_seconds"))
    if duration is None and start is not None and end is not None:
        duration = (end - start).total_seconds()
    distance = number(dig(item, "distance_data", "summary", "distance_meters"))
    if distance is None:
        distance = number(dig(item, "distance_data", "distance_meters"))
    name = dig(item, "metadata", "name")
    return {
        "end_time": end,
        "name": name[:255] if isinstance(name, str) else None,
        "activity_type": integer(dig(item, "metadata", "type")),  # 0 is a real code
        "duration_seconds": duration,
        "calories": number(dig(item, "calories_data", "total_burned_calories")),
        "distance_meters": distance,
        "average_heart_rate": number(dig(item, "heart_rate_data", "summary", "avg_hr_bpm")),
        "raw": item,
    }


@register("activity", reads=ACTIVITY_READS)
def normalize_activity(raw_event: RawEvent) -> NormalizeResult:
    """One row per (user, source, metadata.summary_id) — by start time when the id is absent —
    written unless a newer delivery of the same activity already was (newest wins)."""
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
        values = activity_values(item)
        if not report.mapped({name: value for name, value in values.items() if name != "raw"}):
            continue
        try:
            outcome = upsert_newest(
                Activity,
                key={"user_id": user.pk, "source": source, "record_key": key},
                values={**values, "start_time": start, "ordered_at": raw_event.ordered_at},
            )
        except ValueOutOfRange as exc:
            report.refused(item, exc)
            continue
        report.written(
            outcome is Upserted.WRITTEN, stale=["activity"] if outcome is Upserted.STALE else ()
        )
    return report.result()
