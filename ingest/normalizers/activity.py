"""`activity` deliveries → activities, one row per (user, source, start time)."""

from ingest.models import Activity, RawEvent
from ingest.normalizers.common import (
    data_items,
    dig,
    instant,
    integer,
    not_connected,
    number,
    resolve,
    source_of,
)
from ingest.registry import NormalizeResult, register
from ingest.upsert import upsert_keep_non_null


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


@register("activity")
def normalize_activity(raw_event: RawEvent) -> NormalizeResult:
    user = resolve(raw_event)
    if user is None:
        return not_connected()
    source = source_of(raw_event)
    rows = 0
    for item in data_items(raw_event):
        start = instant(dig(item, "metadata", "start_time"))
        if start is None:
            continue
        upsert_keep_non_null(
            Activity,
            key={"user_id": user.pk, "source": source, "start_time": start},
            values=activity_values(item),
        )
        rows += 1
    return NormalizeResult(ok=True, rows=rows)
