"""Input limits (ids, names, sizes) checked before anything is stored, as clear errors."""

import json

from ops import strict_json
from workflows.authoring import NAME_PATTERN
from workflows.errors import (
    InvalidEventType,
    InvalidInstanceId,
    InvalidPayload,
    InvalidPriority,
    InvalidStep,
)

ID_MAX = 100
EVENT_TYPE_MAX = 100
STEP_NAME_MAX = 256
JSON_MAX_BYTES = 1024 * 1024
LOG_MESSAGE_MAX = 2048
STEPS_PER_RUN_MAX = 1024  # sleeps are not counted


def check_instance_id(value) -> str:
    if not isinstance(value, str) or len(value) > ID_MAX or not NAME_PATTERN.match(value):
        raise InvalidInstanceId(
            f"instance id must match {NAME_PATTERN.pattern} and be ≤ {ID_MAX} chars, got {value!r}"
        )
    return value


def check_event_type(value) -> str:
    if not isinstance(value, str) or len(value) > EVENT_TYPE_MAX or not NAME_PATTERN.match(value):
        raise InvalidEventType(
            f"event type must match {NAME_PATTERN.pattern} and be ≤ {EVENT_TYPE_MAX} chars, "
            f"got {value!r}"
        )
    return value


def check_step_name(value) -> str:
    if not isinstance(value, str) or not value or len(value) > STEP_NAME_MAX:
        raise InvalidStep(f"step name must be a non-empty string ≤ {STEP_NAME_MAX} chars")
    return value


def check_json(value, *, what: str):
    """Return `value` when it is JSON under ops/strict_json.py's rules and ≤ 1 MiB encoded,
    else InvalidPayload (the same rules the HTTP API applies to request bodies)."""
    if value is None or type(value) is bool or (type(value) is int and abs(value) <= 2**53):
        return value  # always JSON, a few bytes: most step results (the runner's hot path)
    try:
        strict_json.check_value(value)
    except strict_json.InvalidJson as exc:
        raise InvalidPayload(f"{what} is not valid JSON ({exc.reason}): {exc.message}") from None
    try:
        encoded = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"{what} is not JSON-serializable: {exc}") from None
    if len(encoded.encode()) > JSON_MAX_BYTES:
        raise InvalidPayload(f"{what} exceeds 1 MiB of JSON")
    return value


def check_log_message(value) -> str:
    if not isinstance(value, str):
        raise InvalidStep("log message must be a string")
    if len(value) > LOG_MESSAGE_MAX:
        raise InvalidStep(f"log message exceeds {LOG_MESSAGE_MAX} chars")
    return value


def check_priority(value) -> int:
    """0-9 (higher runs first among new runs); anything else is InvalidPriority."""
    from workflows.models import PRIORITY_MAX, PRIORITY_MIN

    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not (PRIORITY_MIN <= value <= PRIORITY_MAX)
    ):
        raise InvalidPriority(
            f"priority must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}, got {value!r}"
        )
    return value
