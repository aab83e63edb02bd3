"""Null-preserving upsert shared by every typed table: one INSERT ... ON CONFLICT statement (SQLite
and PostgreSQL alike) that only overwrites a stored column with a non-null new value, so replays
converge and a sleep event never erases what a daily event wrote.

With `ordered_by` (a column holding the ordering time of the delivery that wrote the row, see
DESIGN §4) an update only applies when the incoming ordering time is not older than the stored
one: a delivery Terra emitted earlier, arriving late, changes nothing."""

import enum
from dataclasses import dataclass
from functools import lru_cache

from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.utils import timezone

from ingest.registry import ValueOutOfRange
from ingest.sqlrows import value_prepper

# The integer columns' ranges as PostgreSQL enforces them; SQLite would store more (or raise
# OverflowError past 64 bits), so both databases refuse the same values, with the same message.
_INTEGER_RANGES = {
    "SmallIntegerField": (-(2**15), 2**15 - 1),
    "IntegerField": (-(2**31), 2**31 - 1),
    "BigIntegerField": (-(2**63), 2**63 - 1),
    "PositiveSmallIntegerField": (0, 2**15 - 1),
    "PositiveIntegerField": (0, 2**31 - 1),
    "PositiveBigIntegerField": (0, 2**63 - 1),
}


def values_fit(model: type[models.Model], values: dict) -> None:
    """Raise ValueOutOfRange naming the column when an integer value does not fit it."""
    for name, value in values.items():
        if isinstance(value, int) and not isinstance(value, bool):
            field = model._meta.get_field(name)
            bounds = _INTEGER_RANGES.get(field.get_internal_type())
            if bounds and not bounds[0] <= value <= bounds[1]:
                raise ValueOutOfRange(
                    f"{model._meta.db_table}.{field.column} = {value} is out of range for its "
                    f"column ({bounds[0]}…{bounds[1]})"
                )


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


@dataclass(frozen=True)
class _Statement:
    sql: str
    fields: tuple[models.Field, ...]  # in parameter order
    preppers: tuple  # (value, connection) -> database value, per field
    defaulted: tuple[models.Field, ...]  # filled from the model's defaults on every call
    stamps_updated_at: bool
    stamps_created_at: bool


@lru_cache(maxsize=256)
def _statement(
    model: type[models.Model],
    vendor: str,
    key_names: tuple[str, ...],
    value_names: tuple[str, ...],
    keep_existing: frozenset[str],
    ordered_by: str | None = None,
) -> _Statement:
    """The SQL for one shape of call, built once: normalizers upsert the same few shapes for
    every row, and building the text (field lookups, quoting) cost more than sending it."""
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
    return _Statement(sql, fields, preppers, defaulted, stamps_updated_at, stamps_created_at)


def upsert_keep_non_null(
    model: type[models.Model],
    *,
    key: dict,
    values: dict,
    keep_existing: frozenset[str] | set[str] = frozenset(),
    ordered_by: str | None = None,
) -> int | None:
    """Insert or update the row identified by `key` (the columns of a unique constraint).

    On conflict each column in `values` becomes COALESCE(new, old) — or COALESCE(old, new) for
    columns in `keep_existing` — and `updated_at` moves only when something really changed.
    Returns the row id when it was inserted or changed, None when the stored row already held
    these values (or, with `ordered_by`, when it was written by a newer delivery). Field
    names, not column names; foreign keys as `user_id`.
    """
    statement = _statement(
        model, connection.vendor, tuple(key), tuple(values), frozenset(keep_existing), ordered_by
    )
    values_fit(model, values)
    now = timezone.now()
    row = {**key, **values}
    if statement.stamps_updated_at:
        row["updated_at"] = now
    if statement.stamps_created_at:
        row.setdefault("created_at", now)
    for field in statement.defaulted:
        row[field.name] = field.get_default()
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: no proxy lookup per value
    params = [
        prep(row[f.attname if f.attname in row else f.name], db)
        for f, prep in zip(statement.fields, statement.preppers, strict=True)
    ]
    with db.cursor() as cursor:
        cursor.execute(statement.sql, params)
        found = cursor.fetchone()
    return found[0] if found else None


class Upserted(enum.StrEnum):
    WRITTEN = "written"  # inserted, or changed by this write
    UNCHANGED = "unchanged"  # the row already held these values
    STALE = "stale"  # a newer delivery wrote the row: this older one changed nothing


def upsert_newest(
    model: type[models.Model],
    *,
    key: dict,
    values: dict,
    ordered_by: str = "ordered_at",
) -> Upserted:
    """upsert_keep_non_null ordered by `ordered_by` (which `values` carries), telling a stale
    write from an unchanged one; that costs one lookup, only when nothing was written."""
    if upsert_keep_non_null(model, key=key, values=values, ordered_by=ordered_by) is not None:
        return Upserted.WRITTEN
    incoming = values.get(ordered_by)
    stored = model.objects.filter(**key).values_list(ordered_by, flat=True).first()
    if incoming is not None and stored is not None and stored > incoming:
        return Upserted.STALE
    return Upserted.UNCHANGED
