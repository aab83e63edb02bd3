"""New graph runs start on `graph-run` v2 (fan-out branches through step.parallel).

Where the engine's active-version row for graph-run exists (it pointed at v1), point it at v2;
where none exists, the engine activates the first registered version, which is v2
(graphs/workflows.py). Runs already started keep v1. Reverse: back to v1.
"""

from django.db import migrations
from django.utils import timezone


def activate(version):
    def run(apps, schema_editor):
        deployment = apps.get_model("workflows", "WorkflowDeployment")
        deployment.objects.filter(workflow_name="graph-run").update(
            active_version=version, updated_at=timezone.now()
        )

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("graphs", "0002_engine_run"),
        ("workflows", "0011_gc_indexes"),
    ]

    operations = [migrations.RunPython(activate(2), activate(1))]
