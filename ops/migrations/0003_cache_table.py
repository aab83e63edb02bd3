"""The database cache table (settings.CACHE_TABLE) that throttles and other shared counters use
when REDIS_URL is not set: created by migrate, so no separate createcachetable step."""

from django.conf import settings
from django.db import migrations


def create_cache_table(apps, schema_editor):
    from django.core.management.commands.createcachetable import Command

    command = Command()
    command.verbosity = 0
    command.create_table(schema_editor.connection.alias, settings.CACHE_TABLE, False)


def drop_cache_table(apps, schema_editor):
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(settings.CACHE_TABLE)}")


class Migration(migrations.Migration):
    dependencies = [("ops", "0002_worker_heartbeats")]
    operations = [migrations.RunPython(create_cache_table, drop_cache_table)]
