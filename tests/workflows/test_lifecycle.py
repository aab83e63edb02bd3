"""pause, resume, terminate, restart through the harness and the programmatic API."""

import pytest

from workflows import get_workflow, workflow
from workflows.errors import InstanceTerminal

RAN: list[str] = []


@pytest.fixture(autouse=True)
def _reset():
    RAN.clear()


@workflow(name="t-life")
def life(event, step):
    step.do("one", lambda: RAN.append("one"))
    step.sleep("nap", "1 minute")
    step.do("two", lambda: RAN.append("two"))
    return len(RAN)


def test_pause_stops_new_steps_and_the_clock_keeps_running(harness):
    harness.create("t-life", id="p")
    harness.pause("t-life", "p")
    assert harness.status("t-life", "p") == {"status": "paused"}
    harness.advance("5 minutes")  # the sleep falls due while paused
    assert RAN == ["one"]
    harness.resume("t-life", "p")  # … and fires right after resume
    assert RAN == ["one", "two"]
    assert harness.status("t-life", "p")["status"] == "complete"


def test_pause_before_the_first_step_runs_nothing(harness):
    harness.create("t-life", id="q", run=False)
    harness.pause("t-life", "q")
    harness.run_until_idle()
    assert RAN == []
    harness.resume("t-life", "q")
    harness.advance("1 minute")
    assert RAN == ["one", "two"]


def test_resume_on_a_non_paused_instance_does_nothing(harness):
    harness.create("t-life", id="r")
    harness.resume("t-life", "r")
    assert harness.status("t-life", "r") == {"status": "waiting"}


def test_terminate_stops_everything_and_terminal_instances_refuse_pause_and_terminate(harness):
    harness.create("t-life", id="t")
    harness.terminate("t-life", "t")
    harness.advance("1 hour")
    assert RAN == ["one"]
    assert harness.status("t-life", "t") == {"status": "terminated"}
    for action in (harness.pause, harness.terminate):
        with pytest.raises(InstanceTerminal) as err:
            action("t-life", "t")
        assert err.value.code == "instance_terminal"


def test_complete_and_errored_instances_are_terminal_too(harness):
    harness.create("t-life", id="c")
    harness.advance("1 minute")
    with pytest.raises(InstanceTerminal):
        harness.pause("t-life", "c")


def test_restart_runs_again_from_the_start_and_keeps_earlier_runs(harness):
    harness.create("t-life", id="s")
    harness.advance("1 minute")
    harness.restart("t-life", "s")
    assert RAN == ["one", "two", "one"]
    assert harness.status("t-life", "s") == {"status": "waiting"}
    harness.advance("1 minute")
    assert harness.status("t-life", "s") == {"status": "complete", "output": 4}
    run1 = harness.history("t-life", "s", run_number=1)
    run2 = harness.history("t-life", "s")
    assert len(run1["steps"]) == len(run2["steps"]) == 3
    assert any("restarted as run 2" in x["message"] for x in run2["logs"])


def test_restart_of_a_terminated_instance_runs_it_again(harness):
    harness.create("t-life", id="rt")
    harness.terminate("t-life", "rt")
    harness.restart("t-life", "rt")
    harness.advance("1 minute")
    assert harness.status("t-life", "rt")["status"] == "complete"


def test_programmatic_handles_drive_the_same_rules(harness):
    wf = get_workflow("t-life")
    inst = wf.create(id="h", params={"x": 1})
    harness.run_until_idle()
    assert inst.status() == {"status": "waiting"}
    inst.pause()
    assert wf.get("h").status() == {"status": "paused"}
    inst.resume()
    harness.advance("1 minute")
    assert inst.status()["status"] == "complete"
    inst.restart()
    harness.run_until_idle()
    inst.terminate()
    assert inst.status() == {"status": "terminated"}
    with pytest.raises(InstanceTerminal):
        inst.send_event("anything")
