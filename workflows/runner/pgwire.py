"""Plain psycopg cursors on Django's PostgreSQL connection, for the runner's hot statements.

Django's default cursor (psycopg's ClientCursor) interpolates parameters into the SQL text, so
PostgreSQL parses and plans every claim and boundary statement anew. A plain cursor binds
parameters on the server and, with `prepare=True`, prepares the statement once per connection.
Prepared statements of this session use their generic plan (plan_cache_mode): PostgreSQL
would otherwise plan custom plans again and again for the COALESCE(%s, statement_timestamp())
clock parameter, and the generic plans walk the same indexes (EXPLAIN EXECUTE shows them).
Django opens connections with psycopg's preparing disabled (prepare_threshold None), so the
runner turns it on for statements it marks `prepare=True` only (a threshold nothing reaches);
Django's own statements are never prepared, so neither setting changes anything else.
Errors come back as psycopg's own exceptions, not Django's wrappers (storage_faults knows both).
"""

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections

_KEPT = "_vitalflow_statements"
_KEEP_AT_MOST = 100  # statement texts per connection, as psycopg's own prepared_max
_EXPLICIT_ONLY = 2**31 - 1  # executions before psycopg prepares an unmarked statement: never


def statement(sql: str) -> tuple[str, psycopg.Cursor]:
    """`sql` as the one str object this connection has seen for that text, and a server-binding
    cursor kept for it (in the thread's transaction, if any): execute that object on that cursor.

    psycopg keeps a cursor's transformer (the dumper chosen for each parameter type) only while
    the very same query object runs again on the cursor; the boundary's SQL is built per
    boundary and the claim, create and boundaries alternate, so one cursor per connection, or a
    new str each time, made psycopg look up every parameter's dumper on every execution."""
    db = connections[DEFAULT_DB_ALIAS]  # one thread-local lookup, not one per attribute
    db.ensure_connection()
    conn = db.connection
    kept = getattr(conn, _KEPT, None)
    if kept is None:
        # A session setting, not SET LOCAL: it must outlive the transaction it is sent in.
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.prepare_threshold = _EXPLICIT_ONLY
        kept = {}
        setattr(conn, _KEPT, kept)  # on the connection: a new connection starts afresh
    entry = kept.get(sql)
    if entry is None:
        if len(kept) >= _KEEP_AT_MOST:  # boundaries with many rows: forget the oldest text
            del kept[next(iter(kept))]
        entry = kept[sql] = (sql, psycopg.Cursor(conn))
    return entry


def postgres_autocommit() -> bool:
    """PostgreSQL with no transaction open on this thread's connection, so each statement, or
    each pipeline, is its own transaction. One thread-local lookup for both questions: the
    runner asks at every boundary and every create."""
    db = connections[DEFAULT_DB_ALIAS]
    return db.vendor == "postgresql" and not db.in_atomic_block and db.get_autocommit()
