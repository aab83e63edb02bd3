"""Reading settings from the environment: typed helpers that refuse a malformed value loudly
(ImproperlyConfigured names the variable) instead of starting with a wrong one."""

import os
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured

from ops.durations import DurationError, parse_timedelta


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true"):
        return True
    if raw.lower() in ("0", "false"):
        return False
    raise ImproperlyConfigured(f"{name} must be one of 1/0/true/false, got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None


def env_float(name: str, default: float | None) -> float | None:
    """A number; empty turns it off (None)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw == "":
        return None
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None


def env_duration(name: str, default: str | None) -> timedelta | None:
    """A duration in the project's grammar ("90s", "2 hours", "7d"); unset gives `default`."""
    raw = os.environ.get(name) or default
    if raw is None:
        return None
    try:
        return parse_timedelta(raw)
    except DurationError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None


def env_retention(name: str) -> dict[str, timedelta] | None:
    """How long finished workflow instances are kept: "30 days" for every finished status, or
    "complete=30 days,errored=90 days,terminated=30 days"; unset keeps them forever."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    statuses = ("complete", "errored", "terminated")
    try:
        if "=" not in raw:
            return dict.fromkeys(statuses, parse_timedelta(raw))
        out = {}
        for item in raw.split(","):
            status, _, duration = item.partition("=")
            if status.strip() not in statuses:
                raise DurationError(f"{status.strip()!r} is not one of {', '.join(statuses)}")
            out[status.strip()] = parse_timedelta(duration)
        return out
    except DurationError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]
