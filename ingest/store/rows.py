"""SQL of the typed tables: the null-preserving upsert every normalizer writes through, the daily
merge's row lock, insert and update, the sleep-session lookups, and model instances read back
from plain SQL (QuerySets rebuild their SQL on every call: for per-item statements that cost more
than the statements themselves)."""

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from django.db import DEFAULT_DB_ALIAS, connection, connections, models

from ingest.models import DailySummary, SleepSession


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


# -- model instances from plain SQL ---------------------------------------------------------------


@lru_cache(maxsize=32)
def _shape(model: type[models.Model], vendor: str, exclude: frozenset[str]):
    fields = [f for f in model._meta.concrete_fields if f.name not in exclude]
    table = model._meta.db_table
    converters = []
    for index, field in enumerate(fields):
        column = field.get_col(table)
        found = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
        if found:
            converters.append((index, column, found))
    columns = ", ".join(_quote(f.column) for f in fields)
    return columns, [f.attname for f in fields], converters


def model_columns(model: type[models.Model], *, exclude: frozenset[str] = frozenset()) -> str:
    """The quoted column list to SELECT (or RETURN) for model_rows (deferred: `exclude`)."""
    return _shape(model, connection.vendor, exclude)[0]


def model_rows(
    model: type[models.Model], sql: str, params: list, *, exclude: frozenset[str] = frozenset()
) -> list[models.Model]:
    """Run `sql` (which selects model_columns(model, exclude=exclude)) and return instances,
    each through Model.from_db as the ORM builds them; `exclude`d fields are deferred."""
    _, names, converters = _shape(model, connection.vendor, exclude)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    rows = []
    for values in found:
        values = list(values)
        for index, column, functions in converters:
            value = values[index]
            for function in functions:
                value = function(value, column, connection)
            values[index] = value
        rows.append(model.from_db(connection.alias, names, values))
    return rows


# Fields whose get_db_prep_save returns a value of their own Python type unchanged.
_AS_IS = {
    models.FloatField: float,
    models.IntegerField: int,
    models.BigIntegerField: int,
    models.SmallIntegerField: int,
    models.PositiveIntegerField: int,
    models.CharField: str,
    models.TextField: str,
    models.BooleanField: bool,
}


def value_prepper(field: models.Field) -> Callable[[object, object], object]:
    """prep(value, connection) = field.get_db_prep_save(value, connection), skipped for None
    and for values already of the field's own type (plain floats, ints, strings and booleans
    pass through it unchanged): the consumer's upserts prepare ~30 values an item."""
    kind = _AS_IS.get(type(field))
    if kind is None:
        return field.get_db_prep_save

    def prep(value, db):
        if value is None or type(value) is kind:
            return value
        return field.get_db_prep_save(value, db)

    return prep


# -- the null-preserving upsert -------------------------------------------------------------------


@dataclass(frozen=True)
class Upsert:
    sql: str
    fields: tuple[models.Field, ...]  # in parameter order
    preppers: tuple  # (value, connection) -> database value, per field
    defaulted: tuple[models.Field, ...]  # filled from the model's defaults on every call
    stamps_updated_at: bool
    stamps_created_at: bool


def upsert_statement(
    model: type[models.Model],
    key_names: tuple[str, ...],
    value_names: tuple[str, ...],
    keep_existing: frozenset[str],
    ordered_by: str | None = None,
) -> "Upsert":
    """The upsert for this shape of call on this database (built once, see _upsert_sql)."""
    return _upsert_sql(model, connection.vendor, key_names, value_names, keep_existing, ordered_by)


