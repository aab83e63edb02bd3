"""The `step` object a workflow function receives, and the suspension signals.

Every method delegates to the running Execution (workflows.runner.execute), which owns the replay
cache and the boundary writes. Suspension unwinds the workflow function with BaseException
subclasses so that `except Exception` in workflow code cannot swallow them.
"""

from collections.abc import Callable
from datetime import datetime


class Suspend(BaseException):  # noqa: N818 - a control-flow signal, not an error
    """The run cannot go on now (sleep not due, event absent, retry pending): unwind and wait."""

    def __init__(self, run_at: datetime, kind: str, wait_event_type: str = ""):
        super().__init__(f"suspend until {run_at.isoformat()}")
        self.run_at = run_at
        self.kind = kind
        self.wait_event_type = wait_event_type


class Halt(BaseException):  # noqa: N818
    """This runner may not go on (lease lost, instance paused/terminated/restarted): stop quietly."""


class Diverged(BaseException):  # noqa: N818
    """The replay left the stored history (NonDeterminismError): unwind and fail the instance
    before anything new runs."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


class StepLogger:
    """step.log.debug/info/warn/error(message, data=None, category="workflow")."""

    def __init__(self, execution):
        self._execution = execution

    def debug(self, message: str, data=None, category: str = "workflow") -> None:
        self._execution.log("debug", message, data, category)

    def info(self, message: str, data=None, category: str = "workflow") -> None:
        self._execution.log("info", message, data, category)

    def warn(self, message: str, data=None, category: str = "workflow") -> None:
        self._execution.log("warn", message, data, category)

    warning = warn

    def error(self, message: str, data=None, category: str = "workflow") -> None:
        self._execution.log("error", message, data, category)


class StepTx:
    """step.tx.mutate(fn): run fn(), inside a step callback, in the transaction that stores the
    step's completion; only for the attempt that succeeds, never on replay."""

    def __init__(self, execution):
        self._execution = execution

    def mutate(self, fn: Callable[[], object]) -> None:
        self._execution.register_mutation(fn)


class Step:
    def __init__(self, execution):
        self._execution = execution
        self.log = StepLogger(execution)
        self.tx = StepTx(execution)

    def do(self, name: str, callback: Callable[[], object], *, retries=None, timeout=None):
        """Run `callback` once (cached by name for this run) and return its JSON result."""
        return self._execution.do(name, callback, retries=retries, timeout=timeout)

    def sleep(self, name: str, duration) -> None:
        self._execution.sleep(name, duration)

    def sleep_until(self, name: str, when) -> None:
        self._execution.sleep_until(name, when)

    def wait_for_event(self, name: str, *, type: str, timeout="24 hours") -> dict:  # noqa: A002
        """Return {"type", "payload", "timestamp"} of the oldest matching event, or raise
        WaitForEventTimeout once `timeout` has passed."""
        return self._execution.wait_for_event(name, type=type, timeout=timeout)
