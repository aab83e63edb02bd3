"""Helpers the wearable normalizers share: safe digging into Terra payloads, the date rule, the
user lookup, and the source name."""

import re
from datetime import UTC, date, datetime

from ingest.models import RawEvent
from ingest.registry import NormalizeResult
from ingest.users import user_for_event

NO_CONNECTION = "no_connection_for_terra_user"
_WRITTEN_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", re.ASCII)


def dig(obj, *path):
    """obj[path[0]][path[1]]… or None as soon as a level is missing or not a dict."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def number(value) -> float | None:
    """A JSON number as float; bools, strings and missing values are None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def integer(value) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def minutes(seconds) -> float | None:
    value = number(seconds)
    return None if value is None else value / 60


def written_date(timestamp) -> date | None:
    """The calendar date written in a Terra timestamp: "2026-07-01T00:00:00+01:00" is 2026-07-01
    whatever its UTC date is (a day is the user's local day, as the device wrote it)."""
    if not isinstance(timestamp, str):
        return None
    match = _WRITTEN_DATE.match(timestamp)
    if match is None:
        return None
    try:
        return date(*(int(part) for part in match.groups()))
    except ValueError:
        return None


def instant(timestamp) -> datetime | None:
    """A Terra timestamp as an aware datetime (naive ones are taken as UTC)."""
    if not isinstance(timestamp, str):
        return None
    try:
        value = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def source_of(raw_event: RawEvent) -> str:
    """`source` = provider lower-cased (garmin, whoop, oura …)."""
    provider = raw_event.provider or dig(raw_event.payload, "user", "provider") or "unknown"
    return str(provider).lower()


def data_items(raw_event: RawEvent) -> list[dict]:
    data = raw_event.payload.get("data") if isinstance(raw_event.payload, dict) else None
    return [item for item in data if isinstance(item, dict)] if isinstance(data, list) else []


def resolve(raw_event: RawEvent):
    """The event's user (set on the row too), or None when nobody is connected yet."""
    user = user_for_event(raw_event)
    if user is not None:
        raw_event.user = user
    return user


def not_connected() -> NormalizeResult:
    return NormalizeResult(ok=False, error=NO_CONNECTION)
