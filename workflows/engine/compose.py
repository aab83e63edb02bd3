"""Composition on top of the step cache: parallel branches, races, durable loops and child
workflows. Everything here runs inside one Execution (execute.py).

Branches run cooperatively in one run: each branch executes until it finishes, fails or
suspends (sleep not due, event absent, retry pending, child running); the run then suspends
until the earliest thing any suspended branch needs. A replay re-enters every branch and their
cached steps return at once, so a sleeping or waiting branch never holds the others back. The
row named after the construct (`fan`, `pick`, `count`, `ocr`) records what it decided, so once
decided a replay returns it without entering the branches again.

Locations: branch steps are stored under `name/branch/<step>`, loop iterations under
`name/~i/<step>`; both depend only on names the code gives, never on timing, which keeps them
stable across replays and code changes that keep the names.
"""

import hashlib
import re
from datetime import timedelta
from functools import partial

from django.utils.text import slugify

from workflows import limits, runtime
from workflows.authoring import registry
from workflows.decisions import StepState
from workflows.engine import storage_faults
from workflows.engine.results import error_dict, roundtrip
from workflows.errors import ChildWorkflowError, InvalidStep, ParallelError, WorkflowError
from workflows.models import (
    TERMINAL_STATUSES,
    Status,
    StepStatus,
    StepType,
    TaskKind,
    WorkflowInstance,
)
from workflows.step import Halt, LoopBreak, LoopContinue, Suspend

# Writes a run asks for but the engine does not own: creating a child instance
# ("spawn_child", services.instance_spawn_child) and terminating a race loser's child
# ("terminate_if_running"). workflows.services registers them when it is imported (the app's
# ready() imports it), so the engine never imports the layer above it.
HOOKS: dict = {}

BRANCH_PATTERN = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9-_]*$")
# A suspended parent re-checks its running children this often even if no wake arrives (the
# child's completion wakes it in the same transaction; this is only a safety net).
CHILD_POLL_SECONDS = 3600
LOOP_COMMIT_MAX = 10_000
LOOP_KEEP_MAX = 1_000


# -- branches ------------------------------------------------------------------------------------


def _check_branches(name: str, branches) -> dict:
    if not isinstance(branches, dict) or not branches:
        raise InvalidStep(f"{name!r}: branches must be a non-empty dict of name -> fn(step)")
    for branch, fn in branches.items():
        if not isinstance(branch, str) or len(branch) > 64 or not BRANCH_PATTERN.match(branch):
            raise InvalidStep(f"{name!r}: branch name must match {BRANCH_PATTERN.pattern}")
        if not callable(fn):
            raise InvalidStep(f"{name!r}: branch {branch!r} is not callable")
    return branches


def _run_branch(step, location: str, fn):
    """("done", result) | ("failed", {"name", "message"}) | ("suspended", Suspend)."""
    execution = step._execution
    try:
        value = fn(step._scoped(location + "/"))
    except Halt:
        raise
    except Suspend as signal:
        execution.suspended = None
        return "suspended", signal
    except Exception as exc:
        if execution.suspended is not None:  # branch code caught a Suspend and raised anew
            signal, execution.suspended = execution.suspended, None
            return "suspended", signal
        return "failed", error_dict(exc)
    if execution.suspended is not None:  # branch code swallowed the signal
        signal, execution.suspended = execution.suspended, None
        return "suspended", signal
    try:
        return "done", roundtrip(limits.check_json(value, what=f"result of branch {location!r}"))
    except WorkflowError as exc:
        return "failed", error_dict(exc)


def _suspend_all(execution, signals: list[Suspend]) -> Suspend:
    """One suspension for the run: the earliest wake among the branches; any awaited event
    type wakes it (persist re-checks each type under the task lock)."""
    earliest = min(signals, key=lambda s: s.run_at)
    types = sorted({t for s in signals for t in s.wait_event_type.split("|") if t})
    return execution._signal(earliest.run_at, earliest.kind, "|".join(types))


def _composite(execution, location: str, step_type: str) -> StepState | None:
    limits.check_step_name(location)
    return execution._existing(location, step_type)  # also checks the replay has not diverged


