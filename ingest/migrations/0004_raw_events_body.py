from django.db import migrations, models


def copy_payload_to_body(apps, schema_editor):
    # Rows stored before this migration only have the re-serialized JSON: it becomes their body
    # (their dedup_key, the sha256 of the original bytes, no longer matches it).
    if schema_editor.connection.vendor == "postgresql":
        sql = "UPDATE raw_events SET body = convert_to(payload::text, 'UTF8')"
    else:
        sql = "UPDATE raw_events SET body = CAST(payload AS BLOB)"
    schema_editor.execute(sql)


class Migration(migrations.Migration):

    dependencies = [
        ("ingest", "0003_raw_events_ordered_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="rawevent",
            name="body",
            field=models.BinaryField(default=b""),
            preserve_default=False,
        ),
        migrations.RunPython(copy_payload_to_body, migrations.RunPython.noop),
        migrations.RemoveField(model_name="rawevent", name="payload"),
    ]
