"""Helpers the wearable normalizers share: safe digging into Terra payloads, the date rule, the
user lookup, and the source name."""

import re
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, date, datetime

from ingest.decisions import NO_CONNECTION
from ingest.models import RawEvent
from ingest.normalizers.users import user_for_event
from ingest.registry import NormalizeResult

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


def resolve(raw_event: RawEvent):
    """The event's user (set on the row too), or None when nobody is connected yet."""
    user = user_for_event(raw_event)
    if user is not None:
        raw_event.user = user
    return user


def not_connected() -> NormalizeResult:
    return NormalizeResult(ok=False, error=NO_CONNECTION)


def record_key(item: dict, start: datetime | None) -> str | None:
    """Terra's record identity for activity and sleep: metadata.summary_id, or the start time
    when the payload carries no id (None when it has neither)."""
    summary_id = dig(item, "metadata", "summary_id")
    if isinstance(summary_id, str) and summary_id.strip():
        return summary_id.strip()[:255]
    if start is None:
        return None
    return f"start:{start.astimezone(UTC).isoformat()}"


# Terra's current payload version; envelopes dated earlier are the legacy (2021-era) shapes.
CURRENT_VERSION = "2022-03-16"
# Top-level item keys of the legacy shapes, which had no `metadata` object.
_LEGACY_ITEM_KEYS = frozenset({"date", "summary_date", "start_time", "end_time", "timestamp"})
# What every data normalizer reads of an item (MappingReport.items, record_key): its metadata,
# and the legacy keys whose presence names a legacy shape. Each normalizer adds its own fields
# (register(…, reads=…)): a big delivery keeps only these paths (ingest.terra.projection).
ITEM_READS = ("metadata", *sorted(_LEGACY_ITEM_KEYS))


class MappingReport:
    """What a data normalizer made of one delivery: which items it could map,
    why the others were not, and which expected fields mapped items lacked.

    result() turns it into the outcome: a delivery with items that yields no row ends
    `skipped:unmappable:<reason>` (never `processed` with 0 rows); otherwise the counts go to
    the outcome trace."""

    def __init__(self, raw_event: RawEvent):
        self.raw_event = raw_event
        self.resumed_after = 0  # items an earlier attempt's pieces committed, skipped now
        self.payload = raw_event.payload if isinstance(raw_event.payload, dict) else {}
        self.reasons: Counter[str] = Counter()
        self.absent: Counter[str] = Counter()
        self.rows = 0
        self.changed = 0
        self.stale: Counter[str] = Counter()
        self.refusals: list[str] = []
        self.empty = False

    def items(self) -> Iterable[dict]:
        """The items worth mapping; the others are counted with their reason."""
        if "data" not in self.payload:
            self.reasons["missing_data"] += 1
            return []
        data = self.payload["data"]
        if not isinstance(data, list):
            self.reasons["data_not_a_list"] += 1
            return []
        self.empty = not data
        kept = []
        for item in data:
            if not isinstance(item, dict):
                self.reasons["item_not_an_object"] += 1
            elif not isinstance(item.get("metadata"), dict):
                legacy = _LEGACY_ITEM_KEYS.intersection(item)
                self.reasons["legacy_shape" if legacy else "missing_metadata"] += 1
            else:
                kept.append(item)
        # A big delivery: the consumer hands the items out in pieces that each commit.
        pieces = getattr(self.raw_event, "pieces", None)
        if pieces is not None:
            self.resumed_after = min(self.raw_event.progress, len(kept))
            return pieces(kept)
        return kept

    def unmapped(self, item: dict, reason: str) -> None:
        self.reasons[reason] += 1

    def mapped(self, values: dict) -> bool:
        """One item mapped: the columns it left empty are counted as absent fields. An item
        with no value at all is not mapped (`no_known_fields`): False, write nothing."""
        if all(value is None for value in values.values()):
            self.reasons["no_known_fields"] += 1
            return False
        self.rows += 1
        for name, value in values.items():
            if value is None:
                self.absent[name] += 1
        return True

    def refused(self, item: dict, exc: Exception) -> None:
        """An item mapped but refused by its columns (a value it can never hold, ValueOutOfRange):
        it is left out, counted with its reason, and the rest of the delivery is written."""
        self.rows -= 1
        self.reasons["value_out_of_range"] += 1
        if len(self.refusals) < 5:
            self.refusals.append(str(exc)[:200])

    def written(self, changed: bool, *, stale=()) -> None:
        self.changed += bool(changed)
        for name in stale:
            self.stale[name] += 1

    def _legacy_version(self) -> bool:
        version = self.payload.get("version")
        return isinstance(version, str) and version[:10] < CURRENT_VERSION

    def detail(self) -> dict:
        detail: dict = {"changed": self.changed}
        if self.reasons:
            detail["unmapped"] = dict(self.reasons)
        if self.absent:
            detail["absent_fields"] = dict(sorted(self.absent.items()))
        if self.refusals:
            detail["refused"] = self.refusals
        if self.resumed_after:
            detail["resumed_after"] = self.resumed_after
        if self.stale:
            # A newer delivery of the same record already wrote these: left as they were.
            detail["stale"] = dict(sorted(self.stale.items()))
        return detail

    def result(self) -> NormalizeResult:
        if self.rows == 0 and self.reasons:
            reason = "legacy_shape" if self._legacy_version() else self.reasons.most_common(1)[0][0]
            if reason == "value_out_of_range":  # name the value, as the row's error shows it
                reason = f"{reason}: {self.refusals[0]}"
            return NormalizeResult(
                ok=True, skipped=f"unmappable:{reason}", detail={"unmapped": dict(self.reasons)}
            )
        return NormalizeResult(ok=True, rows=self.rows, detail=self.detail())
