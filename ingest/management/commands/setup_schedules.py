"""`manage.py setup_schedules`: create or update the django-q2 schedules (idempotent)."""

from django.core.management.base import BaseCommand

from ingest.schedules import schedules_setup


class Command(BaseCommand):
    help = (
        "Create or update the django-q2 schedules by name: terra-drain every 5 min, "
        "terra-reconcile daily 03:00 UTC (7-day backfill of every active connection), "
        "ingest-cleanup daily 03:30 (expired idempotency keys, old traces), and "
        "workflows-sweep (every minute) and workflows-gc (daily 04:00, retention) when the "
        "workflow engine provides them. Safe to run on every deploy: "
        "a second run leaves the same rows."
    )

    def handle(self, *args, **options):
        for row, created in schedules_setup():
            verb = "created" if created else "kept"
            every = (
                f"every {row.minutes} min"
                if row.minutes
                else f"next {row.next_run:%Y-%m-%d %H:%M} UTC"
            )
            self.stdout.write(f"{verb:8} {row.name:18} {row.func} ({every})")