def parallel(step, location: str, branches, *, until=None) -> dict:
    """`until(results)` (optional): asked after each branch that finishes, with the results of
    the branches finished so far; True settles the parallel at once — the branches not finished
    are cancelled like a race's losers and the stored result holds the finished ones only. It
    must depend on `results` alone, so a replay settles at the same point."""
    execution = step._execution
    state = _composite(execution, location, StepType.PARALLEL)
    if state is not None and state.status == StepStatus.COMPLETE:
        return state.result
    if state is not None and state.status == StepStatus.ERRORED:
        raise _parallel_error(location, state.result["errors"], state.result["results"])
    _check_branches(location, branches)
    if until is not None and not callable(until):
        raise InvalidStep(f"{location!r}: until must be callable")
    results, errors, signals = {}, {}, []
    for branch, fn in branches.items():
        outcome, value = _run_branch(step, f"{location}/{branch}", fn)
        if outcome == "done":
            results[branch] = value
        elif outcome == "failed":
            errors[branch] = value
        else:
            signals.append(value)
        if outcome == "done" and not errors and until is not None and until(dict(results)):
            _cancel_losers(execution, location, [b for b in branches if b not in results])
            signals = []
            break
    if signals:
        raise _suspend_all(execution, signals)
    now = runtime.now()
    state = StepState(name=location, type=StepType.PARALLEL, status=StepStatus.COMPLETE)
    state.started_at, state.completed_at = now, now
    if errors:
        state.status, state.result = StepStatus.ERRORED, {"results": results, "errors": errors}
        state.error = {"name": "ParallelError", "message": _parallel_message(location, errors)}
        execution._stage(state)
        raise _parallel_error(location, errors, results)
    state.result = results
    execution._stage(state)
    return results


def _parallel_message(location: str, errors: dict) -> str:
    failed = ", ".join(f"{b}: {e['name']}: {e['message']}" for b, e in errors.items())
    return f"{len(errors)} branch(es) of {location!r} failed: {failed}"[:2048]


def _parallel_error(location: str, errors: dict, results: dict) -> ParallelError:
    return ParallelError(_parallel_message(location, errors), errors=errors, results=results)


def race(step, location: str, branches) -> tuple:
    execution = step._execution
    state = _composite(execution, location, StepType.RACE)
    if state is not None and state.status == StepStatus.COMPLETE:
        return state.result["winner"], state.result["result"]
    if state is not None and state.status == StepStatus.ERRORED:
        raise _parallel_error(location, {state.result["winner"]: state.result["error"]}, {})
    _check_branches(location, branches)
    signals = []
    for branch, fn in branches.items():
        outcome, value = _run_branch(step, f"{location}/{branch}", fn)
        if outcome == "suspended":
            signals.append(value)
            continue
        _cancel_losers(execution, location, [b for b in branches if b != branch])
        now = runtime.now()
        state = StepState(name=location, type=StepType.RACE, status=StepStatus.COMPLETE)
        state.started_at, state.completed_at = now, now
        if outcome == "failed":
            state.status, state.result = StepStatus.ERRORED, {"winner": branch, "error": value}
            state.error = {"name": "ParallelError", "message": f"{branch}: {value['message']}"}
            execution._stage(state)
            raise _parallel_error(location, {branch: value}, {})
        state.result = {"winner": branch, "result": value}
        execution._stage(state)
        return branch, value
    raise _suspend_all(execution, signals)


PENDING_STATUSES = (
    StepStatus.SLEEPING,
    StepStatus.WAITING,
    StepStatus.RETRYING,
    StepStatus.RUNNING,
)


def _cancel_losers(execution, location: str, losers: list[str]) -> None:
    """Clear the losers' pending sleeps, waits and retries (finished steps stay as history).
    Children they started are terminated once this boundary commits."""
    prefixes = tuple(f"{location}/{b}/" for b in losers)
    now = runtime.now()
    for name, state in list(execution.steps.items()):
        if name.startswith(prefixes) and state.status in PENDING_STATUSES:
            if state.type == StepType.CHILD and state.result:
                execution.pending.after_commit.append(
                    partial(
                        HOOKS["terminate_if_running"],
                        workflow_name=state.result["workflow"],
                        instance_id=state.result["id"],
                    )
                )
            state.status, state.completed_at = StepStatus.CANCELLED, now
            state.next_retry_at = None
            execution._stage(state)


# -- loops ---------------------------------------------------------------------------------------


