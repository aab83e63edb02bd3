"""sleep, sleep_until and wait_for_event through the harness."""

from datetime import timedelta

import pytest

from workflows import WaitForEventTimeout, workflow
from workflows.errors import InstanceNotFound, InstanceTerminal, InvalidEventType


@workflow(name="t-sleep")
def sleep_wf(event, step):
    step.sleep("one", "2 hours")
    step.sleep("two", timedelta(minutes=30))
    return "rested"


def test_sleep_suspends_until_due_and_counts_durations_of_each_form(harness):
    harness.create("t-sleep", id="s")
    assert harness.status("t-sleep", "s")["status"] == "waiting"
    harness.advance("1 hour")
    assert harness.status("t-sleep", "s")["status"] == "waiting"
    harness.advance("1 hour")
    steps = harness.history("t-sleep", "s")["steps"]
    assert [s["status"] for s in steps] == ["complete", "sleeping"]
    harness.advance(30 * 60 * 1000)
    assert harness.status("t-sleep", "s") == {"status": "complete", "output": "rested"}


@workflow(name="t-sleep-until")
def sleep_until_wf(event, step):
    step.sleep_until("past", event.payload["past"])
    step.sleep_until("future", event.payload["future"])
    return "done"


def test_sleep_until_a_past_time_completes_at_once(harness):
    past = (harness.now() - timedelta(days=1)).isoformat()
    future = (harness.now() + timedelta(days=2)).isoformat()
    harness.create("t-sleep-until", id="u", params={"past": past, "future": future})
    steps = harness.history("t-sleep-until", "u")["steps"]
    assert [(s["name"], s["status"]) for s in steps] == [
        ("past", "complete"),
        ("future", "sleeping"),
    ]
    harness.advance("2 days")
    assert harness.status("t-sleep-until", "u")["status"] == "complete"


@workflow(name="t-event")
def event_wf(event, step):
    first = step.wait_for_event("first", type="approval", timeout="1 hour")
    second = step.wait_for_event("second", type="approval", timeout="1 hour")
    # A dict, also readable as attributes (`report.payload`).
    return [first["payload"], second.payload, first["type"], bool(first.timestamp)]


def test_events_are_delivered_oldest_first_and_wake_a_waiting_instance_at_once(harness):
    harness.create("t-event", id="e")
    assert harness.status("t-event", "e")["status"] == "waiting"
    harness.send_event("t-event", "e", "approval", {"n": 1})
    assert harness.history("t-event", "e")["steps"][0]["status"] == "complete"
    harness.send_event("t-event", "e", "approval", {"n": 2})
    assert harness.status("t-event", "e") == {
        "status": "complete",
        "output": [{"n": 1}, {"n": 2}, "approval", True],
    }
    events = harness.history("t-event", "e")["events"]
    assert [e["consumed_by_step"] for e in events] == ["first", "second"]


def test_events_sent_before_the_wait_are_stored_and_delivered_in_order(harness):
    harness.create("t-event", id="early", run=False)
    harness.send_event("t-event", "early", "approval", {"n": "a"}, run=False)
    harness.send_event("t-event", "early", "approval", {"n": "b"}, run=False)
    harness.send_event("t-event", "early", "other", {"n": "c"}, run=False)
    harness.run_until_idle()
    assert harness.status("t-event", "early")["output"][:2] == [{"n": "a"}, {"n": "b"}]


@workflow(name="t-event-timeout")
def event_timeout_wf(event, step):
    try:
        step.wait_for_event("wait", type="never", timeout="10 seconds")
    except WaitForEventTimeout:
        step.log.info("gave up")
        return "timed out"
    return "got it"


def test_wait_for_event_timeout_raises_and_can_be_caught(harness):
    harness.create("t-event-timeout", id="t")
    harness.advance("9 seconds")
    assert harness.status("t-event-timeout", "t")["status"] == "waiting"
    harness.advance("1 second")
    assert harness.status("t-event-timeout", "t") == {"status": "complete", "output": "timed out"}
    assert harness.history("t-event-timeout", "t")["steps"][0]["status"] == "timed_out"


