"""The `step` object a workflow function receives, and the suspension signals.

Every method delegates to the running Execution (workflows.engine.execute), which owns the replay
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


class Refused(BaseException):  # noqa: N818
    """The database refused a value of a step boundary (decisions.refused_value): it would be
    refused on every retry, so unwind and fail the instance with that error."""

    def __init__(self, error: dict):
        super().__init__(error["message"])
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


class LoopContinue:
    """What a loop body returns to go on with `state` (step.loop_continue)."""

    __slots__ = ("state",)

    def __init__(self, state):
        self.state = state


class LoopBreak:
    """What a loop body returns to end the loop with `value` (step.loop_break)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class Step:
    """The step API. A branch, loop iteration or the top level each get their own Step whose
    `location` prefixes every step name ("fan/a/" → "fan/a/fetch"), so the same code stores its
    steps under a stable, readable path."""

    def __init__(self, execution, location: str = ""):
        self._execution = execution
        self._location = location
        self.log = StepLogger(execution)
        self.tx = StepTx(execution)

    def _at(self, name: str) -> str:
        if not isinstance(name, str) or not name:
            from workflows.errors import InvalidStep

            raise InvalidStep("step name must be a non-empty string")
        return self._location + name

    def do(self, name: str, callback: Callable[[], object], *, retries=None, timeout=None):
        """Run `callback` once (cached by name for this run) and return its JSON result."""
        return self._execution.do(self._at(name), callback, retries=retries, timeout=timeout)

    def sleep(self, name: str, duration) -> None:
        self._execution.sleep(self._at(name), duration)

    def sleep_until(self, name: str, when) -> None:
        self._execution.sleep_until(self._at(name), when)

    def wait_for_event(self, name: str, *, type: str, timeout="24 hours") -> dict:  # noqa: A002
        """Return {"type", "payload", "timestamp"} of the oldest matching event, or raise
        WaitForEventTimeout once `timeout` has passed."""
        return self._execution.wait_for_event(self._at(name), type=type, timeout=timeout)

    # -- composition (the Execution hands these to workflows.engine.compose) --------------------

    def parallel(self, name: str, branches: dict, *, until=None) -> dict:
        """Run `branches` ({branch: fn(step)}) independently; {branch: result} once all finish,
        or ParallelError (with .errors and .results) when any failed. `until(results)` → True
        settles it early (a quorum): the unfinished branches are cancelled."""
        return self._execution.parallel(self, self._at(name), branches, until=until)

    def race(self, name: str, branches: dict) -> tuple:
        """(winner, result) of the first branch to finish; the others are cancelled."""
        return self._execution.race(self, self._at(name), branches)

    def loop(self, name: str, state, body, *, commit_every: int = 1, keep: int = 10):
        """Call body(step, state) until it returns step.loop_break(value); returns value."""
        return self._execution.loop(
            self, self._at(name), state, body, commit_every=commit_every, keep=keep
        )

    @staticmethod
    def loop_continue(state) -> LoopContinue:
        return LoopContinue(state)

    @staticmethod
    def loop_break(value=None) -> LoopBreak:
        return LoopBreak(value)

    def run_workflow(self, name: str, workflow: str, params=None, *, id: str | None = None):  # noqa: A002
        """Start `workflow` as a child (created with this step's boundary) and return its
        output; ChildWorkflowError when it errors or is terminated."""
        return self._execution.run_workflow(self, self._at(name), workflow, params, child_id=id)

    def _scoped(self, location: str) -> "Step":
        return Step(self._execution, location)
