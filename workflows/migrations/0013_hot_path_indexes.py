"""Fewer index entries per run: the step and log rows' own instance_id indexes
repeat the leading column of workflow_step_unique_name and workflow_log_run, and the parent
index becomes partial (top-level instances, nearly all of them, write no entry).

Only the indexes are dropped: letting AlterField do it would drop and re-add (re-validate) the
foreign keys as well, a scan of every log row on a large deployment. Django names these
indexes the same on PostgreSQL and SQLite."""

import django.db.models.deletion
from django.db import migrations, models

DROPPED = (
    "workflow_instance_parent_id_5e1d40d4",
    "workflow_log_instance_id_cd688b04",
    "workflow_step_instance_id_1cb1af5a",
)


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0012_claim_order_tiebreak"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="workflowinstance",
                    name="parent",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="children",
                        to="workflows.workflowinstance",
                    ),
                ),
                migrations.AlterField(
                    model_name="workflowlog",
                    name="instance",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="logs",
                        to="workflows.workflowinstance",
                    ),
                ),
                migrations.AlterField(
                    model_name="workflowstep",
                    name="instance",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="steps",
                        to="workflows.workflowinstance",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(f'DROP INDEX IF EXISTS "{name}"', migrations.RunSQL.noop)
                for name in DROPPED
            ],
        ),
        migrations.AddIndex(
            model_name="workflowinstance",
            index=models.Index(
                condition=models.Q(("parent__isnull", False)),
                fields=["parent"],
                name="workflow_inst_parent",
            ),
        ),
    ]
