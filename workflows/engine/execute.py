"""Running one claimed task: replay the workflow function against the step cache and persist
every step boundary (persist.commit). The decisions come from workflows.decisions."""

import logging
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError

from ops import tracing
from workflows import decisions, limits, runtime
from workflows.authoring import WorkflowDefinition, WorkflowEvent, registry
from workflows.decisions import StepState
from workflows.engine import compose, persist, wake
from workflows.engine.callbacks import run_inline, run_watched
from workflows.engine.claim import VERSION_MISSING_RETRY, Claim, Loaded, renew
from workflows.engine.code_changes import ReplayGuard, fingerprint_check
from workflows.engine.refusals import Refusals
from workflows.engine.results import error_dict, roundtrip
from workflows.engine.storage_faults import StorageFault
from workflows.engine.waits import Waits
from workflows.errors import (
    InvalidStep,
    NonRetryableError,
    StepFailed,
    WorkflowError,
)
from workflows.fingerprint import code_fingerprint
from workflows.models import StepStatus, StepType, TaskKind
from workflows.step import Diverged, Halt, Refused, Step, Suspend

log = logging.getLogger(__name__)


class Budget:
    """How many step attempts this tick may still start (None = unlimited)."""

    def __init__(self, steps: int | None):
        self.steps = steps

    def take(self) -> bool:
        if self.steps is None:
            return True
        if self.steps <= 0:
            return False
        self.steps -= 1
        return True


NOT_CREATED = "not_created"


class NotCreated(BaseException):  # noqa: N818 - a control-flow signal, not an error
    """The instance a run was to create with its first boundary was not written (persist.
    commit_creating): unwind; the caller creates it the ORM way and runs it again."""


def execute(
    claim: Claim,
    loaded: Loaded,
    *,
    threaded: bool,
    budget: Budget | None = None,
    creating: persist.Creating | None = None,
) -> str:
    """Run the claimed task to its next suspension, completion or failure. Returns what happened.
    `creating`: the instance does not exist yet; its first boundary creates it (NOT_CREATED when
    that wrote nothing)."""
    definition = registry.get(loaded.workflow_name, loaded.version)
    if definition is None and creating is not None:
        return NOT_CREATED  # unregistered since the caller looked: nothing to create
    if definition is None:
        # Unregistered between claim and now (claim checks first): set it aside.
        later = runtime.now() + VERSION_MISSING_RETRY
        persist.commit(claim, persist.Pending(), persist.Requeue(later, kind=claim.kind))
        return "version_missing"
    execution = Execution(claim, loaded, definition, threaded=threaded, budget=budget)
    if creating is not None:
        execution.creating = creating
        try:
            outcome = execution.run()
        except NotCreated:
            return NOT_CREATED
        return NOT_CREATED if execution.not_created else outcome
    limit = max_recovery_attempts()
    if decisions.recovery_exhausted(claim.recovery_attempts, limit):
        return execution.stop_crash_loop(limit)
    return execution.run()


def max_recovery_attempts() -> int:
    return int(getattr(settings, "WORKFLOWS_MAX_RECOVERY_ATTEMPTS", 10))


