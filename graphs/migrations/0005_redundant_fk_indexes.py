"""Foreign keys whose own index repeats the leading column of another index of the table
(tests/ops/test_schema.py): the wider index serves every lookup, the narrow one only cost each
insert an entry. As in workflows 0013, only the indexes are dropped (Django names them the same
on PostgreSQL and SQLite); letting AlterField do it would drop and re-validate the foreign keys
too, a scan of the whole table. Reversing creates them again."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("graphs", "0004_graph_run_v3"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="graphrunevent",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="run_events",
                        to="graphs.graphrun",
                    ),
                ),
                migrations.AlterField(
                    model_name="graphtoken",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tokens",
                        to="graphs.graphrun",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "graph_token_run_id_517610e8"',
                    'CREATE INDEX IF NOT EXISTS "graph_token_run_id_517610e8" ON "graph_token" ("run_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "graph_run_event_run_id_6ca070c8"',
                    'CREATE INDEX IF NOT EXISTS "graph_run_event_run_id_6ca070c8" ON "graph_run_event" ("run_id")',
                ),
            ],
        ),
    ]
