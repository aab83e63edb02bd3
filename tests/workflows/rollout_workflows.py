"""Workflows for the rollout tests (tests/workflows/test_rollout.py, test_check_replay.py)."""

from workflows import ChildWorkflowError, workflow


@workflow(name="roll-wait")
def wait_for_go(event, step):
    step.do("first", lambda: "one")
    step.wait_for_event("go", type="go", timeout="1 day")
    return step.do("second", lambda: "two")


@workflow(name="roll-child")
def child(event, step):
    return step.do("only", lambda: "child done")


@workflow(name="roll-parent")
def parent(event, step):
    try:
        return step.run_workflow("kid", "roll-child")
    except ChildWorkflowError as exc:
        return {"child_failed": str(exc)}


@workflow(name="replay-edit")
def replay_edit(event, step):
    """Step "a" completes, then the instance waits; test_check_replay edits it in place."""
    step.do("a", lambda: 1)
    step.wait_for_event("go", type="go", timeout="1 day")
    return step.do("b", lambda: 2)
