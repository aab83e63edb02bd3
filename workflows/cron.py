"""Cron arithmetic for workflow schedules: checking expressions and time zones, the fire times
around a moment, and the instance id of a fire time. Pure functions; no database.

Parsing and iteration come from cronsim (maintained by the healthchecks.io author, no
dependencies, handles DST gaps and repeats and iterates backwards, which "the most recent missed
fire time" needs). Expressions have the 5 standard fields: fire times are whole minutes, which
is also the resolution of the instance id.
"""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from workflows.errors import InvalidWorkflowDefinition

ID_PREFIX = "cron-"


def check_expression(expr) -> str:
    """The expression, or InvalidWorkflowDefinition saying what is wrong with it."""
    if not isinstance(expr, str) or len(expr.split()) != 5:
        raise InvalidWorkflowDefinition(
            f"schedule {expr!r} must be a cron expression with 5 fields, e.g. '*/15 * * * *'"
        )
    try:
        CronSim(expr, datetime(2026, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise InvalidWorkflowDefinition(f"schedule {expr!r}: {exc}") from None
    return expr


def check_timezone(name) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidWorkflowDefinition(f"unknown schedule_timezone {name!r}") from None


def next_after(expr: str, timezone: str, moment: datetime) -> datetime:
    """The first fire time strictly after `moment`, in UTC."""
    local = moment.astimezone(ZoneInfo(timezone))
    return next(CronSim(expr, local)).astimezone(UTC)


def latest_at_or_before(expr: str, timezone: str, moment: datetime) -> datetime:
    """The most recent fire time at or before `moment`, in UTC."""
    local = moment.astimezone(ZoneInfo(timezone))
    if not local.microsecond:
        # cronsim leaves the start out unless it carries microseconds (then it strips them).
        local += timedelta(microseconds=1)
    return next(CronSim(expr, local, reverse=True)).astimezone(UTC)


def instance_id(fire_time: datetime) -> str:
    """cron-YYYYMMDDTHHMMZ (instance ids allow no ':')."""
    return ID_PREFIX + fire_time.astimezone(UTC).strftime("%Y%m%dT%H%MZ")
