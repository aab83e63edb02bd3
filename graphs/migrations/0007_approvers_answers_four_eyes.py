"""Who may answer a binding's human nodes (a group on the binding, a permission for every
binding), who started a run (four-eyes), and the one accepted answer per waiting node."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('graphs', '0006_failure_routes_tags_disabled_bindings'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='graphbinding',
            options={'permissions': [('answer_any_human_node', 'Can answer the human nodes of every binding')]},
        ),
        migrations.AddField(
            model_name='graphbinding',
            name='approvers',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='graph_bindings', to='auth.group'),
        ),
        migrations.AddField(
            model_name='graphrun',
            name='started_by',
            field=models.CharField(blank=True, default='', max_length=200),
        ),
        migrations.CreateModel(
            name='GraphAnswer',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('engine_run', models.PositiveIntegerField()),
                ('token_path', models.CharField(max_length=255)),
                ('node_ref', models.CharField(max_length=64)),
                ('event_type', models.CharField(max_length=100)),
                ('decision', models.CharField(choices=[('approve', 'Approve'), ('reject', 'Reject'), ('answer', 'Answer')], max_length=16)),
                ('actor', models.CharField(max_length=200)),
                ('created_at', models.DateTimeField()),
                ('run', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='answers', to='graphs.graphrun')),
            ],
            options={
                'db_table': 'graph_answer',
                'constraints': [models.UniqueConstraint(fields=('run', 'engine_run', 'token_path'), name='graph_answer_once'), models.CheckConstraint(condition=models.Q(('decision__in', ['approve', 'reject', 'answer'])), name='graph_answer_decision_valid')],
            },
        ),
    ]
