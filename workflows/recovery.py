"""Recovery writes an operator asks for after an outage: wake a step out of its retry backoff now
(the attempt count stays) and end a sleep now (the sleep step completes when the run replays).

Same shape as the operator services in workflows.services: lock task then instance, ask
workflows.decisions, write, log in the `system` category, wake a runner on commit. No audit here
(workflows.actions writes it).
"""

from django.db import transaction

from workflows import dbclock, decisions, runtime, services
from workflows.engine import wake
from workflows.errors import NotInBackoff, NotSleeping
from workflows.models import StepStatus, TaskKind, WorkflowInstance, WorkflowStep

PENDING = (StepStatus.RETRYING, StepStatus.SLEEPING)


def _pending_steps(instance: WorkflowInstance) -> list[tuple[WorkflowStep, decisions.StepState]]:
    rows = WorkflowStep.objects.filter(
        instance=instance, run_number=instance.run_number, status__in=PENDING
    ).order_by("id")
    return [
        (row, decisions.StepState(name=row.name, type=row.type, status=row.status, pk=row.pk))
        for row in rows
    ]


def instance_retry_now(*, instance: WorkflowInstance) -> WorkflowStep:
    """The step waiting out its retry delay becomes due now; its next attempt is the one it
    would have made anyway. Refused (NotInBackoff) unless the instance is live, not paused,
    and has such a step. Returns the step."""
    with transaction.atomic():
        fresh, task = services._lock(instance)
        pending = _pending_steps(fresh)
        states = [state for _, state in pending]
        if not decisions.retry_now_applies(fresh.status, states):
            raise NotInBackoff(
                f"{fresh.workflow_name}/{fresh.instance_id} is {fresh.status} with no step "
                "waiting to retry"
            )
        target = decisions.backoff_step(states)
        step = next(row for row, state in pending if state is target)
        now = runtime.now()
        # Due by the clock the runners judge it by (the database's on PostgreSQL).
        WorkflowStep.objects.filter(pk=step.pk).update(next_retry_at=dbclock.due_now(now))
        services._make_runnable(fresh, task, TaskKind.RETRY, now)
        services._system_log(
            fresh,
            "info",
            f"retry of step {step.name!r} due now (asked by an operator; "
            f"{step.attempts} attempt(s) so far)",
        )
        wake.schedule_wake()
    return step


def instance_skip_wait(*, instance: WorkflowInstance) -> WorkflowStep:
    """The sleeping step is due now: the run's next replay completes it and goes on. Refused
    (NotSleeping) unless the instance is live, not paused, and has a sleeping step."""
    with transaction.atomic():
        fresh, task = services._lock(instance)
        pending = _pending_steps(fresh)
        states = [state for _, state in pending]
        if not decisions.skip_wait_applies(fresh.status, states):
            raise NotSleeping(
                f"{fresh.workflow_name}/{fresh.instance_id} is {fresh.status} with no step sleeping"
            )
        target = decisions.sleeping_step(states)
        step = next(row for row, state in pending if state is target)
        now = runtime.now()
        WorkflowStep.objects.filter(pk=step.pk).update(wake_at=dbclock.due_now(now))
        services._make_runnable(fresh, task, TaskKind.WAKE, now)
        services._system_log(fresh, "info", f"sleep {step.name!r} skipped by an operator")
        wake.schedule_wake()
    return step


def restart_preview(*, instance: WorkflowInstance, from_step: str) -> list[str] | None:
    """The steps a restart from `from_step` would run again (decisions.steps_run_again), or
    None when the current run never reached that step."""
    steps = WorkflowStep.objects.filter(instance=instance, run_number=instance.run_number)
    return decisions.steps_run_again(
        list(steps.order_by("id").values_list("name", "status")), from_step
    )
