"""Null-preserving upsert shared by every typed table: one INSERT ... ON CONFLICT statement (SQLite
and PostgreSQL alike) that only overwrites a stored column with a non-null new value, so replays
converge and a sleep event never erases what a daily event wrote."""

from django.db import connection, models
from django.utils import timezone


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


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
    meta = model._meta
    now = timezone.now()
    row = {**key, **values}
    if "updated_at" in {f.name for f in meta.concrete_fields}:
        row["updated_at"] = now
    if "created_at" in {f.name for f in meta.concrete_fields}:
        row.setdefault("created_at", now)
    # Raw SQL skips model defaults: supply them for the INSERT (the UPDATE touches `values` only).
    for field in meta.concrete_fields:
        if (
            field.has_default()
            and field.name not in row
            and field.attname not in row
            and not field.primary_key
        ):
            row[field.name] = field.get_default()
    fields = [meta.get_field(name) for name in row]
    columns = [_quote(f.column) for f in fields]
    params = [
        f.get_db_prep_save(row[f.attname if f.attname in row else f.name], connection)
        for f in fields
    ]
    table = _quote(meta.db_table)

    changing = [meta.get_field(name) for name in values]
    assignments, differs = [], []
    for field in changing:
        col = _quote(field.column)
        merged = (
            f"COALESCE({table}.{col}, excluded.{col})"
            if field.name in keep_existing
            else f"COALESCE(excluded.{col}, {table}.{col})"
        )
        assignments.append(f"{col} = {merged}")
        differs.append(f"{merged} {_distinct()} {table}.{col}")
    if "updated_at" in row:
        assignments.append(f"{_quote('updated_at')} = excluded.{_quote('updated_at')}")
    conflict = ", ".join(_quote(meta.get_field(name).column) for name in key)
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(params))}) "
    if assignments and differs:
        sql += f"ON CONFLICT ({conflict}) DO UPDATE SET {', '.join(assignments)} WHERE {' OR '.join(differs)} "
    else:
        sql += f"ON CONFLICT ({conflict}) DO NOTHING "
    sql += f"RETURNING {_quote(meta.pk.column)}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchone()
    return found[0] if found else None


def _distinct() -> str:
    # Null-safe inequality: PostgreSQL spells it IS DISTINCT FROM, SQLite IS NOT.
    return "IS DISTINCT FROM" if connection.vendor == "postgresql" else "IS NOT"
