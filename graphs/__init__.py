"""Graph workflows: versioned definitions as data (nodes + transitions) run on the durable engine.

`graph_action` registers a python action by name; see docs/graphs/README.md. Names load on first
use (PEP 562) so importing the package never pulls in Django models.
"""

_EXPORTS = {"graph_action": "graphs.actions"}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'graphs' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
