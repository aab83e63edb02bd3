"""The user an instance works for (WorkflowInstance.subject), with a partial index for the wipe
and the export."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0015_workflow_disabled'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='workflowinstance',
            name='subject',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddIndex(
            model_name='workflowinstance',
            index=models.Index(condition=models.Q(('subject__isnull', False)), fields=['subject'], name='workflow_inst_subject'),
        ),
    ]
