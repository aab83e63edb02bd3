"""Durable workflow engine: authoring API (workflow, NonRetryableError, WaitForEventTimeout,
ParallelError, ChildWorkflowError)
and the programmatic API (get_workflow). See docs/workflows/engine.md.

The names load on first use (PEP 562), so `import workflows.cli` (the HTTP-only console
script) does not pull in Django.
"""

_EXPORTS = {
    "workflow": "workflows.authoring",
    "NonRetryableError": "workflows.errors",
    "WaitForEventTimeout": "workflows.errors",
    "WorkflowError": "workflows.errors",
    "ParallelError": "workflows.errors",
    "ChildWorkflowError": "workflows.errors",
}

__all__ = [*_EXPORTS, "get_workflow"]


def get_workflow(name: str):
    """get_workflow(name) → WorkflowHandle; safe to import before Django's apps are ready."""
    from workflows.api import get_workflow as _get_workflow

    return _get_workflow(name)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'workflows' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
