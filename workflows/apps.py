"""App config: imports workflow definitions once Django is ready; registers gauges, schedules,
the runners' work (liveness), the user data and the bulk action kinds."""

from django.apps import AppConfig
from django.conf import settings


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"

    def ready(self):
        import workflows.services  # noqa: F401  registers the writes the engine asks for
        from workflows.authoring import autodiscover

        autodiscover(list(getattr(settings, "WORKFLOWS_MODULES", [])))

        from ops.metrics import scrape_register
        from workflows.dashboard import workflows_gauges

        scrape_register("workflows", workflows_gauges)

        from datetime import time

        from django_q.models import Schedule

        from ops.schedules import Spec, schedule_register

        schedule_register(
            Spec("workflows-sweep", "workflows.tasks.sweep", Schedule.MINUTES, minutes=1)
        )
        schedule_register(Spec("workflows-gc", "workflows.tasks.gc", Schedule.DAILY, at=time(4, 0)))

        from ops.liveness import RUNNER, work_register
        from workflows.selectors import runner_work_waiting_since

        work_register(RUNNER, runner_work_waiting_since)  # a runner that writes nothing is stuck

        from workflows import userdata

        userdata.register()  # the wipe and the export reach the instances done for a user
        from workflows.bulk import register_kinds

        register_kinds()  # a cluster running a bulk job finds its kind
