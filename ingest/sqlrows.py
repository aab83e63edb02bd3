"""Model instances from plain SQL, for the consumer's per-item reads (daily_merge, sleep).

QuerySet and RawQuerySet rebuild their SQL, column map and converters on every call; for the
few statements the consumer runs for every item that cost more than the statements
themselves. Here the column list and the converters are worked out once per model and
database vendor, and each row becomes an instance through Model.from_db (as the ORM does)."""

from collections.abc import Callable
from functools import lru_cache

from django.db import connection, models


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
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    return columns, [f.attname for f in fields], converters


def model_columns(model: type[models.Model], *, exclude: frozenset[str] = frozenset()) -> str:
    """The quoted column list to SELECT (or RETURN) for model_rows (deferred: `exclude`)."""
    return _shape(model, connection.vendor, exclude)[0]


def model_rows(
    model: type[models.Model],
    sql: str,
    params: list,
    *,
    exclude: frozenset[str] = frozenset(),
) -> list[models.Model]:
    """Run `sql` (which selects model_columns(model, exclude=exclude)) and return instances;
    `exclude`d fields are deferred (loaded on access, like .defer())."""
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
