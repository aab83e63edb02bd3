"""A code workflow can be disabled (workflows.rollout): new instances are refused, running ones
go on. The column has a database default, so the one-statement create path and rows written
before it read "enabled"."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0014_redundant_fk_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="workflowdeployment",
            name="disabled",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
