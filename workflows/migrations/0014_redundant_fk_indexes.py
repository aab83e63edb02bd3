"""Foreign keys whose own index repeats the leading column of another index of the table
(tests/ops/test_schema.py): the wider index serves every lookup, the narrow one only cost each
insert an entry. As in workflows 0013, only the indexes are dropped (Django names them the same
on PostgreSQL and SQLite); letting AlterField do it would drop and re-validate the foreign keys
too, a scan of the whole table. Reversing creates them again."""

import django.db.models.deletion
from django.db import migrations, models

DROPPED = (  # (index, table, column)
    ("workflow_instance_label_instance_id_e4d189ca", "workflow_instance_label", "instance_id"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0013_hot_path_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="workflowinstancelabel",
                    name="instance",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="label_rows",
                        to="workflows.workflowinstance",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{name}"',
                    f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")',
                )
                for name, table, column in DROPPED
            ],
        ),
    ]
