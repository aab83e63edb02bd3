"""Prepared statements on Django's PostgreSQL connection, for the hot statements: the runner's
claim, create and step boundaries, and the webhook's one statement per delivery.

Django's default cursor (psycopg's ClientCursor) interpolates parameters into the SQL text, so
PostgreSQL parses and plans every claim, boundary and delivery anew. Here a server-binding
psycopg cursor runs them with `cursor.execute(sql, params, prepare=True)`: prepared once per
connection and parameter types, psycopg's documented interface, nothing below it. Django opens
connections with preparing off (`prepare_threshold` None), so this module sets a threshold
nothing reaches: only statements marked `prepare=True` are prepared, Django's own never.
psycopg keeps at most `prepared_max` statements per connection and deallocates the oldest on
the server. Prepared statements of this session use their generic plan (plan_cache_mode):
PostgreSQL would otherwise plan custom plans again and again for the
COALESCE(%s, statement_timestamp()) clock parameter, and the generic plans walk the same
indexes (EXPLAIN EXECUTE shows them). Errors come back as psycopg's own exceptions, not
Django's wrappers (storage_faults knows both; the webhook wraps them in wrap_database_errors).
"""

from collections.abc import Sequence

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections

_KEPT = "_vitalflow_statements"
_KEEP_AT_MOST = 100  # statement texts per connection: psycopg's prepared_max, and our cursors
_EXPLICIT_ONLY = 2**31 - 1  # executions before psycopg prepares an unmarked statement: never


def statement(sql: str, db=None) -> tuple[str, psycopg.Cursor]:
    """`sql` as the one str object this connection has seen for that text, and a server-binding
    cursor kept for it (in the thread's transaction, if any): execute that object on that cursor.

    psycopg keeps a cursor's query conversion and the dumper chosen for each parameter type
    only while the very same query object runs again on the same cursor; the claim, create and
    boundaries alternate, so one cursor per text keeps that work from being redone each time."""
    if db is None:
        db = connections[DEFAULT_DB_ALIAS]  # one thread-local lookup, not one per attribute
    db.ensure_connection()
    conn = db.connection
    kept = getattr(conn, _KEPT, None)
    if kept is None:
        kept = _session(conn)
    entry = kept.get(sql)
    if entry is None:
        if len(kept) >= _KEEP_AT_MOST:  # boundaries with many rows: forget the oldest text
            kept.pop(next(iter(kept)))[1].close()
        entry = kept[sql] = (sql, psycopg.Cursor(conn))
    return entry


def _session(conn: psycopg.Connection) -> dict:
    """What this connection keeps, made on its first use: a new connection starts afresh."""
    # A session setting, not SET LOCAL: it must outlive the transaction it is sent in.
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.prepare_threshold = _EXPLICIT_ONLY
    conn.prepared_max = _KEEP_AT_MOST
    kept: dict = {}
    setattr(conn, _KEPT, kept)
    return kept


def execute(sql: str, params: Sequence, db=None) -> tuple | None:
    """Run `sql` (%s placeholders) with `params` in one round trip, prepared once per connection
    and parameter types; its first row, or None. Outside a transaction (autocommit) the
    statement is its own transaction; inside one (Django's atomic block) it joins it.
    `db`: the thread's connection wrapper, if the caller has looked it up already."""
    sql, cursor = statement(sql, db)
    cursor.execute(sql, params, prepare=True)
    if cursor.description is None:  # a statement without a result set
        return None
    return cursor.fetchone()


def postgres_autocommit(db=None) -> bool:
    """PostgreSQL with no transaction open on this thread's connection (`db`, the thread's
    wrapper, when the caller has it), so each statement, or each pipeline, is its own
    transaction. One thread-local lookup for both questions: the runner asks at every boundary
    and every create."""
    if db is None:
        db = connections[DEFAULT_DB_ALIAS]
    return db.vendor == "postgresql" and not db.in_atomic_block and db.get_autocommit()
