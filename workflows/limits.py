"""The documented limits (ids, names, sizes, durations), read from settings at call time and
checked where the author calls the engine, as clear errors naming the limit and its value.

Every limit is a WORKFLOWS_* setting (config/settings.py, docs/workflows/engine.md#limits); the
constants below are their defaults. Limits on text that lands in a column (ids, event types,
step names, log categories and messages) default to the column's width: a larger setting lets
the database refuse the value instead (PostgreSQL), which fails the instance with that error.
"""

import json

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from ops import strict_json
from workflows import durations
from workflows.authoring import NAME_PATTERN
from workflows.errors import (
    InvalidDuration,
    InvalidEventType,
    InvalidInstanceId,
    InvalidPayload,
    InvalidPriority,
    InvalidStep,
)

DAY_MS = 86_400_000

ID_MAX = 100  # WORKFLOWS_INSTANCE_ID_MAX
EVENT_TYPE_MAX = 100  # WORKFLOWS_EVENT_TYPE_MAX
STEP_NAME_MAX = 256  # WORKFLOWS_STEP_NAME_MAX
LOG_CATEGORY_MAX = 64  # WORKFLOWS_LOG_CATEGORY_MAX
LOG_MESSAGE_MAX = 2048  # WORKFLOWS_LOG_MESSAGE_MAX
JSON_MAX_BYTES = 1024 * 1024  # WORKFLOWS_JSON_MAX_BYTES
STEPS_PER_RUN_MAX = 1024  # WORKFLOWS_STEPS_PER_RUN_MAX; sleeps are not counted
SLEEP_MAX_MS = 365 * DAY_MS  # WORKFLOWS_SLEEP_MAX
STEP_TIMEOUT_MAX_MS = 365 * DAY_MS  # WORKFLOWS_STEP_TIMEOUT_MAX
RETRY_DELAY_MAX_MS = 365 * DAY_MS  # WORKFLOWS_RETRY_DELAY_MAX
WAIT_TIMEOUT_MIN_MS = 1000  # WORKFLOWS_WAIT_TIMEOUT_MIN
WAIT_TIMEOUT_MAX_MS = 365 * DAY_MS  # WORKFLOWS_WAIT_TIMEOUT_MAX

# setting -> default (a count, or milliseconds for the durations)
DEFAULTS = {
    "WORKFLOWS_INSTANCE_ID_MAX": ID_MAX,
    "WORKFLOWS_EVENT_TYPE_MAX": EVENT_TYPE_MAX,
    "WORKFLOWS_STEP_NAME_MAX": STEP_NAME_MAX,
    "WORKFLOWS_LOG_CATEGORY_MAX": LOG_CATEGORY_MAX,
    "WORKFLOWS_LOG_MESSAGE_MAX": LOG_MESSAGE_MAX,
    "WORKFLOWS_JSON_MAX_BYTES": JSON_MAX_BYTES,
    "WORKFLOWS_STEPS_PER_RUN_MAX": STEPS_PER_RUN_MAX,
    "WORKFLOWS_SLEEP_MAX": SLEEP_MAX_MS,
    "WORKFLOWS_STEP_TIMEOUT_MAX": STEP_TIMEOUT_MAX_MS,
    "WORKFLOWS_RETRY_DELAY_MAX": RETRY_DELAY_MAX_MS,
    "WORKFLOWS_WAIT_TIMEOUT_MIN": WAIT_TIMEOUT_MIN_MS,
    "WORKFLOWS_WAIT_TIMEOUT_MAX": WAIT_TIMEOUT_MAX_MS,
}


def value(name: str) -> int:
    """The limit `name` as configured now: a positive count, or milliseconds for a duration
    (settings hold durations as timedelta or anything workflows.durations accepts)."""
    raw = getattr(settings, name, DEFAULTS[name])
    if isinstance(raw, int) and not isinstance(raw, bool):
        number = raw
    else:
        try:
            number = durations.to_ms(raw)
        except InvalidDuration:
            raise ImproperlyConfigured(
                f"{name} must be a count or a duration, got {raw!r}"
            ) from None
    if number <= 0:
        raise ImproperlyConfigured(f"{name} must be positive, got {raw!r}")
    return number


def steps_per_run_max() -> int:
    return value("WORKFLOWS_STEPS_PER_RUN_MAX")


def shown(ms: int) -> str:
    """A duration limit as people write it: "365 days", "1 second", "1500 ms"."""
    units = (("day", DAY_MS), ("hour", 3_600_000), ("minute", 60_000), ("second", 1000))
    for unit, size in units:
        if ms % size == 0:
            count = ms // size
            return f"{count} {unit}" + ("" if count == 1 else "s")
    return f"{ms} ms"


def _limit(name: str) -> str:
    """How an error names a count limit: "100 (WORKFLOWS_INSTANCE_ID_MAX)"."""
    return f"{value(name)} ({name})"


def _text(what: str, raw, setting: str, error=InvalidStep) -> str:
    """A non-empty string without NUL (no text column can store one) within the limit."""
    if not isinstance(raw, str) or not raw:
        raise error(f"{what} must be a non-empty string, got {raw!r}")
    if "\x00" in raw:
        raise error(f"{what} must not contain NUL characters")
    if len(raw) > value(setting):
        raise error(f"{what} is {len(raw)} characters, over the limit of {_limit(setting)}")
    return raw


