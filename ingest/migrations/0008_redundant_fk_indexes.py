"""Foreign-key indexes another index of the table serves: see
workflows/migrations/0014_redundant_fk_indexes.py."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

DROPPED = (  # (index, table, column)
    ("terra_connections_user_id_2abeebcf", "terra_connections", "user_id"),
    ("daily_summary_user_id_2e194b9d", "daily_summary", "user_id"),
    ("sleep_sessions_user_id_9c95caf0", "sleep_sessions", "user_id"),
    ("activities_user_id_8e415daf", "activities", "user_id"),
    ("trace_events_raw_event_id_c75c3d07", "trace_events", "raw_event_id"),
    ("trace_events_user_id_5cc42bd1", "trace_events", "user_id"),
    ("import_jobs_user_id_d08f01f9", "import_jobs", "user_id"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0007_consume_tickets"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="activity",
                    name="user",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="dailysummary",
                    name="user",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="importjob",
                    name="user",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="import_jobs",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="sleepsession",
                    name="user",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="terraconnection",
                    name="user",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="terra_connections",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="traceevent",
                    name="raw_event",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="traces",
                        to="ingest.rawevent",
                    ),
                ),
                migrations.AlterField(
                    model_name="traceevent",
                    name="user",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
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
