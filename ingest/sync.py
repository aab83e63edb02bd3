"""The sync read: every row of one user changed since a point in time, across every registered
user table, keyset-paginated on (table, updated_at, id) with an opaque cursor.

Tables are walked in key order (not registration order) so a cursor minted by one process means
the same position in another, whatever order the apps registered their tables in.
"""

import base64
import binascii
import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from ingest.errors import InvalidCursor, InvalidLimit, InvalidSince
from ingest.registry import UserTable, user_tables
from ingest.store import rows as store

DEFAULT_LIMIT = 1000
MAX_LIMIT = 2000
# Rows are stamped with the writer's clock before its transaction commits, so a row can become
# visible a moment after a later `server_time` was handed out. Handing out a server_time this
# far in the past makes the next pull overlap instead of missing it (clients upsert: harmless).
SERVER_TIME_OVERLAP = timedelta(seconds=5)
_SPACED_OFFSET = re.compile(r"([T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?) (\d{2}(?::?\d{2})?)$")
# Bulky or private columns the client has no use for (the raw Terra payload stays server-side).
EXCLUDED_FIELDS = {"user", "raw", "payload", "terra_response", "feeds"}


@dataclass(frozen=True)
class Position:
    table: str
    updated_at: datetime | None  # None: the table's start
    pk: str | None


def sync_tables() -> list[UserTable]:
    return sorted((t for t in user_tables() if t.sync), key=lambda t: t.key)


def sync_fields(model) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if f.name not in EXCLUDED_FIELDS]


def _json_keys_are_attnames(model) -> bool:
    # row_to_json names keys after columns; a db_column would rename a key on PostgreSQL only.
    return all(
        f.attname == f.column for f in model._meta.concrete_fields if f.name not in EXCLUDED_FIELDS
    )


def parse_since(raw: str | None) -> datetime | None:
    """ISO 8601 datetime (naive means UTC) or a bare date (its midnight UTC); '' means all."""
    if raw is None or raw.strip() == "":
        return None
    # An unescaped '+' of an offset arrives from a query string as ' '.
    raw = _SPACED_OFFSET.sub(r"\1+\2", raw.strip())
    try:
        parsed = parse_datetime(raw)
        if parsed is None and (day := parse_date(raw)) is not None:
            parsed = datetime.combine(day, time.min)
    except ValueError:
        parsed = None
    if parsed is None:
        raise InvalidSince("since must be an ISO 8601 date or datetime.")
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)