def check_instance_id(raw) -> str:
    setting = "WORKFLOWS_INSTANCE_ID_MAX"
    if not isinstance(raw, str) or len(raw) > value(setting) or not NAME_PATTERN.match(raw):
        raise InvalidInstanceId(
            f"instance id must match {NAME_PATTERN.pattern} and be at most {_limit(setting)} "
            f"characters, got {raw!r}"
        )
    return raw


def check_event_type(raw) -> str:
    setting = "WORKFLOWS_EVENT_TYPE_MAX"
    if not isinstance(raw, str) or len(raw) > value(setting) or not NAME_PATTERN.match(raw):
        raise InvalidEventType(
            f"event type must match {NAME_PATTERN.pattern} and be at most {_limit(setting)} "
            f"characters, got {raw!r}"
        )
    return raw


def check_step_name(raw) -> str:
    return _text("step name", raw, "WORKFLOWS_STEP_NAME_MAX")


def check_log_message(raw) -> str:
    if not isinstance(raw, str):
        raise InvalidStep(f"log message must be a string, got {type(raw).__name__}")
    if "\x00" in raw:
        raise InvalidStep("log message must not contain NUL characters")
    setting = "WORKFLOWS_LOG_MESSAGE_MAX"
    if len(raw) > value(setting):
        raise InvalidStep(
            f"log message is {len(raw)} characters, over the limit of {_limit(setting)}"
        )
    return raw


def check_log_category(raw) -> str:
    if raw == "system":
        raise InvalidStep('log category "system" is reserved for the engine')
    return _text("log category", raw, "WORKFLOWS_LOG_CATEGORY_MAX")


def check_json(raw, *, what: str):
    """Return `raw` when it is JSON under ops/strict_json.py's rules and within
    WORKFLOWS_JSON_MAX_BYTES encoded, else InvalidPayload (the HTTP API's rules for bodies)."""
    if raw is None or type(raw) is bool or (type(raw) is int and abs(raw) <= 2**53):
        return raw  # always JSON, a few bytes: most step results (the runner's hot path)
    try:
        strict_json.check_value(raw)
    except strict_json.InvalidJson as exc:
        raise InvalidPayload(f"{what} is not valid JSON ({exc.reason}): {exc.message}") from None
    try:
        encoded = json.dumps(raw, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"{what} is not JSON-serializable: {exc}") from None
    size, most = len(encoded.encode()), value("WORKFLOWS_JSON_MAX_BYTES")
    if size > most:
        limit = f"{most // 2**20} MiB" if most % 2**20 == 0 else f"{most} bytes"
        raise InvalidPayload(
            f"{what} is {size} bytes of JSON, over the limit of {limit} (WORKFLOWS_JSON_MAX_BYTES)"
        )
    return raw


def _duration(what: str, raw, *, high: str, low: str | None = None, floor_ms: int = 0) -> int:
    ms = durations.to_ms(raw)
    top = value(high)
    bottom = value(low) if low else floor_ms
    if not bottom <= ms <= top:
        names = f"{low} … {high}" if low else high
        raise InvalidStep(
            f"{what} must be {shown(bottom) if bottom else '> 0'} … {shown(top)} ({names}), "
            f"got {raw!r}"
        )
    return ms


def check_sleep_ms(ms: int, *, what: str) -> int:
    """A sleep's length in ms (step.sleep, or step.sleep_until's distance from now)."""
    top = value("WORKFLOWS_SLEEP_MAX")
    if ms > top:
        raise InvalidStep(f"{what} is over the limit of {shown(top)} (WORKFLOWS_SLEEP_MAX)")
    return ms


def sleep_ms(raw) -> int:
    return check_sleep_ms(durations.to_ms(raw), what=f"sleep {raw!r}")


def step_timeout_ms(raw) -> int:
    return _duration("step timeout", raw, high="WORKFLOWS_STEP_TIMEOUT_MAX", floor_ms=1)


def wait_timeout_ms(raw) -> int:
    return _duration(
        "wait_for_event timeout",
        raw,
        high="WORKFLOWS_WAIT_TIMEOUT_MAX",
        low="WORKFLOWS_WAIT_TIMEOUT_MIN",
    )


def retry_delay_ms(raw, *, option: str) -> int:
    return _duration(f"retries.{option}", raw, high="WORKFLOWS_RETRY_DELAY_MAX")


def retry_delay_cap_ms() -> int:
    """Backoff grows up to here (exponential with an infinite limit would overflow dates)."""
    return value("WORKFLOWS_RETRY_DELAY_MAX")


def check_priority(raw) -> int:
    """0-9 (higher runs first among new runs); anything else is InvalidPriority."""
    from workflows.models import PRIORITY_MAX, PRIORITY_MIN

    if (
        isinstance(raw, bool)
        or not isinstance(raw, int)
        or not (PRIORITY_MIN <= raw <= PRIORITY_MAX)
    ):
        raise InvalidPriority(
            f"priority must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}, got {raw!r}"
        )
    return raw
