"""Durations as the authoring API accepts them: int milliseconds, timedelta, or a string in the
project's one grammar (ops/durations.py: "500ms", "30 seconds", "2h", "7 days")."""

import math
from datetime import timedelta

from ops.durations import MAX_MS, DurationError, parse_ms
from workflows.errors import InvalidDuration


def to_ms(value) -> int:
    """Milliseconds for a duration; raises InvalidDuration for anything else or negatives."""
    if isinstance(value, bool):
        raise InvalidDuration(f"not a duration: {value!r}")
    if isinstance(value, str):
        try:
            return parse_ms(value)
        except DurationError as exc:
            raise InvalidDuration(str(exc)) from None
    if isinstance(value, timedelta):
        ms = value.total_seconds() * 1000
    elif isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidDuration(f"duration must be finite, got {value!r}")
        ms = value
    else:
        raise InvalidDuration(f"not a duration: {value!r}")
    if ms < 0:
        raise InvalidDuration(f"duration must not be negative, got {value!r}")
    if ms > MAX_MS:
        raise InvalidDuration(f"duration {value!r} is longer than 10,000 years")
    return int(round(ms))


def to_timedelta(value) -> timedelta:
    return timedelta(milliseconds=to_ms(value))
