"""step.parallel and step.race: branch-scoped locations, independent progress (a sleeping or
waiting branch never holds the others), ParallelError with every branch's error, race winners
stored and losers cancelled at their next boundary."""

import pytest

from workflows import ParallelError
from workflows.models import WorkflowStep


def _trace(path):
    return path.read_text().split() if path.exists() else []


def _steps(harness, name, instance_id):
    return {s["name"]: s for s in harness.history(name, instance_id)["steps"]}


def test_parallel_with_a_sleeping_and_a_failing_branch(harness, tmp_path):
    trace = tmp_path / "trace"
    harness.create("par-mixed", id="m1", params={"trace": str(trace)})
    # The fast and failing branches ran at once; the sleeper holds neither of them.
    assert sorted(_trace(trace)) == ["broken", "fast"]
    assert harness.status("par-mixed", "m1")["status"] == "waiting"
    harness.advance("1 hour")
    status = harness.status("par-mixed", "m1")
    assert status["status"] == "complete"
    assert status["output"]["results"] == {"fast": "F", "sleepy": "S"}
    assert status["output"]["errors"] == {
        "broken": {"name": "NonRetryableError", "message": "no luck"}
    }
    assert status["output"]["after"] == "A"
    # Each branch callback ran once, though the run replayed after the sleep.
    assert sorted(_trace(trace)) == ["after", "broken", "fast", "sleepy"]
    steps = _steps(harness, "par-mixed", "m1")
    assert {"fan/fast/work", "fan/sleepy/nap", "fan/sleepy/work", "fan/broken/work"} <= set(steps)
    assert steps["fan"]["type"] == "parallel" and steps["fan"]["status"] == "errored"


def test_parallel_branches_progress_independently_and_return_all_results(harness, tmp_path):
    trace = tmp_path / "trace"
    harness.create("par-ok", id="p1", params={"trace": str(trace)})
    assert _trace(trace) == ["a"]
    # The event arrives while b still sleeps: c finishes at once.
    harness.send_event("par-ok", "p1", "go", {"n": 3})
    assert _trace(trace) == ["a", "c"]
    assert harness.status("par-ok", "p1")["status"] == "waiting"
    harness.advance("10 minutes")
    assert harness.status("par-ok", "p1") == {
        "status": "complete",
        "output": {"a": 1, "b": 2, "c": {"n": 3}},
    }
    assert _trace(trace) == ["a", "c", "b"]


def test_parallel_waits_for_the_earliest_branch_need_not_the_latest(harness, tmp_path):
    trace = tmp_path / "trace"
    harness.create("par-ok", id="p2", params={"trace": str(trace), "nap": "5 minutes"})
    task_run_at = harness.instance("par-ok", "p2").task.run_at
    assert task_run_at == harness.now() + __import__("datetime").timedelta(minutes=5)


def test_parallel_result_is_stored_and_replay_does_not_reenter_branches(harness, tmp_path):
    trace = tmp_path / "trace"
    harness.create("par-ok", id="p3", params={"trace": str(trace)})
    harness.send_event("par-ok", "p3", "go", 1)
    harness.advance("10 minutes")
    row = WorkflowStep.objects.get(instance__instance_id="p3", name="fan")
    assert (row.type, row.status, row.result) == ("parallel", "complete", {"a": 1, "b": 2, "c": 1})


def test_parallel_until_settles_on_a_quorum_and_cancels_the_rest(harness, tmp_path):
    trace = tmp_path / "trace"
    harness.create("par-quorum", id="q1", params={"trace": str(trace)})
    harness.send_event("par-quorum", "q1", "c", 3)
    assert harness.status("par-quorum", "q1")["status"] == "waiting"
    harness.send_event("par-quorum", "q1", "b", 2)
    assert harness.status("par-quorum", "q1") == {"status": "complete", "output": {"b": 2, "c": 3}}
    steps = _steps(harness, "par-quorum", "q1")
    assert steps["fan/a/wait"]["status"] == "cancelled"
    assert steps["fan"]["result"] == {"b": 2, "c": 3}
    assert _trace(trace) == ["c", "b"]  # a never ran


