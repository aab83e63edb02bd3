"""Rolling a code workflow out and back without a deploy: instances created on an explicit
version beside the active pointer (a canary), and disabling a workflow so that every road to a
new instance (API, CLI, Python, cron, child workflows) is refused while running ones go on.

The operator actions over these (audited) are workflows.actions.do_disable_workflow and
do_enable_workflow.
"""

from django.db import transaction

from workflows import runtime
from workflows.authoring import registry
from workflows.errors import VersionNotFound, WorkflowDisabled
from workflows.models import WorkflowDeployment


def is_disabled(*, name: str) -> bool:
    return WorkflowDeployment.objects.filter(workflow_name=name, disabled=True).exists()


def check_enabled(*, name: str) -> None:
    """Raise WorkflowDisabled (409 `disabled`) when new instances of `name` are refused."""
    if is_disabled(name=name):
        raise WorkflowDisabled(
            f"workflow {name!r} is disabled: new instances are refused until it is enabled",
            workflow=name,
        )


def check_version(*, name: str, version) -> int:
    """An explicit version for a new instance: registered in this deployment's code, whatever
    the active pointer says. Raises WorkflowNotFound / VersionNotFound (404)."""
    versions = registry.require(name)
    if isinstance(version, bool) or not isinstance(version, int) or version not in versions:
        raise VersionNotFound(
            f"workflow {name!r} has no registered version {version!r} (registered: {versions})",
            versions=versions,
        )
    return version


def set_disabled(*, name: str, disabled: bool):
    """Refuse (or accept again) new instances of `name` from now on, in every process (the flag
    is read at create); running instances continue. Returns (row, changed). The operator
    actions that call it and audit it are workflows.actions.do_disable_workflow / _enable."""
    registry.require(name)
    with transaction.atomic():
        row = WorkflowDeployment.objects.select_for_update().filter(workflow_name=name).first()
        changed = row is None or row.disabled != disabled
        if row is None:  # never created yet: pin the version the first create would activate
            row = WorkflowDeployment(
                workflow_name=name, active_version=registry.first_version(name)
            )
        row.disabled, row.updated_at = disabled, runtime.now()
        if changed:
            row.save()
    return row, changed
