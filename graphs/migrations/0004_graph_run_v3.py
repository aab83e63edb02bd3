"""New graph runs start on `graph-run` v3 (a human node also takes an answer naming its token).

As 0003 did for v2: an existing active-version row for graph-run is pointed at v3; with none,
the engine activates the first registered version, which is v3 (graphs/workflows.py). Runs
already started keep their version. Reverse: back to v2.
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
    dependencies = [("graphs", "0003_graph_run_v2")]

    operations = [migrations.RunPython(activate(3), activate(2))]