@lru_cache(maxsize=256)
def _upsert_sql(
    model: type[models.Model],
    vendor: str,
    key_names: tuple[str, ...],
    value_names: tuple[str, ...],
    keep_existing: frozenset[str],
    ordered_by: str | None = None,
) -> Upsert:
    """INSERT … ON CONFLICT (key) DO UPDATE that sets each value column to COALESCE(new, old)
    (COALESCE(old, new) for `keep_existing`), only where something differs (and, with
    `ordered_by`, only when the incoming ordering time is not older than the stored one),
    RETURNING the row's id. Built once per shape of call."""
    meta = model._meta
    concrete = {f.name for f in meta.concrete_fields}
    names = [*key_names, *value_names]
    stamps_updated_at = "updated_at" in concrete
    stamps_created_at = "created_at" in concrete
    for name in ("updated_at", "created_at"):
        if name in concrete and name not in names:
            names.append(name)
    # Raw SQL skips model defaults: supply them for the INSERT (the UPDATE touches `values` only).
    defaulted = tuple(
        field
        for field in meta.concrete_fields
        if field.has_default()
        and field.name not in names
        and field.attname not in names
        and not field.primary_key
    )
    names += [field.name for field in defaulted]
    fields = tuple(meta.get_field(name) for name in names)
    table = _quote(meta.db_table)
    distinct = "IS DISTINCT FROM" if vendor == "postgresql" else "IS NOT"  # null-safe inequality

    assignments, differs = [], []
    for name in value_names:
        col = _quote(meta.get_field(name).column)
        merged = (
            f"COALESCE({table}.{col}, excluded.{col})"
            if name in keep_existing
            else f"COALESCE(excluded.{col}, {table}.{col})"
        )
        assignments.append(f"{col} = {merged}")
        differs.append(f"{merged} {distinct} {table}.{col}")
    if stamps_updated_at:
        assignments.append(f"{_quote('updated_at')} = excluded.{_quote('updated_at')}")
    newer = ""
    if ordered_by is not None:
        col = _quote(meta.get_field(ordered_by).column)
        # An unordered writer (NULL) or an unordered row always merges; otherwise not older.
        newer = (
            f"(excluded.{col} IS NULL OR {table}.{col} IS NULL OR excluded.{col} >= {table}.{col})"
            " AND "
        )
    conflict = ", ".join(_quote(meta.get_field(name).column) for name in key_names)
    columns = ", ".join(_quote(f.column) for f in fields)
    sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))}) "
    if assignments and differs:
        sql += (
            f"ON CONFLICT ({conflict}) DO UPDATE SET {', '.join(assignments)} "
            f"WHERE {newer}({' OR '.join(differs)}) "
        )
    else:
        sql += f"ON CONFLICT ({conflict}) DO NOTHING "
    sql += f"RETURNING {_quote(meta.pk.column)}"
    preppers = tuple(value_prepper(f) for f in fields)
    return Upsert(sql, fields, preppers, defaulted, stamps_updated_at, stamps_created_at)


def upsert_run(statement: Upsert, row: dict) -> int | None:
    """Run an upsert with `row` (field or attribute names → values): the id when the row was
    inserted or changed, None otherwise."""
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: no proxy lookup per value
    params = [
        prep(row[f.attname if f.attname in row else f.name], db)
        for f, prep in zip(statement.fields, statement.preppers, strict=True)
    ]
    with db.cursor() as cursor:
        cursor.execute(statement.sql, params)
        found = cursor.fetchone()
    return found[0] if found else None


# -- daily_summary and sleep_sessions (ingest.normalizers.daily_merge) -----------------------------

_NO_RAW = frozenset({"raw"})  # a whole Terra item each: decoding it is most of a query's cost
# Every sleep_sessions column but these is left out (deferred) of the stored-session lookup.
_ONLY_WAKE = frozenset(
    f.name
    for f in SleepSession._meta.concrete_fields
    if f.name not in ("id", "wake_date", "is_nap")
)
_DAILY_FIELDS = [f for f in DailySummary._meta.concrete_fields if not f.primary_key]


