"""Prepared statements on Django's PostgreSQL connection, for the hot statements: the runner's
claim, create and step boundaries, and the webhook's one statement per delivery.

Django's default cursor (psycopg's ClientCursor) interpolates parameters into the SQL text, so
PostgreSQL parses and plans every claim, boundary and delivery anew. A plain cursor binds
parameters on the server and, with `prepare=True`, prepares the statement once per connection.
Prepared statements of this session use their generic plan (plan_cache_mode): PostgreSQL
would otherwise plan custom plans again and again for the COALESCE(%s, statement_timestamp())
clock parameter, and the generic plans walk the same indexes (EXPLAIN EXECUTE shows them).
Django opens connections with psycopg's preparing disabled (prepare_threshold None), so this
module turns it on for statements it marks `prepare=True` only (a threshold nothing reaches);
Django's own statements are never prepared, so neither setting changes anything else.
Errors come back as psycopg's own exceptions, not Django's wrappers (storage_faults knows both;
the webhook wraps them in the connection's wrap_database_errors).

`execute` is the hot path: outside a transaction it hands the prepared statement to libpq
itself, with psycopg's C dumpers and loaders and its non-blocking wait, as a cursor uses them
(bytes go as binary parameters). The cursor's own machinery around that (query conversion, the
prepared-statement manager, result bookkeeping) cost 25-45 us of client CPU per statement, about
a tenth of the runner's CPU on a 3-step run; for the webhook's five-insert statement the
server's parse and plan, saved by preparing it, were most of PostgreSQL's CPU per delivery
(bench/README.md, tenth and eleventh passes).
"""

import re
from collections.abc import Sequence

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from psycopg import errors, pq
from psycopg.adapt import PyFormat, Transformer
from psycopg.generators import execute as _round_trip

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
        kept = _session(conn)[0]
    entry = kept.get(sql)
    if entry is None:
        if len(kept) >= _KEEP_AT_MOST:  # boundaries with many rows: forget the oldest text
            del kept[next(iter(kept))]
        entry = kept[sql] = (sql, psycopg.Cursor(conn))
    return entry


def _session(conn: psycopg.Connection) -> tuple[dict, "_Statements"]:
    """What this connection keeps for the runner, made on its first use: a new connection
    starts afresh."""
    kept = getattr(conn, _KEPT, None)
    if kept is None:
        # A session setting, not SET LOCAL: it must outlive the transaction it is sent in.
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.prepare_threshold = _EXPLICIT_ONLY
        kept = {}
        setattr(conn, _KEPT, kept)
        setattr(conn, _PREPARED, _Statements())
    return kept, getattr(conn, _PREPARED)


def execute(sql: str, params: Sequence, db=None) -> tuple | None:
    """Run `sql` (%s placeholders) with `params` in one round trip, prepared once per connection
    and parameter types; its first row, or None. Outside a transaction (autocommit) the
    statement is its own transaction and goes through libpq directly; inside one (Django's
    atomic block, which psycopg opens lazily) through the kept cursor, which sends the BEGIN.
    `db`: the thread's connection wrapper, if the caller has looked it up already."""
    if db is None:
        db = connections[DEFAULT_DB_ALIAS]
    db.ensure_connection()
    conn = db.connection
    if not conn.autocommit:
        sql, cursor = statement(sql)
        cursor.execute(sql, params, prepare=True)
        return cursor.fetchone()
    prepared = getattr(conn, _PREPARED, None)
    if prepared is None:
        prepared = _session(conn)[1]
    return prepared.get(conn, sql).run(conn, params)


_PREPARED = "_vitalflow_prepared"
_PLACEHOLDER = re.compile(r"%%|%s|%")
_DONE = {pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK}
# The server forgot the statement (DEALLOCATE, a new session behind a pooler) or its plan no
# longer fits (the schema changed): nothing ran, so it is prepared again and sent once more.
_STALE = {b"26000", b"0A000"}


