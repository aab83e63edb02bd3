"""Null-preserving upsert shared by every typed table: one INSERT ... ON CONFLICT statement (SQLite
and PostgreSQL alike) that only overwrites a stored column with a non-null new value, so replays
converge and a sleep event never erases what a daily event wrote."""

from dataclasses import dataclass
from functools import lru_cache

from django.db import connection, models
from django.utils import timezone


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


@dataclass(frozen=True)
class _Statement:
    sql: str
    fields: tuple[models.Field, ...]  # in parameter order
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
    conflict = ", ".join(_quote(meta.get_field(name).column) for name in key_names)
    columns = ", ".join(_quote(f.column) for f in fields)
    sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))}) "
    if assignments and differs:
        sql += (
            f"ON CONFLICT ({conflict}) DO UPDATE SET {', '.join(assignments)} "
            f"WHERE {' OR '.join(differs)} "
        )
    else:
        sql += f"ON CONFLICT ({conflict}) DO NOTHING "
    sql += f"RETURNING {_quote(meta.pk.column)}"
    return _Statement(sql, fields, defaulted, stamps_updated_at, stamps_created_at)


def upsert_keep_non_null(
    model: type[models.Model],
    *,
    key: dict,
    values: dict,
    keep_existing: frozenset[str] | set[str] = frozenset(),
) -> int | None:
    """Insert or update the row identified by `key` (the columns of a unique constraint).

    On conflict each column in `values` becomes COALESCE(new, old) — or COALESCE(old, new) for
    columns in `keep_existing` — and `updated_at` moves only when something really changed.
    Returns the row id when it was inserted or changed, None when the stored row already held
    these values. Field names, not column names; foreign keys as `user_id`.
    """
    statement = _statement(
        model, connection.vendor, tuple(key), tuple(values), frozenset(keep_existing)
    )
    now = timezone.now()
    row = {**key, **values}
    if statement.stamps_updated_at:
        row["updated_at"] = now
    if statement.stamps_created_at:
        row.setdefault("created_at", now)
    for field in statement.defaulted:
        row[field.name] = field.get_default()
    params = [
        f.get_db_prep_save(row[f.attname if f.attname in row else f.name], connection)
        for f in statement.fields
    ]
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, params)
        found = cursor.fetchone()
    return found[0] if found else None
