"""Durations as the authoring API accepts them: int milliseconds, timedelta, or "30 seconds"."""

import math
import re
from datetime import timedelta

from workflows.errors import InvalidDuration

_UNITS_MS = {
    "millisecond": 1,
    "ms": 1,
    "second": 1000,
    "sec": 1000,
    "s": 1000,
    "minute": 60_000,
    "min": 60_000,
    "m": 60_000,
    "hour": 3_600_000,
    "h": 3_600_000,
    "day": 86_400_000,
    "d": 86_400_000,
    "week": 7 * 86_400_000,
    # Cloudflare accepts months and years; fixed lengths keep them deterministic.
    "month": 30 * 86_400_000,
    "year": 365 * 86_400_000,
}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+?)s?\s*$")


def to_ms(value) -> int:
    """Milliseconds for a duration; raises InvalidDuration for anything else or negatives."""
    if isinstance(value, bool):
        raise InvalidDuration(f"not a duration: {value!r}")
    if isinstance(value, timedelta):
        ms = value.total_seconds() * 1000
    elif isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidDuration(f"duration must be finite, got {value!r}")
        ms = value
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        unit = match and (match.group(2).lower())
        if not match or unit not in _UNITS_MS:
            raise InvalidDuration(f'cannot parse duration {value!r}; use e.g. "30 seconds"')
        ms = float(match.group(1)) * _UNITS_MS[unit]
    else:
        raise InvalidDuration(f"not a duration: {value!r}")
    if ms < 0:
        raise InvalidDuration(f"duration must not be negative, got {value!r}")
    return int(round(ms))


def to_timedelta(value) -> timedelta:
    return timedelta(milliseconds=to_ms(value))
