"""Foreign keys whose own index repeats the leading column of another index of the table
(tests/ops/test_schema.py): the wider index serves every lookup, the narrow one only cost each
insert an entry. As in workflows 0013, only the indexes are dropped (Django names them the same
on PostgreSQL and SQLite); letting AlterField do it would drop and re-validate the foreign keys
too, a scan of the whole table. Reversing creates them again."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


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
                    'DROP INDEX IF EXISTS "terra_connections_user_id_2abeebcf"',
                    'CREATE INDEX IF NOT EXISTS "terra_connections_user_id_2abeebcf" ON "terra_connections" ("user_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "daily_summary_user_id_2e194b9d"',
                    'CREATE INDEX IF NOT EXISTS "daily_summary_user_id_2e194b9d" ON "daily_summary" ("user_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "sleep_sessions_user_id_9c95caf0"',
                    'CREATE INDEX IF NOT EXISTS "sleep_sessions_user_id_9c95caf0" ON "sleep_sessions" ("user_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "activities_user_id_8e415daf"',
                    'CREATE INDEX IF NOT EXISTS "activities_user_id_8e415daf" ON "activities" ("user_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "trace_events_raw_event_id_c75c3d07"',
                    'CREATE INDEX IF NOT EXISTS "trace_events_raw_event_id_c75c3d07" ON "trace_events" ("raw_event_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "trace_events_user_id_5cc42bd1"',
                    'CREATE INDEX IF NOT EXISTS "trace_events_user_id_5cc42bd1" ON "trace_events" ("user_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "import_jobs_user_id_d08f01f9"',
                    'CREATE INDEX IF NOT EXISTS "import_jobs_user_id_d08f01f9" ON "import_jobs" ("user_id")',
                ),
            ],
        ),
    ]
