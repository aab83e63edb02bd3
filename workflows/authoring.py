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
from datetime import datetime, timedelta

from workflows.errors import InvalidWorkflowDefinition, WorkflowError, WorkflowNotFound

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9-_]*$")
NAME_MAX = 64


@dataclass(frozen=True)
class WorkflowDefinition:
    name: str
    version: int
    fn: Callable
    # Fleet options: cron triggers, a concurrency cap, retention of finished runs.
    schedules: tuple[str, ...] = ()
    schedule_timezone: str = "UTC"
    concurrency: int | None = None
    concurrency_key: str | None = None
    retention: dict[str, timedelta] | None = None  # status -> how long finished runs are kept


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
        self.generation = 0  # bumped on every change (triggers re-sync schedule rows)

    def register(self, definition: WorkflowDefinition) -> None:
        key = (definition.name, definition.version)
        with self._lock:
            if key not in self._defs:
                self._order.append(key)
            self._defs[key] = definition
            self.generation += 1

    def unregister(self, name: str, version: int) -> None:
        """For tests and hot reloads: forget one version."""
        with self._lock:
            self._defs.pop((name, version), None)
            self._order = [k for k in self._order if k != (name, version)]
            self.generation += 1

    def get(self, name: str, version: int) -> WorkflowDefinition | None:
        return self._defs.get((name, version))

    def versions(self, name: str) -> list[int]:
        return sorted(v for n, v in self._defs if n == name)

    def first_version(self, name: str) -> int | None:
        return next((v for n, v in self._order if n == name), None)

    def latest(self, name: str) -> WorkflowDefinition | None:
        """The highest registered version: its fleet options (schedules, cap, retention) are
        the workflow's."""
        versions = self.versions(name)
        return self._defs.get((name, versions[-1])) if versions else None

    def names(self) -> list[str]:
        return sorted({n for n, _ in self._defs})

    def require(self, name: str) -> list[int]:
        versions = self.versions(name)
        if not versions:
            raise WorkflowNotFound(f"no workflow named {name!r} is registered")
        return versions


registry = Registry()


def workflow(
    *,
    name: str,
    version: int = 1,
    schedules: list[str] | tuple[str, ...] = (),
    schedule_timezone: str = "UTC",
    concurrency: int | None = None,
    concurrency_key: str | None = None,
    retention: dict | None = None,
):
    """Register `fn(event, step)` as workflow `name` at `version`.

    schedules: cron expressions (5 fields) evaluated in `schedule_timezone`; each fire time
    creates instance `cron-<UTC YYYYMMDDTHHMMZ>`. concurrency: at most N instances run at once
    (per value of params[concurrency_key] when given). retention: {"complete"|"errored"|
    "terminated": duration} after which finished instances are deleted by the GC."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or len(name) > NAME_MAX:
        raise InvalidWorkflowDefinition(
            f"workflow name {name!r} must match {NAME_PATTERN.pattern} and be ≤ {NAME_MAX} chars"
        )
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidWorkflowDefinition(f"workflow version must be a positive int, got {version!r}")

    fleet = _fleet_options(schedules, schedule_timezone, concurrency, concurrency_key, retention)

    def decorate(fn: Callable) -> Callable:
        registry.register(WorkflowDefinition(name=name, version=version, fn=fn, **fleet))
        fn.workflow_name = name
        fn.workflow_version = version
        return fn

    return decorate


RETENTION_STATUSES = ("complete", "errored", "terminated")


def _fleet_options(schedules, timezone, concurrency, concurrency_key, retention) -> dict:
    from workflows import cron, durations

    if isinstance(schedules, str):
        schedules = [schedules]
    schedules = tuple(cron.check_expression(expr) for expr in schedules)
    cron.check_timezone(timezone)
    if concurrency is not None and (
        not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1
    ):
        raise InvalidWorkflowDefinition(f"concurrency must be a positive int, got {concurrency!r}")
    if concurrency_key is not None and (not isinstance(concurrency_key, str) or not concurrency):
        raise InvalidWorkflowDefinition("concurrency_key needs concurrency=N and a param name")
    return {
        "schedules": schedules,
        "schedule_timezone": timezone,
        "concurrency": concurrency,
        "concurrency_key": concurrency_key,
        "retention": retention_policy(retention, durations),
    }


def retention_policy(retention, durations) -> dict[str, timedelta] | None:
    """{"complete": "30 days", ...} as timedeltas; unknown statuses are a definition error."""
    if retention is None:
        return None
    if not isinstance(retention, dict):
        raise InvalidWorkflowDefinition(f"retention must be a dict, got {retention!r}")
    unknown = set(retention) - set(RETENTION_STATUSES)
    if unknown:
        raise InvalidWorkflowDefinition(
            f"retention keys must be among {', '.join(RETENTION_STATUSES)}, got {sorted(unknown)}"
        )
    try:
        return {status: durations.to_timedelta(value) for status, value in retention.items()}
    except WorkflowError as exc:
        raise InvalidWorkflowDefinition(f"retention: {exc.message}") from None


def autodiscover(modules: list[str]) -> None:
    """Import every installed app's `workflows` module, then the configured modules."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("workflows")
    for module in modules:
        importlib.import_module(module)
