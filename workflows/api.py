"""The programmatic API: get_workflow(name).create(...), .create_batch([...]), .get(id), and
instance handles with status/pause/resume/terminate/restart/send_event."""

import uuid

from workflows import selectors, services
from workflows.authoring import registry
from workflows.models import DEFAULT_PRIORITY, WorkflowInstance


class InstanceHandle:
    def __init__(self, workflow_name: str, instance_id: str):
        self.workflow_name = workflow_name
        self.id = instance_id

    def __repr__(self):
        return f"<InstanceHandle {self.workflow_name}/{self.id}>"

    def _row(self) -> WorkflowInstance:
        return selectors.instance_get(workflow_name=self.workflow_name, instance_id=self.id)

    def status(self) -> dict:
        return services.instance_status(instance=self._row())

    def pause(self) -> None:
        services.instance_pause(instance=self._row())

    def resume(self) -> None:
        services.instance_resume(instance=self._row())

    def terminate(self) -> None:
        services.instance_terminate(instance=self._row())

    def restart(self, from_step: str | None = None) -> None:
        """A new run; with `from_step`, steps completed before it keep their results."""
        services.instance_restart(instance=self._row(), from_step=from_step)

    def send_event(self, type: str, payload=None) -> None:  # noqa: A002
        services.instance_send_event(instance=self._row(), type=type, payload=payload)


class WorkflowHandle:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"<WorkflowHandle {self.name}>"

    def create(
        self,
        id: str | None = None,  # noqa: A002
        params=None,
        *,
        idempotency_key: str | None = None,
        priority: int = DEFAULT_PRIORITY,
        labels: dict | None = None,
        version: int | None = None,
        subject=None,
    ) -> InstanceHandle:
        """Pass `idempotency_key` when the call may be retried: a repeat returns the instance
        the first call created. Without one a key is generated, so every call creates.
        `priority` 0-9 (default 5): among new runs waiting for a runner, higher goes first.
        `labels` {"user": "alice"} (≤ 10) tag the instance for list filters. `version` runs
        that registered version instead of the active one (a canary). `subject`: the user the
        work is for (a user or their pk): wiping them deletes it."""
        instance_id = services.instance_create_once(
            workflow_name=self.name,
            idempotency_key=idempotency_key or uuid.uuid4().hex,
            instance_id=id,
            params=params,
            priority=priority,
            labels=labels,
            version=version,
            subject=subject,
        )
        return InstanceHandle(self.name, instance_id)

    def create_batch(self, items: list[dict]) -> list[InstanceHandle]:
        rows = services.instance_create_batch(workflow_name=self.name, items=items)
        return [InstanceHandle(self.name, row.instance_id) for row in rows]

    def get(self, id: str) -> InstanceHandle:  # noqa: A002
        row = selectors.instance_get(workflow_name=self.name, instance_id=id)
        return InstanceHandle(self.name, row.instance_id)


def get_workflow(name: str) -> WorkflowHandle:
    """A handle on a registered workflow; raises WorkflowNotFound."""
    registry.require(name)
    return WorkflowHandle(name)
