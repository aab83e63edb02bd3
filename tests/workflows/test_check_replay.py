"""`manage.py workflows check-replay [--workflow NAME]`: the stored histories of live instances
replayed against the code deployed now, running no step, and the instances whose replay would
raise NonDeterminismError named with the reason."""

import io

import pytest
from django.core.management import call_command

import tests.workflows.rollout_workflows  # noqa: F401 - registers replay-edit, roll-wait
from tests.workflows import rollout_workflows
from workflows import replay_check
from workflows.authoring import WorkflowDefinition, registry
from workflows.models import WorkflowLog, WorkflowStep, WorkflowTask

BODIES_RUN: list[str] = []


def edited(event, step):
    """replay-edit changed in place: a step inserted before the stored "a"."""
    step.do("a0", lambda: BODIES_RUN.append("a0"))
    step.do("a", lambda: BODIES_RUN.append("a"))
    step.wait_for_event("go", type="go", timeout="1 day")
    return step.do("b", lambda: 2)


@pytest.fixture
def edit_in_place():
    """Register other code under replay-edit v1 (as a deploy of an edited file would); the
    original comes back afterwards."""

    def edit(fn):
        registry.register(WorkflowDefinition(name="replay-edit", version=1, fn=fn))

    yield edit
    edit(rollout_workflows.replay_edit)


def check_replay(*args) -> str:
    out = io.StringIO()
    call_command("workflows", "check-replay", *args, stdout=out)
    return out.getvalue()


def test_an_edit_in_place_is_named_with_the_reason_and_no_step_runs(harness, edit_in_place):
    harness.create("replay-edit", "e1")  # step "a" completes, then it waits for "go"
    assert harness.status("replay-edit", "e1")["status"] == "waiting"
    before = (
        list(WorkflowStep.objects.values_list("name", "status", "attempts")),
        WorkflowLog.objects.count(),
        list(WorkflowTask.objects.values_list("run_at", "locked_until", "fencing_token")),
    )
    edit_in_place(edited)
    BODIES_RUN.clear()
    output = check_replay()
    assert output.splitlines() == [
        "replay-edit/e1 run 1 v1: NonDeterminismError: replay asked for step 'a0', but the run's "
        "history has step 'a' next: the workflow's code changed under this instance. Restart "
        "the instance to run the new code from the top, or ship the change as a new version.",
        "checked 1 live instance(s) of 1 workflow(s): 1 would raise NonDeterminismError, "
        "0 would fail",
    ]
    assert BODIES_RUN == []  # no step body ran
    after = (
        list(WorkflowStep.objects.values_list("name", "status", "attempts")),
        WorkflowLog.objects.count(),
        list(WorkflowTask.objects.values_list("run_at", "locked_until", "fencing_token")),
    )
    assert after == before  # nothing written, nothing claimed


def test_an_unchanged_workflow_lists_nothing(harness):
    harness.create("replay-edit", "u1")
    harness.create("roll-wait", "u2")
    assert check_replay().splitlines() == [
        "checked 2 live instance(s) of 2 workflow(s): 0 would raise NonDeterminismError, "
        "0 would fail",
    ]


def test_a_step_body_that_would_run_is_a_stop_not_an_execution(harness, edit_in_place):
    """Every stored step replays; the new step after them would run: the replay stops there."""
    harness.create("replay-edit", "s1")

    def appended(event, step):
        step.do("a", lambda: 1)
        step.wait_for_event("go", type="go", timeout="1 day")
        step.do("new", lambda: BODIES_RUN.append("new"))

    harness.send_event("replay-edit", "s1", "go", run=False)  # the wait now completes on replay
    edit_in_place(appended)
    BODIES_RUN.clear()
    [finding] = replay_check.check(workflow_name="replay-edit")
    assert (finding.verdict, BODIES_RUN) == (replay_check.REPLAYS, [])
    assert finding.code_changed


def test_only_the_named_workflow_is_checked(harness, edit_in_place):
    harness.create("replay-edit", "w1")
    harness.create("roll-wait", "w2")
    edit_in_place(edited)
    output = check_replay("--workflow", "roll-wait")
    assert output.splitlines() == [
        "checked 1 live instance(s) of 1 workflow(s): 0 would raise NonDeterminismError, "
        "0 would fail",
    ]
    assert "replay-edit/w1 run 1 v1: NonDeterminismError" in check_replay(
        "--workflow", "replay-edit"
    )


def test_finished_instances_are_not_checked(harness, edit_in_place):
    harness.create("replay-edit", "done")
    harness.send_event("replay-edit", "done", "go")
    assert harness.status("replay-edit", "done")["status"] == "complete"
    edit_in_place(edited)
    assert replay_check.check() == []


def test_code_that_now_raises_between_steps_would_fail(harness, edit_in_place):
    harness.create("replay-edit", "f1")

    def broken(event, step):
        step.do("a", lambda: 1)
        raise KeyError("upload_id")

    edit_in_place(broken)
    [finding] = replay_check.check()
    assert finding.verdict == replay_check.FAILS
    assert finding.reason == "KeyError: 'upload_id'"
