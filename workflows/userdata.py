"""What the engine stores about a user, registered with ops.userdata for the wipe and the export:
the instances whose subject they are, with their steps, events, logs, tasks and labels, and the
stored answers to their creation; and the stopper a wipe calls first (terminate the live ones).
docs/health-data.md › Erasure."""

import contextlib
import json

from ops.models import IdempotencyKey
from ops.userdata import Subject, UserData, stopper_register, user_data_register
from workflows.errors import InstanceTerminal
from workflows.models import (
    TERMINAL_STATUSES,
    WorkflowEvent,
    WorkflowInstance,
    WorkflowInstanceLabel,
    WorkflowLog,
    WorkflowStep,
    WorkflowTask,
)

# The key of the first engine source: graphs registers its rows before it (runs hang from
# instances).
FIRST_ROWS = "workflow_logs"


def instances_of(subject: Subject):
    return WorkflowInstance.objects.filter(subject_id=subject.pk)


def _of_instances(model):
    return lambda subject: model.objects.filter(instance__subject_id=subject.pk)


def live_work_stop(subject: Subject) -> int:
    """Terminate the user's live instances (graph runs are instances too), each as an operator's
    terminate would: a runner in the middle of a step can no longer store it, a parent waiting
    for one of them wakes with its error. Returns how many were terminated."""
    return instances_terminate(instances_of(subject))


def instances_terminate(instances) -> int:
    """Terminate the live ones of `instances` (a queryset); returns how many."""
    from workflows import services

    stopped = 0
    live = instances.exclude(status__in=TERMINAL_STATUSES)
    for pk in list(live.order_by("pk").values_list("pk", flat=True)):
        # Read again: terminating a parent has already terminated its children.
        instance = WorkflowInstance.objects.filter(pk=pk).first()
        if instance is None or instance.status in TERMINAL_STATUSES:
            continue
        with contextlib.suppress(InstanceTerminal):  # finished meanwhile
            services.instance_terminate(instance=instance)
            stopped += 1
    return stopped


def instance_params_forget(workflow_name: str, instance_id: str, *, keys: tuple[str, ...]) -> None:
    """Drop `keys` from an instance's params: for a workflow that held a person's identifiers
    only until it was done with them (run inside its step's transaction, step.tx.mutate). The
    workflow must not need them on replay (only the steps that used them read them)."""
    row = WorkflowInstance.objects.filter(workflow_name=workflow_name, instance_id=instance_id)
    params = row.values_list("params", flat=True).first()
    if isinstance(params, dict):
        row.update(params={k: v for k, v in params.items() if k not in keys})


def _strings(value, found: set[str]) -> set[str]:
    if isinstance(value, str):
        found.add(value)
    elif isinstance(value, list):
        for item in value:
            _strings(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, found)
    return found


def _answer_strings(body: bytes) -> set[str]:
    """Every string of a stored JSON answer, or the whole body (the programmatic create stores
    the bare instance id)."""
    try:
        return _strings(json.loads(body), set())
    except ValueError:
        return {body.decode(errors="replace")}


def creation_answers_of(subject: Subject):
    """Stored answers (ops.idempotency, a day's worth) naming one of the user's instances or
    runs by its id: the answer to creating it. Evaluated before the instances are deleted."""
    ids = set(instances_of(subject).values_list("instance_id", flat=True))
    if not ids:
        return IdempotencyKey.objects.none()
    rows = IdempotencyKey.objects.only("pk", "response_body").iterator(chunk_size=200)
    naming = [
        row.pk
        for row in rows
        if row.response_body and _answer_strings(bytes(row.response_body)) & ids
    ]
    return IdempotencyKey.objects.filter(pk__in=naming)


def register() -> None:
    """Called by WorkflowsConfig.ready(). Wipe order: answers, then the rows hanging from
    instances, then the instances (children of one another: every one of them goes)."""
    user_data_register(
        UserData("workflow_idempotency_keys", IdempotencyKey, creation_answers_of, export=False)
    )
    user_data_register(UserData(FIRST_ROWS, WorkflowLog, _of_instances(WorkflowLog)))
    user_data_register(UserData("workflow_events", WorkflowEvent, _of_instances(WorkflowEvent)))
    user_data_register(UserData("workflow_steps", WorkflowStep, _of_instances(WorkflowStep)))
    # Queue rows and the label index: engine plumbing (labels are on the instance), not exported.
    user_data_register(
        UserData("workflow_tasks", WorkflowTask, _of_instances(WorkflowTask), export=False)
    )
    user_data_register(
        UserData(
            "workflow_instance_labels",
            WorkflowInstanceLabel,
            _of_instances(WorkflowInstanceLabel),
            export=False,
        )
    )
    user_data_register(UserData("workflow_instances", WorkflowInstance, instances_of))
    stopper_register("workflows", live_work_stop)
