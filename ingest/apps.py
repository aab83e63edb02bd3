"""ingest's app: registers its normalizers, user tables, due poller, gauges and schedules."""

from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "ingest"
    verbose_name = "Ingest (Terra)"

    def ready(self):
        # Importing the package registers the built-in normalizers.
        from ingest import normalizers  # noqa: F401
        from ingest.models import Activity, DailySummary, SleepSession
        from ingest.registry import UserTable, register_user_table

        register_user_table(UserTable("daily_summary", DailySummary))
        register_user_table(UserTable("sleep_sessions", SleepSession))
        register_user_table(UserTable("activities", Activity))
        # Traces, raw events, imports, connections: for the wipe and the export (ops.userdata).
        from ingest import userdata

        userdata.register()
        # Rows due again (retries, parked backoff, dead workers' leases) run within a second:
        # a poller thread in each qcluster worker process (ingest.due).
        from django_q.signals import post_spawn

        from ingest.due import poller_start

        post_spawn.connect(poller_start, dispatch_uid="ingest-due-poller")

        # A qcluster's work, for the console's "stuck" flag (ops.liveness).
        from ingest.selectors import consumer_work_waiting_since
        from ops.liveness import CLUSTER, work_register

        work_register(CLUSTER, consumer_work_waiting_since)

        from ingest.actions import register_bulk_kinds

        register_bulk_kinds()  # a cluster running a bulk replay finds its kind

        from ingest.metrics import ingest_gauges
        from ops.metrics import scrape_register

        scrape_register("ingest", ingest_gauges)
        _register_schedules()


def _register_schedules() -> None:
    from datetime import time

    from django_q.models import Schedule

    from ingest import tasks
    from ops.schedules import Spec, schedule_register

    schedule_register(Spec(tasks.DRAIN, "ingest.tasks.drain_task", Schedule.MINUTES, minutes=5))
    schedule_register(
        Spec(tasks.RECONCILE, "ingest.tasks.reconcile_task", Schedule.DAILY, at=time(3, 0))
    )
    schedule_register(
        Spec(tasks.CLEANUP, "ingest.tasks.cleanup_task", Schedule.DAILY, at=time(3, 30))
    )
