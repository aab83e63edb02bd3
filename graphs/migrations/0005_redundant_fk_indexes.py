"""Foreign-key indexes another index of the table serves: see
workflows/migrations/0014_redundant_fk_indexes.py."""

import django.db.models.deletion
from django.db import migrations, models

DROPPED = (  # (index, table, column)
    ("graph_token_run_id_517610e8", "graph_token", "run_id"),
    ("graph_run_event_run_id_6ca070c8", "graph_run_event", "run_id"),
)


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
                    f'DROP INDEX IF EXISTS "{name}"',
                    f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")',
                )
                for name, table, column in DROPPED
            ],
        ),
    ]