def test_parallel_error_exposes_errors_and_results():
    exc = ParallelError("x", errors={"b": {"name": "E", "message": "m"}}, results={"a": 1})
    assert exc.errors == {"b": {"name": "E", "message": "m"}} and exc.results == {"a": 1}


def test_race_where_the_loser_is_mid_sleep(harness, tmp_path):
    trace = tmp_path / "trace"
    harness.create("race-sleep", id="r1", params={"trace": str(trace)})
    assert _trace(trace) == ["slow-early"]
    harness.advance("1 minute")
    assert harness.status("race-sleep", "r1") == {"status": "complete", "output": ["quick", "Q"]}
    steps = _steps(harness, "race-sleep", "r1")
    # What the loser finished before the winner stays in history; its sleep was cleared.
    assert steps["pick/slow/early"]["status"] == "complete"
    assert steps["pick/slow/nap"]["status"] == "cancelled"
    assert "pick/slow/work" not in steps
    assert steps["pick"]["result"] == {"winner": "quick", "result": "Q"}
    harness.advance("2 hours")  # nothing left to wake: the loser never runs again
    assert _trace(trace) == ["slow-early", "quick"]


def test_race_winner_survives_a_restart_from_a_later_step_and_replays_identically(harness):
    harness.create("race-sleep", id="r2")
    harness.advance("1 minute")
    first = harness.status("race-sleep", "r2")
    # A fresh replay of the finished run (restart keeping everything before a missing
    # later step is not possible, so replay through a restart from the race's own row).
    harness.restart("race-sleep", "r2", from_step="pick")
    harness.advance("1 minute")
    assert harness.status("race-sleep", "r2") == first


@pytest.mark.parametrize("bad", [{}, [], {"a/b": lambda s: 1}, {"a": 5}])
def test_invalid_branches_fail_the_instance_with_invalid_step(harness, bad):
    from workflows import workflow
    from workflows.authoring import registry

    @workflow(name="bad-branches")
    def bad_branches(event, step):
        return step.parallel("fan", bad)

    try:
        harness.create("bad-branches", id="b1")
        status = harness.status("bad-branches", "b1")
        assert status["status"] == "errored"
        assert status["error"]["name"] == "InvalidStep"
    finally:
        registry.unregister("bad-branches", 1)


def test_a_race_loser_s_running_child_is_terminated(harness):
    harness.create("race-child", id="rc1")
    assert harness.status("child-ok", "rc1-pick-kid-slow-kid")["status"] == "waiting"
    harness.advance("1 minute")
    assert harness.status("race-child", "rc1") == {
        "status": "complete",
        "output": ["quick", "quick"],
    }
    assert harness.status("child-ok", "rc1-pick-kid-slow-kid")["status"] == "terminated"


def test_events_for_two_waiting_branches_each_wake_the_instance(harness):
    from workflows import workflow
    from workflows.authoring import registry

    @workflow(name="two-waits")
    def two_waits(event, step):
        return step.parallel(
            "fan",
            {
                "x": lambda s: s.wait_for_event("x", type="ex", timeout="1 day")["payload"],
                "y": lambda s: s.wait_for_event("y", type="why", timeout="1 day")["payload"],
            },
        )

    try:
        harness.create("two-waits", id="w1")
        assert harness.instance("two-waits", "w1").task.wait_event_type == "ex|why"
        harness.send_event("two-waits", "w1", "why", 2)
        assert harness.status("two-waits", "w1")["status"] == "waiting"
        harness.send_event("two-waits", "w1", "ex", 1)
        assert harness.status("two-waits", "w1") == {
            "status": "complete",
            "output": {"x": 1, "y": 2},
        }
    finally:
        registry.unregister("two-waits", 1)
