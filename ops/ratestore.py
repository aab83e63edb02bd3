"""Every SQL statement of the rate counters (ops.throttling) and the outbound pacer (ops.pacing):
one atomic upsert per hit or per attempt, on PostgreSQL and SQLite alike, timed by the database's
clock so every process and host agrees on when a window ends or a slot comes."""

import hashlib

from django.db import connection, transaction

# Epoch seconds of the database's clock, stable within one statement: PostgreSQL's
# statement_timestamp() (now() would be the start of an enclosing transaction); SQLite's 'now',
# which is the same for every use within one sqlite3_step().
_NOW = {
    "postgresql": "extract(epoch from statement_timestamp())::float8",
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}
_GREATEST = {"postgresql": "greatest", "sqlite": "max"}

# Count one hit of `name` in its window: a window that ended restarts at 1 and ends `period`
# seconds from now. Returns (hits so far, seconds until the window ends).
RATE_HIT = """
INSERT INTO rate_counters (name, hits, window_end) VALUES (%s, 1, {now} + %s)
ON CONFLICT (name) DO UPDATE SET
  hits = CASE WHEN rate_counters.window_end <= {now} THEN 1 ELSE rate_counters.hits + 1 END,
  window_end = CASE WHEN rate_counters.window_end <= {now}
                    THEN excluded.window_end ELSE rate_counters.window_end END
RETURNING hits, window_end - {now}
"""

# Windows that have ended: a later hit would restart them anyway.
RATE_PURGE = "DELETE FROM rate_counters WHERE window_end < {now}"

# Take the next free slot of `key` (slots are `interval` seconds apart) unless it is more than
# `max_wait` seconds away. Returns the seconds to wait for the slot taken; no row when refused.
PACE_TAKE = """
INSERT INTO outbound_pacers (name, next_at) VALUES (%(name)s, {now} + %(interval)s)
ON CONFLICT (name) DO UPDATE SET
  next_at = {greatest}(outbound_pacers.next_at, {now}) + %(interval)s
WHERE outbound_pacers.next_at - {now} <= %(max_wait)s
RETURNING next_at - %(interval)s - {now}
"""

# When refused: seconds until the next free slot.
PACE_NEXT = "SELECT next_at - {now} FROM outbound_pacers WHERE name = %(name)s"

NAME_MAX = 200  # the models' key columns


def _sql(template: str) -> str:
    vendor = connection.vendor
    return template.format(now=_NOW[vendor], greatest=_GREATEST[vendor])


def _key(name: str) -> str:
    """Names are ours, but may carry an IPv6 address or a long host: keep them within the column."""
    if len(name) <= NAME_MAX:
        return name
    return name[: NAME_MAX - 65] + "#" + hashlib.sha256(name.encode()).hexdigest()


def _execute(sql: str, params: list | dict) -> tuple | None:
    # Inside a caller's transaction a failed statement must not poison it: a savepoint there;
    # outside one, autocommit makes the statement its own transaction.
    if connection.in_atomic_block:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone() if cursor.description else None
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() if cursor.description else None


def rate_hit(*, name: str, period: float) -> tuple[int, float]:
    """(hits in the current window including this one, seconds until the window ends)."""
    hits, remaining = _execute(_sql(RATE_HIT), [_key(name), float(period)])
    return int(hits), float(remaining)


def rate_purge() -> None:
    _execute(_sql(RATE_PURGE), [])


def pace_take(*, key: str, interval: float, max_wait: float) -> tuple[bool, float]:
    """(True, seconds to wait for the slot taken) or (False, seconds until the next free slot)."""
    params = {"name": _key(key), "interval": float(interval), "max_wait": float(max_wait)}
    row = _execute(_sql(PACE_TAKE), params)
    if row is not None:
        return True, max(float(row[0]), 0.0)
    row = _execute(_sql(PACE_NEXT), {"name": params["name"]})
    return False, max(float(row[0]), 0.0) if row else 0.0