def cursor_encode(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode()


def cursor_decode(raw: str) -> dict:
    try:
        data = json.loads(base64.urlsafe_b64decode(raw.encode() + b"=" * (-len(raw) % 4)))
    except (binascii.Error, ValueError, UnicodeError):
        data = None
    if not isinstance(data, dict):
        raise InvalidCursor("The cursor is not valid.")
    return data


def _decode_sync_cursor(raw: str) -> tuple[Position, datetime | None, datetime]:
    data = cursor_decode(raw)
    try:
        keys = {t.key for t in sync_tables()}
        if data["t"] not in keys:
            raise ValueError("unknown table")
        position = Position(
            table=data["t"],
            updated_at=datetime.fromisoformat(data["u"]) if data.get("u") else None,
            pk=data.get("i"),
        )
        since = datetime.fromisoformat(data["s"]) if data.get("s") else None
        server_time = datetime.fromisoformat(data["st"])
    except (KeyError, TypeError, ValueError):
        raise InvalidCursor("The cursor is not valid.") from None
    return position, since, server_time


def parse_limit(raw: str | None) -> int:
    if raw in (None, ""):
        return DEFAULT_LIMIT
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise InvalidLimit(f"limit must be an integer from 1 to {MAX_LIMIT}.")
    return int(raw)


@dataclass(frozen=True)
class Row:
    """One row as JSON text. Its keyset position is read back from the text only for the last
    row of a page: loading every row's timestamp in Python costs more than the query."""

    json: str
    pk_name: str

    def position(self) -> tuple[datetime, str]:
        data = json.loads(self.json)
        return datetime.fromisoformat(data["updated_at"]), str(data[self.pk_name])


def _json_default(value):
    # isoformat() keeps microseconds and "+00:00", which is exactly what PostgreSQL's
    # row_to_json writes, so both databases serve the same strings.
    if isinstance(value, datetime) and value.microsecond:
        # PostgreSQL also drops trailing zeros of the fraction: .382650 → .38265
        head, _, rest = value.isoformat().partition(".")
        return f"{head}.{rest[:6].rstrip('0')}{rest[6:]}"
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return str(value)  # UUID


def _table_rows(table: UserTable, *, user, since, after: Position | None, n: int) -> list[Row]:
    model = table.model
    qs = model.objects.filter(user=user)
    if since is not None:
        qs = qs.filter(updated_at__gte=since)
    if after is not None and after.updated_at is not None:
        pk = model._meta.pk.to_python(after.pk)
        qs = qs.filter(
            Q(updated_at__gt=after.updated_at) | Q(updated_at=after.updated_at, pk__gt=pk)
        )
    qs = qs.order_by("updated_at", "pk").values(*sync_fields(model))[:n]
    pk_column = model._meta.pk.column
    if _json_keys_are_attnames(model):
        texts = store.rows_as_json(qs, pk_column)
        if texts is not None:
            return [Row(text, pk_column) for text in texts]
    return [
        Row(json.dumps(row, default=_json_default, separators=(",", ":")), pk_column) for row in qs
    ]


@dataclass
class SyncPage:
    since: datetime | None
    server_time: datetime
    count: int
    next: str | None
    tables: dict[str, list[Row]]

    def render(self) -> bytes:
        """The response body, assembled from the rows' JSON text (never parsed again)."""
        head = json.dumps(
            {
                "since": self.since.isoformat() if self.since else None,
                "server_time": self.server_time.isoformat(),
                "count": self.count,
                "next": self.next,
            },
            separators=(",", ":"),
        )
        tables = ",".join(
            f"{json.dumps(key)}:[{','.join(row.json for row in rows)}]"
            for key, rows in self.tables.items()
        )
        return f'{head[:-1]},"tables":{{{tables}}}}}'.encode()


def sync_page(*, user, since: str | None, cursor: str | None, limit: int) -> SyncPage:
    """One page of a pull: the rows per table, `count`, the `next` cursor and `server_time`.

    Without a cursor the pull starts at the first table; `server_time` is fixed at that moment
    and carried in the cursor, so every page of one pull returns the same value to save."""
    if cursor:
        position, since_dt, server_time = _decode_sync_cursor(cursor)
    else:
        since_dt = parse_since(since)
        server_time = timezone.now() - SERVER_TIME_OVERLAP
        position = None
    tables = sync_tables()
    start = next((i for i, t in enumerate(tables) if position and t.key == position.table), 0)
    out: dict[str, list[Row]] = {}
    remaining, count, next_position = limit, 0, None
    for table in tables[start:]:
        after = position if position is not None and table.key == position.table else None
        if remaining == 0:
            # The page is full exactly at a table boundary: point at the next table with rows,
            # so the last page is never an empty one.
            if _table_rows(table, user=user, since=since_dt, after=None, n=1):
                next_position = Position(table.key, None, None)
                break
            continue
        rows = _table_rows(table, user=user, since=since_dt, after=after, n=remaining + 1)
        page = rows[:remaining]
        if page:
            out[table.key] = page
            count += len(page)
            remaining -= len(page)
        if len(rows) > len(page):
            next_position = Position(table.key, *page[-1].position())
            break
    next_cursor = None
    if next_position is not None:
        next_cursor = cursor_encode(
            {
                "t": next_position.table,
                "u": next_position.updated_at.isoformat() if next_position.updated_at else None,
                "i": next_position.pk,
                "s": since_dt.isoformat() if since_dt else None,
                "st": server_time.isoformat(),
            }
        )
    return SyncPage(since_dt, server_time, count, next_cursor, out)