def _check_count(what: str, value, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidStep(f"loop {what} must be an integer from 1 to {maximum}, got {value!r}")
    return value


def loop(step, location: str, initial, body, *, commit_every: int, keep: int):
    execution = step._execution
    _check_count("commit_every", commit_every, LOOP_COMMIT_MAX)
    _check_count("keep", keep, LOOP_KEEP_MAX)
    state = _composite(execution, location, StepType.LOOP)
    if state is not None and state.status == StepStatus.COMPLETE:
        return state.result["value"]
    if state is None:
        value = roundtrip(limits.check_json(initial, what=f"state of loop {location!r}"))
        state = StepState(name=location, type=StepType.LOOP, status=StepStatus.LOOPING)
        state.started_at, state.result = runtime.now(), {"i": 0, "state": value, "trimmed": 0}
    i, value, trimmed = state.result["i"], state.result["state"], state.result["trimmed"]
    while True:
        out = body(step._scoped(f"{location}/~{i}/"), value)
        i += 1
        if isinstance(out, LoopBreak):
            result = roundtrip(limits.check_json(out.value, what=f"value of loop {location!r}"))
            state.status, state.completed_at = StepStatus.COMPLETE, runtime.now()
            state.result = {"value": result, "iterations": i}
            execution._stage(state)
            return result
        if not isinstance(out, LoopContinue):
            raise InvalidStep(
                f"loop {location!r}: the body must return step.loop_continue(state) or "
                f"step.loop_break(value), got {type(out).__name__}"
            )
        value = roundtrip(limits.check_json(out.state, what=f"state of loop {location!r}"))
        if i % commit_every == 0:
            keep_from = max(trimmed, i - keep)
            for old in range(trimmed, keep_from):
                execution.forget(f"{location}/~{old}/")
            trimmed = keep_from
            state.result = {"i": i, "state": value, "trimmed": trimmed}
            execution._stage(state)
            execution._boundary()  # the state and the trim commit together


# -- child workflows -----------------------------------------------------------------------------


def child_instance_id(parent_id: str, location: str) -> str:
    """`<parent id>-<step location as a slug>`, cut to the id limit with a short hash of the
    whole so that two long locations never collide."""
    slug = slugify(location.replace("/", "-").replace("~", "-"))
    full = f"{parent_id}-{slug}" if slug else parent_id
    if len(full) <= limits.ID_MAX and slug:
        return full
    digest = hashlib.sha256(f"{parent_id}\0{location}".encode()).hexdigest()[:10]
    return f"{full[: limits.ID_MAX - 11]}-{digest}"


def run_workflow(step, location: str, workflow_name: str, params, *, child_id):
    execution = step._execution
    state = _composite(execution, location, StepType.CHILD)
    execution._count(location)
    if state is not None and state.status == StepStatus.COMPLETE:
        return state.result["output"]
    if state is not None and state.status == StepStatus.ERRORED:
        raise _child_error(state.result)
    if state is None:
        registry.require(workflow_name)
        child_id = limits.check_instance_id(
            child_id or child_instance_id(execution.loaded.instance_id, location)
        )
        limits.check_json(params, what=f"params of child {location!r}")
        now = runtime.now()
        execution.replaying = False
        # RUNNING until its boundary commits: a paused parent's keep-only commit skips it, so
        # the row never exists without the child.
        state = StepState(name=location, type=StepType.CHILD, status=StepStatus.RUNNING)
        state.started_at = now
        state.result = {"workflow": workflow_name, "id": child_id}
        execution._stage(state)
        parent_pk = execution.claim.instance_pk
        execution.pending.spawns.append(
            lambda: HOOKS["spawn_child"](
                parent_pk=parent_pk,
                workflow_name=workflow_name,
                instance_id=child_id,
                params=params,
            )
        )
        try:
            execution._boundary()
        except WorkflowError as exc:  # the child could not be created (id taken, no version)
            execution.pending.spawns.clear()
            return _child_settled(
                execution,
                state,
                {"status": "not_started", "error": {"name": exc.code, "message": exc.message}},
            )
    with storage_faults.guarded():  # the engine's own read: a fault stops the run, never a branch
        child = (
            WorkflowInstance.objects.filter(
                workflow_name=state.result["workflow"], instance_id=state.result["id"]
            )
            .values("pk", "status", "output", "error")
            .first()
        )
    if child is None:
        return _child_settled(
            execution, state, {"status": "missing", "error": {"name": "ChildMissing"}}
        )
    if child["status"] in TERMINAL_STATUSES:
        return _child_settled(execution, state, child)
    execution.awaited_children.append(child["pk"])
    wake = runtime.now() + timedelta(seconds=CHILD_POLL_SECONDS)
    raise execution._signal(wake, TaskKind.WAKE)


def _child_settled(execution, state: StepState, child: dict):
    info = {"workflow": state.result["workflow"], "id": state.result["id"]}
    state.completed_at = runtime.now()
    if child["status"] == Status.COMPLETE:
        state.status, state.result = StepStatus.COMPLETE, {**info, "output": child["output"]}
        execution._stage(state)
        return child["output"]
    state.status = StepStatus.ERRORED
    state.result = {**info, "status": child["status"], "error": child.get("error")}
    error = _child_error(state.result)
    state.error = {"name": "ChildWorkflowError", "message": str(error)}
    execution._stage(state)
    raise error


def _child_error(result: dict) -> ChildWorkflowError:
    error = result.get("error") or {}
    detail = f": {error.get('name')}: {error.get('message', '')}" if error else ""
    return ChildWorkflowError(
        f"child {result['workflow']}/{result['id']} ended {result['status']}{detail}"[:2048],
        workflow=result["workflow"],
        id=result["id"],
        status=result["status"],
        error=result.get("error"),
    )
