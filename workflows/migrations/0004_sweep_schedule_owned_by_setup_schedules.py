"""Schedules are created by `manage.py setup_schedules` (idempotent, named `workflows-sweep`);
the row 0002 installed made the sweep run twice a minute."""

from django.db import migrations


def remove_migration_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="workflows.sweep").delete()


class Migration(migrations.Migration):
    dependencies = [("workflows", "0003_task_claims")]

    operations = [migrations.RunPython(remove_migration_schedule, migrations.RunPython.noop)]
