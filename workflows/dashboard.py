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


def open_instances_by_status() -> dict[str, int]:
    """Instances not finished (active, waiting, paused) have exactly one task row: counted
    through the task table (the open work), not over every instance ever run; errored ones
    through their partial index."""
    counts = dict(
        WorkflowTask.objects.values_list("instance__status").annotate(n=Count("id")).order_by()
    )
    counts[Status.ERRORED.value] = WorkflowInstance.objects.filter(status=Status.ERRORED).count()
    return counts


def workflows_gauges():
    """/metrics (ops.metrics): instances by status (finished ones other than errored are the
    unbounded tail and are not scraped), tasks due and overdue, wake lag."""
    from ops.metrics import gauge

    by_status = gauge(
        "workflow_instances",
        "Workflow instances by status (open ones and errored; complete/terminated not scraped)",
        ["status"],
    )
    counts = open_instances_by_status()
    for status in (Status.ACTIVE, Status.WAITING, Status.PAUSED, Status.ERRORED):
        by_status.add_metric([status.value], counts.get(status.value, 0))
    yield by_status
    figures = task_figures()
    for name, key, doc in (
        ("workflow_tasks_due", "tasks_due", "Runnable workflow tasks whose time has come"),
        ("workflow_tasks_overdue", "tasks_overdue", "Due for over a minute, no runner on them"),
        ("workflow_waits_overdue", "waits_overdue", "Overdue sleeps and event waits"),
        ("workflow_wake_lag_seconds", "wake_lag_seconds", "Oldest unheld due task's wait"),
    ):
        metric = gauge(name, doc)
        metric.add_metric([], figures[key])
        yield metric
