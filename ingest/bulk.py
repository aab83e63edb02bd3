"""Replaying raw events chosen by a filter, as a tracked job (ops.bulk): the filter's vocabulary
and the rows it matches. The action, with its one audit row, is
ingest.actions.do_raw_events_bulk_replay.

A filter is the operator API's raw-event filter (`state`, `type`, `provider`, `error`,
`terra_user_id`) plus `since`/`until` (ISO, on received_at) and `newer_than` ("2h"), which is
turned into an absolute `since` when the job is asked for: the stored filter means the same
rows however long the job takes.
"""

from datetime import UTC

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ingest.errors import InvalidFilter
from ingest.models import RawEvent, RawEventState
from ingest.selectors import parse_age, raw_events

KIND = "raw_events.replay"
FILTER_KEYS = (
    "state",
    "type",
    "provider",
    "error",
    "terra_user_id",
    "since",
    "until",
    "newer_than",
)


def _moment(raw, key: str) -> str:
    value = parse_datetime(str(raw)) if raw else None
    if value is None:
        raise InvalidFilter(f"{key} must be an ISO date-time, got {raw!r}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()


def bulk_filters_clean(raw: dict) -> dict:
    """The filter validated and made absolute (InvalidFilter: 400 invalid_filter). An empty
    filter is refused: "replay everything ever received" is never what an operator meant."""
    if not isinstance(raw, dict):
        raise InvalidFilter("filter must be an object")
    unknown = set(raw) - set(FILTER_KEYS)
    if unknown:
        raise InvalidFilter(f"unknown filter key(s): {sorted(unknown)}")
    clean = {}
    states = raw.get("state") or []
    states = [states] if isinstance(states, str) else [str(s) for s in states]
    if any(s not in RawEventState.values for s in states):
        raise InvalidFilter(f"state must be among {RawEventState.values}, got {states}")
    if states:
        clean["state"] = states
    for key in ("type", "provider", "error", "terra_user_id"):
        if raw.get(key):
            clean[key] = str(raw[key])
    if raw.get("newer_than"):
        try:
            clean["since"] = (timezone.now() - parse_age(str(raw["newer_than"]))).isoformat()
        except ValueError as exc:
            raise InvalidFilter(f"newer_than: {exc}") from None
    for key in ("since", "until"):
        if raw.get(key):
            clean[key] = _moment(raw[key], key)
    if not clean:
        raise InvalidFilter("say which raw events: a state, a type, a time range …")
    return clean


def raw_events_matching(filters: dict) -> QuerySet[RawEvent]:
    """Raw events a cleaned filter matches (the operator API's FilterSet, plus the window)."""
    fields = {k: v for k, v in filters.items() if k not in ("since", "until")}
    rows = raw_events(filters=fields)
    if "since" in filters:
        rows = rows.filter(received_at__gte=parse_datetime(filters["since"]))
    if "until" in filters:
        rows = rows.filter(received_at__lt=parse_datetime(filters["until"]))
    return rows