class Execution(Waits, Refusals):
    def __init__(
        self, claim: Claim, loaded: Loaded, definition: WorkflowDefinition, *, threaded, budget
    ):
        self.claim = claim
        self.loaded = loaded
        self.fn = definition.fn
        self.fingerprint = code_fingerprint(definition.fn)
        self.threaded = threaded
        self.budget = budget or Budget(None)
        self.steps = loaded.steps
        self.pending = persist.Pending()
        self.replaying = bool(self.steps)
        self.counted: set[str] = set()
        self.events: list[dict] | None = None  # loaded on the first wait_for_event
        self.current: tuple[str, int] | None = None  # (step, attempt) while a callback runs
        self.mutations: list | None = None
        self.suspended: Suspend | None = None
        self.fault: StorageFault | None = None  # set once storage failed: the run must stop
        self.awaited_children: list[int] = []  # running children a suspension waits for
        self.guard = ReplayGuard(self.steps)  # replay divergence (engine/code_changes.py)
        self.creating: persist.Creating | None = None  # the first boundary creates the instance
        self.not_created = False  # ... and wrote nothing: every later commit raises NotCreated
        self.refused: dict | None = None  # the database refused a boundary's values (decisions)

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> str:
        try:
            return self._run()
        except Refused as signal:
            return self._fail_refused(signal.error)

    def _run(self) -> str:
        event = WorkflowEvent(
            payload=self.loaded.params,
            instance_id=self.loaded.instance_id,
            timestamp=self.loaded.created_at,
        )
        if not self.steps and self.claim.kind == TaskKind.START:
            self.system("info", f"run {self.claim.run_number} started")
        self._check_code()
        try:
            output = self.fn(event, Step(self))
        except Halt:
            return "halted"
        except StorageFault:
            raise
        except Diverged as signal:
            return self._fail(signal.error)
        except Suspend as signal:
            if self.guard.diverged is not None:
                return self._fail(self.guard.diverged.error)
            return self._suspend(signal)
        except Exception as exc:  # the workflow failed: record it, never crash the runner
            if self.fault is not None:  # workflow code swallowed the fault and failed after it
                raise self.fault from exc
            if self.guard.diverged is not None:
                return self._fail(self.guard.diverged.error)
            if self.suspended is not None:
                return self._suspend(self.suspended)
            return self._fail(exc)
        if self.fault is not None:  # workflow code swallowed the fault with BaseException
            raise self.fault
        if self.refused is not None:  # ... or the refusal
            raise Refused(self.refused)
        if self.guard.diverged is not None:  # workflow code swallowed it with BaseException
            return self._fail(self.guard.diverged.error)
        if self.suspended is not None:  # workflow code swallowed the signal with BaseException
            return self._suspend(self.suspended)
        try:
            output = limits.check_json(output, what="workflow output")
        except WorkflowError as exc:
            return self._fail(exc)
        self.system("info", "instance complete")
        self._commit(persist.Finish(roundtrip(output), wakes_parent=self.loaded.has_parent))
        _wake_tasks_for_parent(self.loaded)
        return "complete"

    def _check_code(self) -> None:
        record, warning = fingerprint_check(
            stored=self.loaded.code_fingerprint,
            current=self.fingerprint,
            instance_pk=self.claim.instance_pk,
            run_number=self.claim.run_number,
        )
        self.pending.fingerprint = record
        if warning:
            self.system("warn", warning)

    def _suspend(self, signal: Suspend) -> str:
        self.system("debug", f"suspended until {signal.run_at.isoformat()} ({signal.kind})")
        outcome = persist.SuspendTo(
            signal.run_at,
            signal.kind,
            signal.wait_event_type,
            children=tuple(self.awaited_children),
        )
        self._commit(outcome)
        return "suspended"

    def stop_crash_loop(self, limit: int) -> str:
        """Error the instance without running workflow code: its last `limit` claims all ended
        without progress. The step it died in is marked errored with the same error."""
        steps = self.steps.values()
        error = decisions.crash_loop_error(steps, run_number=self.claim.run_number, limit=limit)
        now = runtime.now()
        for state in steps:
            if state.status == StepStatus.RUNNING:
                state.status, state.error, state.completed_at = StepStatus.ERRORED, error, now
                self._stage(state)
        return self._fail_with(error)

    def _fail(self, exc: BaseException) -> str:
        return self._fail_with(error_dict(exc, with_traceback=False))  # the step row keeps it

    def _fail_with(self, error: dict) -> str:
        self.system("error", f"instance errored: {error['name']}: {error['message']}"[:2048])
        self._commit(persist.Fail(error, wakes_parent=self.loaded.has_parent))
        _wake_tasks_for_parent(self.loaded)
        return "errored"

    def _commit(self, outcome) -> str:
        """persist.commit, refusing to go on once storage failed in this run."""
        if self.fault is not None:
            raise self.fault
        if self.refused is not None:
            raise Refused(self.refused)
        if self.not_created:
            raise NotCreated()
        try:
            if self.creating is not None and self.creating.claim is None:
                return self._commit_creating(outcome)
            return persist.commit(self.claim, self.pending, outcome)
        except StorageFault as fault:
            self.fault = fault
            raise
        except Exception as exc:
            self.refused = decisions.refused_value(exc)
            if self.refused is None:
                raise
            raise Refused(self.refused) from exc

    def _commit_creating(self, outcome) -> str:
        permission = persist.commit_creating(self.claim, self.creating, self.pending, outcome)
        if permission is None:
            self.not_created = True
            raise NotCreated()
        self.claim = self.creating.claim
        return permission

    def _boundary(self) -> None:
        """Commit what is pending and continue, or stop quietly if we may not."""
        if self._commit(persist.Continue()) != decisions.PROCEED:
            raise Halt()

    def _signal(self, run_at: datetime, kind: str, wait_event_type: str = "") -> Suspend:
        self.suspended = Suspend(run_at, kind, wait_event_type)
        return self.suspended

    def _count(self, name: str) -> None:
        self.counted.add(name)
        most = limits.steps_per_run_max()
        if len(self.counted) > most:
            raise InvalidStep(
                f"a run may have at most {most} steps (WORKFLOWS_STEPS_PER_RUN_MAX); sleeps are "
                "not counted"
            )

    def _existing(self, name: str, step_type: str) -> StepState | None:
        """The stored state of step `name` (None = new work). Every kind of step asks here, so
        every one is checked against the run's history first (engine/code_changes.py)."""
        self.guard.ask(name)
        state = self.steps.get(name)
        if state is not None and state.type != step_type:
            raise InvalidStep(f"step name {name!r} was already used by a {state.type} step")
        return state

    def _stage(self, state: StepState) -> None:
        self.steps[state.name] = state
        self.pending.steps[state.name] = state

    def forget(self, prefix: str) -> None:
        """Delete every step under `prefix` (a trimmed loop iteration) at the next boundary;
        they stop counting toward the steps-per-run limit."""
        for name in [n for n in self.steps if n.startswith(prefix)]:
            del self.steps[name]
            self.pending.steps.pop(name, None)
            self.counted.discard(name)
            self.pending.deleted.add(name)

    # -- step.do -----------------------------------------------------------------------------

    def do(self, name, callback, *, retries, timeout):
        limits.check_step_name(name)
        policy = decisions.retry_policy(retries)
        timeout_ms = (
            decisions.DEFAULT_TIMEOUT_MS if timeout is None else limits.step_timeout_ms(timeout)
        )
        state = self._existing(name, StepType.DO)
        self._count(name)
        now = runtime.now()
        action = decisions.do_action(state, now)
        if isinstance(action, decisions.ReturnCached):
            return action.result
        if isinstance(action, decisions.RaiseCached):
            if state.status != StepStatus.ERRORED:  # interrupted last attempt: store the verdict
                state.status, state.error, state.completed_at = (
                    StepStatus.ERRORED,
                    action.error,
                    now,
                )
                self._stage(state)
            raise StepFailed(name, action.error.get("name", "Error"), action.error.get("message"))
        if isinstance(action, decisions.SuspendUntil):
            raise self._signal(action.at, TaskKind.RETRY)
        return self._attempt(name, state, action.attempt, policy, timeout_ms, callback)

    def _attempt(self, name, state, attempt, policy, timeout_ms, callback):
        now = runtime.now()
        if not self.budget.take():
            self._commit(persist.Requeue(now))
            raise Halt()
        state = state or StepState(name=name, type=StepType.DO, status=StepStatus.RUNNING)
        state.status, state.attempts = StepStatus.RUNNING, attempt
        state.max_attempts, state.timeout_ms = policy.max_attempts, timeout_ms
        state.next_retry_at, state.started_at = None, state.started_at or now
        self._stage(state)
        self._boundary()  # records the attempt; refuses to start it when paused or fenced off
        self.replaying = False
        with tracing.span("workflow.step", self._step_attributes(name, "do", attempt)) as span:
            try:
                return self._run_attempt(name, state, attempt, policy, timeout_ms, callback, span)
            finally:
                retrying = state.status == StepStatus.RETRYING
                tracing.set_attributes(
                    span,
                    {
                        "workflow.step.outcome": state.status,
                        "workflow.step.wait_kind": "retry" if retrying else None,
                    },
                )

    def _run_attempt(self, name, state, attempt, policy, timeout_ms, callback, span):
        self.current, self.mutations = (name, attempt), []
        try:
            value, exc = run_callback(
                callback, timeout_ms=timeout_ms, threaded=self.threaded, claim=self.claim
            )
        finally:
            self.current, mutations, self.mutations = None, self.mutations, None
        if exc is None:
            try:
                value = roundtrip(limits.check_json(value, what=f"result of step {name!r}"))
            except WorkflowError as too_big:
                value, exc = None, NonRetryableError(str(too_big))
        if exc is None:
            return self._succeed(state, value, mutations)
        tracing.fail(span, exc)
        return self._failed(state, attempt, policy, exc)

    def _step_attributes(self, name: str, step_type: str, attempt: int | None = None) -> dict:
        return {
            "workflow": self.loaded.workflow_name,
            "workflow.instance_id": self.loaded.instance_id,
            "workflow.run_number": self.claim.run_number,
            "workflow.step.name": name,
            "workflow.step.type": step_type,
            "workflow.step.attempt": attempt,
        }

    def _trace_wait(self, state: StepState, wait_kind: str) -> None:
        """A sleep or wait_for_event step evaluated as new work: a span saying where it stands
        (waiting/sleeping = the run suspends on it; complete; timed_out)."""
        if tracing.enabled():
            attributes = self._step_attributes(state.name, state.type)
            attributes |= {
                "workflow.step.outcome": state.status,
                "workflow.step.wait_kind": wait_kind,
            }
            with tracing.span("workflow.step", attributes):
                pass

    def _succeed(self, state: StepState, value, mutations: list):
        state.status, state.result, state.error = StepStatus.COMPLETE, value, None
        state.completed_at = runtime.now()
        self._stage(state)
        if mutations:
            # Commit now: the step's writes must land with its completion, not a step later.
            self.pending.mutations.extend(mutations)
            try:
                self._boundary()
            except IntegrityError as exc:
                self.pending.mutations.clear()
                state.status, state.result = StepStatus.ERRORED, None
                state.error = error_dict(exc)
                self._stage(state)
                self.system("error", f"step {state.name!r} failed: {exc}"[:2048])
                raise
        return value

    def _failed(self, state: StepState, attempt: int, policy, exc: BaseException):
        now = runtime.now()
        state.error = error_dict(exc)
        decision = decisions.after_failure(
            policy, attempt=attempt, now=now, non_retryable=isinstance(exc, NonRetryableError)
        )
        if isinstance(decision, decisions.RetryAt):
            state.status, state.next_retry_at = StepStatus.RETRYING, decision.at
            self._stage(state)
            self.system(
                "warn",
                f"step {state.name!r} attempt {attempt} failed: {state.error['name']}: "
                f"{state.error['message']}; retry at {decision.at.isoformat()}"[:2048],
                data={
                    "step": state.name,
                    "attempt": attempt,
                    "retry_at": decision.at.isoformat(),
                    "error": state.error["name"],
                },
            )
            raise self._signal(decision.at, TaskKind.RETRY)
        state.status, state.completed_at = StepStatus.ERRORED, now
        self._stage(state)
        self.system("error", f"step {state.name!r} failed after {attempt} attempt(s)")
        if isinstance(exc, Exception):
            raise exc
        raise StepFailed(state.name, state.error["name"], state.error["message"])

    def register_mutation(self, fn) -> None:
        if self.mutations is None:
            raise InvalidStep("step.tx.mutate may only be called inside a step.do callback")
        self.mutations.append(fn)

    # -- composition (compose.py), for the step object ---------------------------------------

    def parallel(self, step, location, branches, *, until):
        return compose.parallel(step, location, branches, until=until)

    def race(self, step, location, branches):
        return compose.race(step, location, branches)

    def loop(self, step, location, state, body, *, commit_every, keep):
        return compose.loop(step, location, state, body, commit_every=commit_every, keep=keep)

    def run_workflow(self, step, location, workflow_name, params, *, child_id):
        return compose.run_workflow(step, location, workflow_name, params, child_id=child_id)

    # -- logs --------------------------------------------------------------------------------

    def log(self, level: str, message, data, category: str) -> None:
        limits.check_log_message(message)
        limits.check_log_category(category)
        if data is not None:
            data = roundtrip(limits.check_json(data, what="log data"))
        self._log(level, message, data, category)

    def system(self, level: str, message: str, data: dict | None = None) -> None:
        self._log(level, message, data, "system")

    def _log(self, level, message, data, category) -> None:
        step_name, attempt = self.current or ("", None)
        self.pending.logs.append(
            {
                "level": level,
                "category": category,
                "message": message,
                "data": data,
                "step_name": step_name,
                "attempt": attempt,
                "is_replay": self.replaying and self.current is None,
                "request_id": self.loaded.request_id,
                "created_at": runtime.now(),
            }
        )


def _wake_tasks_for_parent(loaded: Loaded) -> None:
    """A finished child made its parent runnable (persist.wake_parent); let a runner know."""
    if loaded.has_parent:
        wake.schedule_wake()


def run_callback(callback, *, timeout_ms: int, threaded: bool, claim: Claim):
    """(value, None) or (None, exception); see engine/callbacks.py for the timeout rules.
    `threaded` = a real runner, whose watchdog thread renews the lease while the step runs."""
    if not threaded:
        return run_inline(callback, timeout_ms=timeout_ms)
    return run_watched(
        callback,
        timeout_ms=timeout_ms,
        renew_every=max(claim.lease_seconds / 3, 0.05),
        renew=lambda: renew(claim),
    )
