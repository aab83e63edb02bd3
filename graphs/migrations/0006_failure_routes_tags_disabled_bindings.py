"""Definition tags (a row per tag, for list filters), bindings that can be disabled, and the
run event `run_timed_out` (on_timeout human_gate)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("graphs", "0005_redundant_fk_indexes"),
    ]

    operations = [
        migrations.CreateModel(
            name="GraphDefinitionTag",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=64)),
            ],
            options={
                "db_table": "graph_definition_tag",
            },
        ),
        migrations.RemoveConstraint(
            model_name="graphrunevent",
            name="graph_run_event_type_valid",
        ),
        migrations.AddField(
            model_name="graphbinding",
            name="enabled",
            field=models.BooleanField(default=True),
        ),
        migrations.AlterField(
            model_name="graphrunevent",
            name="type",
            field=models.CharField(
                choices=[
                    ("run_started", "Run Started"),
                    ("token_spawned", "Token Spawned"),
                    ("node_started", "Node Started"),
                    ("node_completed", "Node Completed"),
                    ("node_failed", "Node Failed"),
                    ("fan_in_waiting", "Fan In Waiting"),
                    ("fan_in_completed", "Fan In Completed"),
                    ("context_updated", "Context Updated"),
                    ("run_completed", "Run Completed"),
                    ("run_failed", "Run Failed"),
                    ("run_timed_out", "Run Timed Out"),
                ],
                max_length=32,
            ),
        ),
        migrations.AddConstraint(
            model_name="graphrunevent",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "type__in",
                        [
                            "run_started",
                            "token_spawned",
                            "node_started",
                            "node_completed",
                            "node_failed",
                            "fan_in_waiting",
                            "fan_in_completed",
                            "context_updated",
                            "run_completed",
                            "run_failed",
                            "run_timed_out",
                        ],
                    )
                ),
                name="graph_run_event_type_valid",
            ),
        ),
        migrations.AddField(
            model_name="graphdefinitiontag",
            name="definition",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="tag_rows",
                to="graphs.graphdefinition",
            ),
        ),
        migrations.AddIndex(
            model_name="graphdefinitiontag",
            index=models.Index(fields=["name", "definition"], name="graph_def_tag_name"),
        ),
        migrations.AddConstraint(
            model_name="graphdefinitiontag",
            constraint=models.UniqueConstraint(
                fields=("definition", "name"), name="graph_definition_tag_once"
            ),
        ),
    ]