@workflow(name="t-event-uncaught")
def event_uncaught(event, step):
    step.wait_for_event("wait", type="never", timeout=1000)


def test_an_uncaught_event_timeout_errors_the_instance(harness):
    harness.create("t-event-uncaught", id="t")
    harness.advance("1 second")
    assert harness.status("t-event-uncaught", "t")["error"]["name"] == "WaitForEventTimeout"


@pytest.mark.parametrize("timeout", [999, "366 days"])
def test_wait_for_event_timeout_must_be_between_one_second_and_365_days(harness, timeout):
    @workflow(name="t-event-bad-timeout")
    def bad(event, step):
        step.wait_for_event("w", type="x", timeout=timeout)

    harness.create("t-event-bad-timeout", id=f"b{len(str(timeout))}")
    status = harness.status("t-event-bad-timeout", f"b{len(str(timeout))}")
    assert status["status"] == "errored" and "365 days" in status["error"]["message"]


def test_event_rules_type_validation_terminal_and_unknown_instances(harness):
    harness.create("t-event", id="v")
    with pytest.raises(InvalidEventType):
        harness.send_event("t-event", "v", "bad type!")
    with pytest.raises(InvalidEventType):
        harness.send_event("t-event", "v", "x" * 101)
    harness.terminate("t-event", "v")
    with pytest.raises(InstanceTerminal):
        harness.send_event("t-event", "v", "approval")
    with pytest.raises(InstanceNotFound):  # sending never creates an instance
        harness.send_event("t-event", "missing", "approval")


def test_events_of_an_earlier_run_are_not_delivered_after_restart(harness):
    harness.create("t-event", id="r")
    harness.pause("t-event", "r")
    harness.send_event("t-event", "r", "approval", {"old": True})
    harness.restart("t-event", "r")
    assert harness.status("t-event", "r")["status"] == "waiting"
    harness.send_event("t-event", "r", "approval", {"new": 1})
    harness.send_event("t-event", "r", "approval", {"new": 2})
    assert harness.status("t-event", "r")["output"][:2] == [{"new": 1}, {"new": 2}]


def test_events_sent_while_paused_are_kept_and_delivered_after_resume(harness):
    harness.create("t-event", id="pz")
    harness.pause("t-event", "pz")
    harness.send_event("t-event", "pz", "approval", {"n": 1})
    assert harness.history("t-event", "pz")["steps"][0]["status"] == "waiting"
    assert harness.status("t-event", "pz") == {"status": "paused"}
    harness.resume("t-event", "pz")
    assert harness.history("t-event", "pz")["steps"][0]["status"] == "complete"


def test_an_event_that_lands_while_the_run_is_leased_wakes_it_right_after(harness):
    from workflows.engine.claim import claim_next
    from workflows.engine.execute import execute

    harness.create("t-event", id="race", run=False)
    claim, loaded = claim_next(owner="r", lease_seconds=30)
    harness.send_event("t-event", "race", "other", run=False)  # not what it waits for
    assert execute(claim, loaded, threaded=False) == "suspended"
    claim, loaded = claim_next(owner="r", lease_seconds=30) or (None, None)
    assert claim is None  # waiting for "approval" until the timeout
    harness.send_event("t-event", "race", "approval", {"n": 1}, run=False)
    claim, loaded = claim_next(owner="r", lease_seconds=30)
    assert claim.kind == "event"


def test_an_event_sent_after_the_run_looked_is_not_lost_when_it_suspends(harness, monkeypatch):
    from workflows.engine.execute import Execution

    original = Execution._take_event

    def take_then_event_arrives(self, event_type):
        found = original(self, event_type)  # the run looked: nothing there yet
        harness.send_event("t-event", "late", "approval", {"n": 1}, run=False)
        return found

    harness.create("t-event", id="late", run=False)
    monkeypatch.setattr(Execution, "_take_event", take_then_event_arrives)
    harness.tick()
    monkeypatch.setattr(Execution, "_take_event", original)
    task = harness.instance("t-event", "late").task
    assert (task.kind, task.run_at) == ("event", harness.now())  # woke itself at suspension
    harness.run_until_idle()
    assert harness.history("t-event", "late")["steps"][0]["status"] == "complete"
