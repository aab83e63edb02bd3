"""The schema the models ask for: the migrations build exactly it, and no table keeps an index
that another index of the same table already serves (each one costs every insert an entry)."""

from io import StringIO

from django.apps import apps
from django.core.management import call_command
from django.db.models import UniqueConstraint

PROJECT_APPS = ("ingest", "labs", "workflows", "graphs", "ops")


def test_the_migrations_build_what_the_models_ask_for(db):
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def _indexes(model) -> list[tuple[str, tuple[str, ...], bool, bool]]:
    """(name, columns, unique, partial) of every column index the model asks for."""
    opts = model._meta

    def columns(names):
        return tuple(opts.get_field(name.lstrip("-")).column for name in names)

    found = []
    for field in opts.local_concrete_fields:
        if field.primary_key:
            continue
        if field.unique or field.db_index:
            found.append((field.column, (field.column,), field.unique, False))
    for index in opts.indexes:
        if index.fields:  # expression indexes have none
            found.append((index.name, columns(index.fields), False, index.condition is not None))
    for constraint in opts.constraints:
        if isinstance(constraint, UniqueConstraint) and constraint.fields:
            partial = constraint.condition is not None
            found.append((constraint.name, columns(constraint.fields), True, partial))
    for fields in opts.unique_together:
        found.append(("unique_together", columns(fields), True, False))
    return found


def test_no_index_repeats_the_leading_columns_of_another():
    """A plain index on (a) next to a whole-table index on (a, b) only costs writes: every
    lookup on a uses the wider one. Django adds one per foreign key unless told not to."""
    repeated = []
    for model in apps.get_models():
        if model._meta.app_label not in PROJECT_APPS or not model._meta.managed:
            continue
        indexes = _indexes(model)
        for name, cols, unique, partial in indexes:
            if unique or partial:
                continue
            for other, wider, _, other_partial in indexes:
                if other != name and not other_partial and wider[: len(cols)] == cols:
                    repeated.append(f"{model._meta.db_table}: {name} {cols} is served by {other}")
                    break
    assert repeated == []
