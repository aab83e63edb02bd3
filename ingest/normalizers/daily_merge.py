"""Merging `daily_summary`, the one row per (user, source, date) that daily and sleep events both
feed, so that the row depends only on what arrived, never on the order it arrived in: newest
daily value per column, sleep columns from one chosen session, PRECEDENCE for the columns both
feed (docs/ingest.md › The daily merge)."""

from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.utils import timezone

from ingest.models import DailySummary, SleepSession
from ingest.normalizers.rows import values_fit
from ingest.store import rows as store

DAILY = "daily"
SLEEP = "sleep"

# Columns several event types feed → feeders in order of precedence (first non-null wins).
# Sleep's resting HR and HRV are measured at rest overnight; its sleep score scores that very
# session. Recovery is a whole-day score: the daily's wins.
PRECEDENCE: dict[str, tuple[str, ...]] = {
    "resting_heart_rate": (SLEEP, DAILY),
    "heart_rate_variability": (SLEEP, DAILY),
    "sleep_score": (SLEEP, DAILY),
    "recovery_score": (DAILY, SLEEP),
}
DAILY_ONLY = (
    "steps",
    "distance_meters",
    "total_burned_calories",
    "fatburn_active_zone_minutes",
    "cardio_active_zone_minutes",
    "peak_active_zone_minutes",
    "active_zone_minutes",
    "stress_management_score",
    "strain",
)
SLEEP_ONLY = (
    "sleep_minutes",
    "deep_sleep_minutes",
    "rem_sleep_minutes",
    "light_sleep_minutes",
    "awake_minutes",
    "deep_sleep_percent",
    "rem_sleep_percent",
    "light_sleep_percent",
    "awake_percent",
    "bed_time",
    "wake_up_time",
    "spo2",
    "respiratory_rate",
    "skin_temperature",
)
# What a sleep session contributes to the columns it shares with the daily.
SLEEP_SHARED = tuple(name for name, order in PRECEDENCE.items() if SLEEP in order)


@dataclass(frozen=True)
class Merged:
    written: bool  # the row changed
    stale: tuple[str, ...] = ()  # daily columns a newer delivery had already written


def _stamp(moment: datetime) -> str:
    """A fixed-width UTC text form of an ordering time, so stamps compare as strings."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _locked(user_id: int, source: str, day: date, *, create: bool) -> DailySummary | None:
    """The day's row, locked until the transaction ends (created empty if missing and
    `create`): a row this transaction inserted is invisible, hence as good as locked, until it
    commits; a concurrent insert of the same day waits for ours and then finds it."""
    found = store.daily_locked(user_id, source, day)
    if found is None and create:
        found = store.daily_insert_blank(user_id, source, day)
        if found is None:  # another transaction inserted it first: wait for it, lock it
            found = store.daily_locked(user_id, source, day)
    return found


def _shared(row: DailySummary, feeds: dict) -> dict:
    values = {}
    for name, order in PRECEDENCE.items():
        value = None
        for feeder in order:
            entry = feeds.get(feeder, {}).get(name)
            value = entry[0] if isinstance(entry, list) else entry
            if value is not None:
                break
        values[name] = value
    return values


def _save(row: DailySummary, values: dict, feeds: dict) -> bool:
    changes = {name: value for name, value in values.items() if getattr(row, name) != value}
    if feeds != row.feeds:
        changes["feeds"] = feeds
    if not changes:
        return False
    changes["updated_at"] = timezone.now()
    store.daily_update(row.pk, changes)
    return True


def daily_merge(
    *, user_id: int, source: str, day: date, values: dict, ordered_at: datetime
) -> Merged:
    """Merge one daily item's values (DAILY_ONLY and its PRECEDENCE columns) column by column:
    a value is taken unless a delivery with a later ordering time already wrote that column."""
    values_fit(DailySummary, values)
    row = _locked(user_id, source, day, create=True)
    feeds = {feeder: dict(entries) for feeder, entries in row.feeds.items()}
    daily = feeds.setdefault(DAILY, {})
    stamp = _stamp(ordered_at)
    stale = []
    for name, value in values.items():
        if value is None:
            continue  # a null never erases
        held = daily.get(name)
        if isinstance(held, list) and held[1] > stamp:
            if held[0] != value:
                stale.append(name)
            continue
        daily[name] = [value, stamp]
    newest = max((entry[1] for entry in daily.values()), default=None)
    merged = {name: (daily[name][0] if name in daily else None) for name in DAILY_ONLY}
    merged.update(_shared(row, feeds))
    merged["daily_ordered_at"] = (
        datetime.strptime(newest, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        if newest is not None
        else row.daily_ordered_at
    )
    return Merged(written=_save(row, merged, feeds), stale=tuple(stale))


def _percent(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return part / whole * 100


def _longest(session: SleepSession) -> tuple:
    in_bed = (session.end_time - session.start_time).total_seconds() if session.end_time else 0
    return (in_bed, session.sleep_minutes or 0.0, session.record_key)


def sleep_columns(session: SleepSession | None) -> dict:
    """The daily row's sleep columns from one session (all None without one)."""
    if session is None:
        return dict.fromkeys(SLEEP_ONLY)
    asleep, awake = session.sleep_minutes, session.awake_minutes
    in_bed = asleep + awake if asleep is not None and awake is not None else None
    return {
        "sleep_minutes": asleep,
        "deep_sleep_minutes": session.deep_sleep_minutes,
        "rem_sleep_minutes": session.rem_sleep_minutes,
        "light_sleep_minutes": session.light_sleep_minutes,
        "awake_minutes": awake,
        "deep_sleep_percent": _percent(session.deep_sleep_minutes, in_bed),
        "rem_sleep_percent": _percent(session.rem_sleep_minutes, in_bed),
        "light_sleep_percent": _percent(session.light_sleep_minutes, in_bed),
        "awake_percent": _percent(awake, in_bed),
        "bed_time": session.start_time,
        "wake_up_time": session.end_time,
        "spo2": session.spo2,
        "respiratory_rate": session.respiratory_rate,
        "skin_temperature": session.skin_temperature,
    }


def sleep_merge(*, user_id: int, source: str, day: date, create: bool = True) -> bool:
    """Recompute the sleep columns of (user, source, day) from the chosen session waking that
    day (none: the sleep columns are cleared, since no session counts any more). Returns
    whether the row changed."""
    row = _locked(user_id, source, day, create=create)
    if row is None:
        return False
    sessions = store.sleep_sessions_waking(user_id, source, day)
    chosen = max(sessions, key=_longest, default=None)
    feeds = {feeder: dict(entries) for feeder, entries in row.feeds.items()}
    feeds[SLEEP] = {name: getattr(chosen, name) for name in SLEEP_SHARED} if chosen else {}
    merged = sleep_columns(chosen)
    merged["sleep_record_key"] = chosen.record_key if chosen else ""
    merged.update(_shared(row, feeds))
    return _save(row, merged, feeds)
