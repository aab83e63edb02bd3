from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0012_wiped_references"),
    ]

    operations = [
        migrations.AddField(
            model_name="rawevent",
            name="process_traceback",
            field=models.TextField(blank=True, null=True),
        ),
    ]
