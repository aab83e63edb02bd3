"""The project's django-q2 schedules: each app registers its own in ready() (schedule_register);
`manage.py setup_schedules` writes them all by name, idempotently. Never written from ready():
django-q2 would race itself."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import time as dt_time

from django.db import transaction
from django.utils import timezone


@dataclass(frozen=True)
class Spec:
    name: str
    func: str  # dotted path of the task function
    schedule_type: str  # a django_q Schedule type: Schedule.MINUTES, Schedule.DAILY
    minutes: int | None = None
    at: dt_time | None = None  # daily schedules: wall-clock time (UTC)


_specs: dict[str, Spec] = {}


def schedule_register(spec: Spec) -> None:
    _specs[spec.name] = spec


def schedule_specs() -> list[Spec]:
    return list(_specs.values())


def _next_daily(at: dt_time) -> datetime:
    now = timezone.now()
    candidate = now.replace(hour=at.hour, minute=at.minute, second=0, microsecond=0)
    return candidate if candidate > now else candidate + timedelta(days=1)


def schedules_setup() -> list[tuple[object, bool]]:
    """Create or update every registered schedule by name; returns (row, created) pairs. A re-run
    keeps an existing row's next_run, so it neither fires early nor skips a run."""
    from django_q.models import Schedule

    out = []
    with transaction.atomic():
        for spec in schedule_specs():
            fields = {
                "func": spec.func,
                "schedule_type": spec.schedule_type,
                "minutes": spec.minutes,
                "repeats": -1,
            }
            row = Schedule.objects.filter(name=spec.name).order_by("id").first()
            created = row is None
            if created:
                first = _next_daily(spec.at) if spec.at else timezone.now()
                row = Schedule.objects.create(name=spec.name, next_run=first, **fields)
            else:
                changed = [k for k, v in fields.items() if getattr(row, k) != v]
                for key in changed:
                    setattr(row, key, fields[key])
                if changed:
                    row.save(update_fields=changed)
                # Older runs of this command may have left duplicates with the same name.
                Schedule.objects.filter(name=spec.name).exclude(pk=row.pk).delete()
            out.append((row, created))
    return out
