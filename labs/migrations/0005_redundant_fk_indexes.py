"""Foreign-key indexes another index of the table serves: see
workflows/migrations/0014_redundant_fk_indexes.py."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

DROPPED = (  # (index, table, column)
    ("lab_uploads_user_id_1af686e2", "lab_uploads", "user_id"),
    ("biomarkers_user_id_4c702331", "biomarkers", "user_id"),
)


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
                    f'DROP INDEX IF EXISTS "{name}"',
                    f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")',
                )
                for name, table, column in DROPPED
            ],
        ),
    ]
