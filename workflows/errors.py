"""Workflow errors: every refusal is a WorkflowError whose class carries its stable `code` and
its HTTP `status` (the API's contract: nothing restates them elsewhere).

WorkflowError derives from ops.errors.ApiError, so the shared DRF exception handler renders it as
`{"code", "message"}` with `status`, and callers outside HTTP simply catch WorkflowError.
"""

from ops.errors import ApiError


class WorkflowError(ApiError):
    code = "workflow_error"
    status = 400

    def __init__(self, message: str, **extra):
        super().__init__(self.status, self.code, message, **extra)


class WorkflowNotFound(WorkflowError):
    code = "workflow_not_found"
    status = 404


class VersionNotFound(WorkflowError):
    code = "version_not_found"
    status = 404


class NoActiveDeployment(WorkflowError):
    code = "no_active_deployment"
    status = 409


class WorkflowDisabled(WorkflowError):
    """New instances of a disabled workflow are refused (workflows.rollout); running ones go on."""

    code = "disabled"
    status = 409


class InstanceNotFound(WorkflowError):
    code = "instance_not_found"
    status = 404


class InstanceIdAlreadyExists(WorkflowError):
    code = "instance_id_already_exists"
    status = 409


class InvalidInstanceId(WorkflowError):
    code = "invalid_instance_id"
    status = 400


class InvalidEventType(WorkflowError):
    code = "invalid_event_type"
    status = 400


class InstanceTerminal(WorkflowError):
    code = "instance_terminal"
    status = 409


class InvalidPayload(WorkflowError):
    """Params, event payloads or step results that are not JSON or exceed 1 MiB."""

    code = "invalid_payload"
    status = 400


class InvalidPriority(WorkflowError):
    code = "invalid_priority"
    status = 400


class InvalidDuration(WorkflowError):
    code = "invalid_duration"
    status = 400


class InvalidStep(WorkflowError):
    """Authoring mistakes found while running: bad step names, options, too many steps."""

    code = "invalid_step"
    status = 400


class InvalidWorkflowDefinition(WorkflowError):
    code = "invalid_workflow"
    status = 400


class InvalidLabels(WorkflowError):
    code = "invalid_labels"
    status = 400


class UnknownStep(WorkflowError):
    """restart(from_step=...) named a step the current run never reached."""

    code = "unknown_step"
    status = 400


class NotInBackoff(WorkflowError):
    """retry-now on an instance whose current run has no step waiting out a retry delay."""

    code = "not_in_backoff"
    status = 409


class NotSleeping(WorkflowError):
    """skip-wait on an instance whose current run has no step sleeping."""

    code = "not_sleeping"
    status = 409


class ActionNotAllowed(WorkflowError):
    """An operator action the instance's status does not allow (workflows.decisions)."""

    code = "action_not_allowed"
    status = 409


class InvalidBulkFilter(WorkflowError):
    code = "invalid_filter"
    status = 400


class BulkJobNotFound(WorkflowError):
    code = "bulk_job_not_found"
    status = 404


class NonRetryableError(Exception):
    """Raise inside a step callback to fail the step at once, without retries."""


class WaitForEventTimeout(Exception):  # noqa: N818 - public name fixed by the spec
    """Raised by step.wait_for_event when no event arrived in time; workflows may catch it."""


class ParallelError(Exception):
    """step.parallel (or a race) whose branch(es) failed after their retries. `errors` maps each
    failed branch to {"name", "message"}; `results` holds the branches that succeeded."""

    def __init__(self, message: str, *, errors: dict, results: dict | None = None):
        super().__init__(message)
        self.errors = errors
        self.results = results or {}


class ChildWorkflowError(Exception):
    """step.run_workflow's child ended errored or terminated. `error` is the child's
    {"name", "message"} (None when terminated); `workflow`, `id`, `status` name the child."""

    def __init__(self, message: str, *, workflow: str, id: str, status: str, error=None):  # noqa: A002
        super().__init__(message)
        self.workflow = workflow
        self.id = id
        self.status = status
        self.error = error


class StepFailed(Exception):  # noqa: N818
    """A step whose retries ran out, replayed from storage: carries the original error's name."""

    def __init__(self, step_name: str, error_name: str, message: str):
        super().__init__(message)
        self.step_name = step_name
        self.error_name = error_name


class StepTimeout(Exception):  # noqa: N818
    """An attempt ran past its timeout; its late result is discarded."""


class NonDeterminismError(Exception):
    """A replay asked for a step its run never stored while stored steps were still to be
    asked for: the code changed under the instance (docs/workflows/faults.md). The instance
    ends `errored` with this name; workflow code cannot catch it."""

    def __init__(self, expected: str, requested: str):
        super().__init__(
            f"replay asked for step {requested!r}, but the run's history has step {expected!r} "
            "next: the workflow's code changed under this instance. Restart the instance to run "
            "the new code from the top, or ship the change as a new version."
        )
        self.expected = expected
        self.requested = requested


class IdempotencyConflict(WorkflowError):
    code = "idempotency_conflict"
    status = 409
