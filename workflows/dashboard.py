"""The workflows panel of the console's front page: instances by status, errored in the last
24 h, and tasks overdue — due (a sleep ended, a wait timed out, a retry or an event is ready)
for over a minute with no runner holding them, which means no runner is alive or keeping up.
Also the figures /metrics reports (tasks due and overdue, wake lag)."""

from datetime import timedelta

from django.db.models import Count, Min, Q

from workflows import runtime
from workflows.models import Status, TaskKind, WorkflowInstance, WorkflowTask

OVERDUE_AFTER = timedelta(minutes=1)
# Kinds whose due time is a wait ending: a sleep (wake) or a wait_for_event timeout / event.
WAIT_KINDS = (TaskKind.WAKE, TaskKind.EVENT)


def _unheld(now) -> Q:
    return Q(locked_until__isnull=True) | Q(locked_until__lte=now)


def task_figures(*, now=None) -> dict:
    """Runnable tasks that are due, those overdue (due > OVERDUE_AFTER ago and not leased),
    overdue waits, and the wake lag (how long the oldest unheld due task has waited)."""
    now = now or runtime.now()
    due = WorkflowTask.objects.filter(run_at__isnull=False, run_at__lte=now)
    unheld = due.filter(_unheld(now))
    overdue = unheld.filter(run_at__lte=now - OVERDUE_AFTER)
    oldest = unheld.aggregate(oldest=Min("run_at"))["oldest"]
    return {
        "tasks_due": due.count(),
        "tasks_overdue": overdue.count(),
        "waits_overdue": overdue.filter(kind__in=WAIT_KINDS).count(),
        "wake_lag_seconds": max((now - oldest).total_seconds(), 0.0) if oldest else 0.0,
    }


def workflows_dashboard_context(*, now=None) -> dict:
    now = now or runtime.now()
    counts = dict(WorkflowInstance.objects.values_list("status").annotate(n=Count("id")).order_by())
    errored_24h = WorkflowInstance.objects.filter(
        status=Status.ERRORED, updated_at__gte=now - timedelta(hours=24)
    ).count()
    return {
        "by_status": [(status.value, counts.get(status.value, 0)) for status in Status],
        "errored_24h": errored_24h,
        **task_figures(now=now),
    }
