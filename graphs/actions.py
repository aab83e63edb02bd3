"""Registered python actions: `@graph_action("name")` puts a function in a registry that
definitions refer to by name. Nothing is imported or evaluated from a definition's strings.

    from graphs import graph_action

    @graph_action("labs.out_of_range_markers")
    def out_of_range(input: dict) -> dict:
        ...

The function receives the node's mapped input (a dict) and returns JSON; raising fails the
attempt (the node's retries apply; workflows.NonRetryableError fails it at once).
"""

import re
import threading
from collections.abc import Callable

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$")

_actions: dict[str, Callable] = {}
_lock = threading.Lock()


def graph_action(name: str):
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ValueError(f"graph action name {name!r} must match {NAME_PATTERN.pattern}")

    def decorate(fn: Callable) -> Callable:
        with _lock:
            _actions[name] = fn
        fn.graph_action_name = name
        return fn

    return decorate


def get(name: str) -> Callable | None:
    return _actions.get(name)


def names() -> list[str]:
    return sorted(_actions)


def unregister(name: str) -> None:
    """For tests."""
    with _lock:
        _actions.pop(name, None)