def numbered(sql: str) -> tuple[bytes, int]:
    """psycopg's %s placeholders as PostgreSQL's $1, $2 ... (%% is a literal %), and how many."""
    count = 0

    def number(match: re.Match) -> str:
        nonlocal count
        if match.group() == "%%":
            return "%"
        if match.group() == "%":
            raise psycopg.ProgrammingError(f"only %s placeholders are supported: {sql[:80]!r}")
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(number, sql).encode(), count


class _Statements:
    """The texts this connection runs through `execute`, at most _KEEP_AT_MOST; a forgotten
    text's server-side statements are deallocated."""

    def __init__(self):
        self.texts: dict[str, _Statement] = {}
        self.made = 0

    def get(self, conn: psycopg.Connection, sql: str) -> "_Statement":
        found = self.texts.get(sql)
        if found is not None:
            return found
        if len(self.texts) >= _KEEP_AT_MOST:
            oldest = self.texts.pop(next(iter(self.texts)))
            oldest.deallocate(conn)
        self.made += 1
        made = self.texts[sql] = _Statement(conn, sql, f"_vf{self.made}")
        return made


class _Statement:
    """One text on one connection: its dumpers and loaders (one Transformer, as one cursor
    keeps) and its server-side name for each tuple of parameter types seen (a None parameter
    has no type, so one text may be prepared under a few names)."""

    def __init__(self, conn: psycopg.Connection, sql: str, prefix: str):
        self.query, self.count = numbered(sql)
        self.formats = [PyFormat.AUTO] * self.count
        self.tx = Transformer(conn)
        self.prefix = prefix
        self.names: dict[tuple, bytes] = {}
        self.prepared = 0  # names made so far: a name is never used twice

    def run(self, conn: psycopg.Connection, params: Sequence) -> tuple | None:
        if len(params) != self.count:
            raise psycopg.ProgrammingError(
                f"the query has {self.count} placeholders but {len(params)} parameters were passed"
            )
        tx = self.tx
        values = tx.dump_sequence(params, self.formats)
        types = tuple(tx.types)
        with conn.lock:
            result = self._send(conn, types, values)
            if result.error_field(pq.DiagnosticField.SQLSTATE) in _STALE:
                self.names.pop(types, None)
                result = self._send(conn, types, values)
        if result.status not in _DONE:
            raise errors.error_from_result(result, encoding=conn.info.encoding)
        if not result.ntuples:
            return None
        tx.set_pgresult(result)
        return tx.load_row(0, tuple)

    def _send(self, conn: psycopg.Connection, types: tuple, values: list):
        name = self.names.get(types) or self._prepare(conn, types)
        conn.pgconn.send_query_prepared(name, values, param_formats=self.tx.formats)
        return conn.wait(_round_trip(conn.pgconn))[-1]

    def _prepare(self, conn: psycopg.Connection, types: tuple) -> bytes:
        self.prepared += 1
        name = f"{self.prefix}_{self.prepared}".encode()
        conn.pgconn.send_prepare(name, self.query, param_types=types)
        result = conn.wait(_round_trip(conn.pgconn))[-1]
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise errors.error_from_result(result, encoding=conn.info.encoding)
        self.names[types] = name
        return name

    def deallocate(self, conn: psycopg.Connection) -> None:
        with conn.lock:
            for name in self.names.values():
                conn.pgconn.send_query(b"DEALLOCATE " + name)
                conn.wait(_round_trip(conn.pgconn))
        self.names.clear()


def postgres_autocommit(db=None) -> bool:
    """PostgreSQL with no transaction open on this thread's connection (`db`, the thread's
    wrapper, when the caller has it), so each statement, or each pipeline, is its own
    transaction. One thread-local lookup for both questions: the runner asks at every boundary
    and every create."""
    if db is None:
        db = connections[DEFAULT_DB_ALIAS]
    return db.vendor == "postgresql" and not db.in_atomic_block and db.get_autocommit()
