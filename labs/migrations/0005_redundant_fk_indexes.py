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
        ("labs", "0004_upload_instance_id"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="biomarker",
                    name="user",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="biomarkers",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="labupload",
                    name="user",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="lab_uploads",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "lab_uploads_user_id_1af686e2"',
                    'CREATE INDEX IF NOT EXISTS "lab_uploads_user_id_1af686e2" ON "lab_uploads" ("user_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "biomarkers_user_id_4c702331"',
                    'CREATE INDEX IF NOT EXISTS "biomarkers_user_id_4c702331" ON "biomarkers" ("user_id")',
                ),
            ],
        ),
    ]
