"""Every SQL statement of collapsed audit rows (ops.access): reads of a user's health data by one
operator count up on one audit row per window, in one atomic upsert per batch of reads, timed by
the database's clock like the rate counters (ops.ratestore)."""

import json

from django.db import connection, transaction
from django.utils import timezone

from ops.ratestore import _NOW

_JSON = {"postgresql": "CAST(%s AS jsonb)", "sqlite": "%s"}

# Rows whose window has ended stop collecting repeats: their key is released, so the next read
# opens a row of its own.
READS_CLOSE = (
    "UPDATE audit_logs SET open_key = NULL WHERE open_key IN ({keys}) AND window_end <= {now}"
)

# One read per key: a new row whose window ends `window` seconds from now, or one more on the
# row that still collects this key's repeats. The unique open_key makes concurrent first reads
# one row (the second INSERT waits for the first and then counts on it).
READS_COUNT = """
INSERT INTO audit_logs (actor, action, resource, result, ip, user_agent, request_id,
  idempotency_key, deduplicated, metadata, created_at, subject_id, count, last_at, open_key,
  window_end)
VALUES {values}
ON CONFLICT (open_key) DO UPDATE SET count = audit_logs.count + 1, last_at = excluded.last_at
"""
_ROW = "(%s, %s, %s, 'ok', %s, %s, %s, '', {false}, {json}, %s, %s, 1, %s, %s, {now} + %s)"
_FALSE = {"postgresql": "false", "sqlite": "0"}


def reads_count(*, entries: list[dict], window: float) -> None:
    """Count one read for each entry (keys: open_key, actor, action, resource, ip, user_agent,
    request_id, subject_id; open_keys distinct)."""
    if not entries:
        return
    vendor = connection.vendor
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    keys = [e["open_key"] for e in entries]
    row = _ROW.format(false=_FALSE[vendor], json=_JSON[vendor], now=_NOW[vendor])
    params: list = []
    for e in entries:
        params += [
            e["actor"],
            e["action"],
            e["resource"],
            e["ip"],
            e["user_agent"],
            e["request_id"],
            json.dumps({}),
            now,
            e["subject_id"],
            now,
            e["open_key"],
            float(window),
        ]
    close = READS_CLOSE.format(keys=", ".join(["%s"] * len(keys)), now=_NOW[vendor])
    count = READS_COUNT.format(values=", ".join([row] * len(entries)))
    # Both statements or neither: a read is never counted on a row whose window has ended.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(close, keys)
        cursor.execute(count, params)
