"""`manage.py setup_schedules`: create or update every app's django-q2 schedules (idempotent)."""

from django.core.management.base import BaseCommand

from ops.schedules import schedule_specs, schedules_setup


class Command(BaseCommand):
    @property
    def help(self) -> str:
        names = ", ".join(spec.name for spec in schedule_specs())
        return (
            f"Create or update the django-q2 schedules each app registers, by name ({names}). "
            "Safe to run on every deploy: a second run leaves the same rows."
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
