"""Durable workflow engine: authoring API (workflow, NonRetryableError, WaitForEventTimeout)
and the programmatic API (get_workflow). See docs/workflows/engine.md."""

from workflows.authoring import workflow
from workflows.errors import NonRetryableError, WaitForEventTimeout, WorkflowError


def get_workflow(name: str):
    """get_workflow(name) → WorkflowHandle (imported lazily: it needs the models)."""
    from workflows.api import get_workflow as _get_workflow

    return _get_workflow(name)


__all__ = ["workflow", "NonRetryableError", "WaitForEventTimeout", "WorkflowError", "get_workflow"]
