"""Writing typed rows: the null-preserving upsert every normalizer shares (one statement of the
store, SQLite and PostgreSQL alike) that only overwrites a stored column with a non-null new
value, so replays converge and a sleep event never erases what a daily event wrote. With
`ordered_by`, a delivery Terra emitted earlier, arriving late, changes nothing
(docs/ingest.md › Rules)."""

import enum

from django.db import models
from django.utils import timezone

from ingest.registry import ValueOutOfRange
from ingest.store import rows as store

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


def upsert_keep_non_null(
    model: type[models.Model],
    *,
    key: dict,
    values: dict,
    keep_existing: frozenset[str] | set[str] = frozenset(),
    ordered_by: str | None = None,
) -> int | None:
    """Insert or update the row identified by `key` (the columns of a unique constraint).

    When the row exists each column in `values` becomes COALESCE(new, old) — or COALESCE(old, new) for
    columns in `keep_existing` — and `updated_at` moves only when something really changed.
    Returns the row id when it was inserted or changed, None when the stored row already held
    these values (or, with `ordered_by`, when it was written by a newer delivery). Field
    names, not column names; foreign keys as `user_id`.
    """
    statement = store.upsert_statement(
        model, tuple(key), tuple(values), frozenset(keep_existing), ordered_by
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
    return store.upsert_run(statement, row)


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
