"""The one-minute django-q2 schedule for workflows.tasks.sweep (timers, lost wake tasks)."""

from django.db import migrations


def add_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="workflows.sweep",
        defaults={"func": "workflows.tasks.sweep", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="workflows.sweep").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(add_schedule, remove_schedule)]