@lru_cache(maxsize=4)
def _daily_sql(vendor: str) -> tuple[str, str, str, str]:
    every = model_columns(DailySummary)
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    return (
        # One day's row, locked until the transaction ends.
        f"SELECT {every} FROM daily_summary "
        f"WHERE user_id = %s AND source = %s AND {_quote('date')} = %s{lock}",
        # An empty day's row, unless a concurrent transaction inserted it first.
        f"INSERT INTO daily_summary ({', '.join(_quote(f.column) for f in _DAILY_FIELDS)}) "
        f"VALUES ({', '.join(['%s'] * len(_DAILY_FIELDS))}) ON CONFLICT DO NOTHING "
        f"RETURNING {every}",
        # The non-nap sessions waking on one date, without `raw`.
        f"SELECT {model_columns(SleepSession, exclude=_NO_RAW)} FROM sleep_sessions "
        "WHERE user_id = %s AND source = %s AND wake_date = %s AND (is_nap IS NULL OR NOT is_nap)",
        # (wake_date, is_nap) of one stored session.
        f"SELECT {model_columns(SleepSession, exclude=_ONLY_WAKE)} FROM sleep_sessions "
        "WHERE user_id = %s AND source = %s AND record_key = %s",
    )


def daily_locked(user_id: int, source: str, day) -> DailySummary | None:
    key = [user_id, source, connection.ops.adapt_datefield_value(day)]
    found = model_rows(DailySummary, _daily_sql(connection.vendor)[0], key)
    return found[0] if found else None


@lru_cache(maxsize=1)
def _daily_preppers() -> list:
    return [(f, value_prepper(f)) for f in _DAILY_FIELDS]


def daily_insert_blank(user_id: int, source: str, day) -> DailySummary | None:
    """The new empty row (invisible, hence as good as locked, until it commits), or None when
    another transaction inserted it first (then lock that one: daily_locked)."""
    blank = DailySummary(user_id=user_id, source=source, date=day)
    db = connections[DEFAULT_DB_ALIAS]
    params = [prep(getattr(blank, f.attname), db) for f, prep in _daily_preppers()]
    found = model_rows(DailySummary, _daily_sql(connection.vendor)[1], params)
    return found[0] if found else None


def daily_update(pk: int, changes: dict) -> None:
    """UPDATE one daily_summary row's changed columns (field name → value)."""
    fields = [DailySummary._meta.get_field(name) for name in changes]
    assignments = ", ".join(f"{_quote(f.column)} = %s" for f in fields)
    params = [f.get_db_prep_save(changes[f.name], connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE daily_summary SET {assignments} WHERE id = %s", [*params, pk])


def sleep_sessions_waking(user_id: int, source: str, day) -> list[SleepSession]:
    params = [user_id, source, connection.ops.adapt_datefield_value(day)]
    return model_rows(SleepSession, _daily_sql(connection.vendor)[2], params, exclude=_NO_RAW)


def sleep_session_wake(user_id: int, source: str, key: str) -> tuple | None:
    """(wake_date, is_nap) of a stored session, or None."""
    found = model_rows(
        SleepSession, _daily_sql(connection.vendor)[3], [user_id, source, key], exclude=_ONLY_WAKE
    )
    return (found[0].wake_date, found[0].is_nap) if found else None


# -- sync reads ------------------------------------------------------------------------------------


def rows_as_json(queryset, pk_column: str) -> list[str] | None:
    """PostgreSQL: each row of a values() queryset as JSON text written by the server
    (row_to_json), in (updated_at, pk) order: no per-value conversion in Python, which is most
    of the cost of a sync page. None elsewhere: the caller encodes the rows."""
    if connection.vendor != "postgresql":
        return None
    sql, params = queryset.query.sql_with_params()
    wrapped = (
        f"SELECT row_to_json(t)::text FROM ({sql}) t ORDER BY t.updated_at, t.{_quote(pk_column)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(wrapped, params)
        return [found[0] for found in cursor.fetchall()]
