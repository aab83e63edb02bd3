"""The user a graph run is about (GraphRun.subject), with a partial index for the wipe and the
export."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('graphs', '0007_approvers_answers_four_eyes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='graphrun',
            name='subject',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddIndex(
            model_name='graphrun',
            index=models.Index(condition=models.Q(('subject__isnull', False)), fields=['subject'], name='graph_run_subject'),
        ),
    ]
