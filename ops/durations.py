"""The one duration grammar of the project: the engine's `"30 seconds"`, the API's
`older_than=2h` and duration settings all parse here.

A duration is a non-negative decimal number and a unit, with optional spaces between:
`500ms`, `1 ms`, `1.5 minutes`, `2h`, `7 days`, `1w`. Units (long forms take an optional `s`):

    ms  millisecond     s  sec  second     m  min  minute     h  hr  hour     d  day     w  week

Short forms are lower case only (`M` could be a month); long forms ignore case. Months and
years have no fixed length, so they are refused rather than guessed; a bare number is refused
because its unit would be a guess too.
"""

import re
from datetime import timedelta

UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 7 * 86_400_000,
}
_LONG_FORMS = {
    "millisecond": "ms",
    "msec": "ms",
    "sec": "s",
    "second": "s",
    "min": "m",
    "minute": "m",
    "hr": "h",
    "hour": "h",
    "day": "d",
    "week": "w",
}
_AMBIGUOUS = {"month", "mo", "mon", "year", "yr", "y"}
# Ten thousand years: far beyond any timer, and well inside what datetime arithmetic survives.
MAX_MS = 10_000 * 365 * 86_400_000

_PATTERN = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*", re.ASCII)


class DurationError(ValueError):
    """The text is not a duration of this grammar; the message says why and shows an example."""


def _unit(text: str) -> str:
    if text in UNIT_MS:
        return text
    lowered = text.lower()
    known = _LONG_FORMS.keys() | _AMBIGUOUS
    singular = lowered[:-1] if lowered.endswith("s") and lowered[:-1] in known else lowered
    if singular in _LONG_FORMS and (len(text) > 2 or text.islower()):
        return _LONG_FORMS[singular]
    if singular in _AMBIGUOUS or text == "M":
        raise DurationError(f"{text!r} has no fixed length; use days or weeks")
    raise DurationError(f"unknown unit {text!r}; use ms, s, m, h, d or w (or their long forms)")


def parse_ms(text: str) -> int:
    """Whole milliseconds for a duration string; DurationError for anything else."""
    if not isinstance(text, str):
        raise DurationError(f"not a duration: {text!r}")
    match = _PATTERN.fullmatch(text)
    if match is None:
        raise DurationError(f'cannot parse duration {text!r}; use e.g. "500ms", "30 seconds", "2h"')
    ms = float(match.group(1)) * UNIT_MS[_unit(match.group(2))]
    if ms > MAX_MS:
        raise DurationError(f"duration {text!r} is longer than 10,000 years")
    if ms != int(ms):
        raise DurationError(f"duration {text!r} is not a whole number of milliseconds")
    return int(ms)


def parse_timedelta(text: str) -> timedelta:
    return timedelta(milliseconds=parse_ms(text))


def format_ms(ms: int) -> str:
    """The shortest exact spelling in the grammar: 90000 → "90s", 3600000 → "1h"."""
    for unit in ("w", "d", "h", "m", "s"):
        if ms and ms % UNIT_MS[unit] == 0:
            return f"{ms // UNIT_MS[unit]}{unit}"
    return f"{ms}ms"
