"""The @workflow decorator and the in-process registry of (name, version) definitions.

Workflows are found in `<app>/workflows.py` of installed apps and in settings.WORKFLOWS_MODULES;
both are imported from WorkflowsConfig.ready(). Several versions of a name may be registered;
the database pointer (WorkflowDeployment) decides which one new instances run.
"""

import importlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from workflows.errors import InvalidWorkflowDefinition, WorkflowNotFound

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9-_]*$")
NAME_MAX = 64


@dataclass(frozen=True)
class WorkflowDefinition:
    name: str
    version: int
    fn: Callable


@dataclass(frozen=True)
class WorkflowEvent:
    """What the workflow function receives as `event`."""

    payload: object
    instance_id: str
    timestamp: datetime


class Registry:
    def __init__(self):
        self._defs: dict[tuple[str, int], WorkflowDefinition] = {}
        self._order: list[tuple[str, int]] = []  # registration order: the first is auto-activated
        self._lock = threading.Lock()

    def register(self, definition: WorkflowDefinition) -> None:
        key = (definition.name, definition.version)
        with self._lock:
            if key not in self._defs:
                self._order.append(key)
            self._defs[key] = definition

    def unregister(self, name: str, version: int) -> None:
        """For tests and hot reloads: forget one version."""
        with self._lock:
            self._defs.pop((name, version), None)
            self._order = [k for k in self._order if k != (name, version)]

    def get(self, name: str, version: int) -> WorkflowDefinition | None:
        return self._defs.get((name, version))

    def versions(self, name: str) -> list[int]:
        return sorted(v for n, v in self._defs if n == name)

    def first_version(self, name: str) -> int | None:
        return next((v for n, v in self._order if n == name), None)

    def names(self) -> list[str]:
        return sorted({n for n, _ in self._defs})

    def require(self, name: str) -> list[int]:
        versions = self.versions(name)
        if not versions:
            raise WorkflowNotFound(f"no workflow named {name!r} is registered")
        return versions


registry = Registry()


def workflow(*, name: str, version: int = 1):
    """Register `fn(event, step)` as workflow `name` at `version`."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or len(name) > NAME_MAX:
        raise InvalidWorkflowDefinition(
            f"workflow name {name!r} must match {NAME_PATTERN.pattern} and be ≤ {NAME_MAX} chars"
        )
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidWorkflowDefinition(f"workflow version must be a positive int, got {version!r}")

    def decorate(fn: Callable) -> Callable:
        registry.register(WorkflowDefinition(name=name, version=version, fn=fn))
        fn.workflow_name = name
        fn.workflow_version = version
        return fn

    return decorate


def autodiscover(modules: list[str]) -> None:
    """Import every installed app's `workflows` module, then the configured modules."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("workflows")
    for module in modules:
        importlib.import_module(module)
