"""Code that changed under a running instance, through the harness: a replay
that diverges from the stored history ends the instance `errored` with NonDeterminismError
before anything new runs; a changed fingerprint only warns (system log, console page)."""

import contextlib

import pytest
from django.urls import reverse

from workflows.authoring import WorkflowDefinition, registry

CALLS: list[str] = []


def call(name: str):
    CALLS.append(name)
    return name


@pytest.fixture(autouse=True)
def _reset_calls():
    CALLS.clear()


def original(event, step):
    step.do("a", lambda: call("a"))
    step.do("b", lambda: call("b"))
    step.sleep("nap", "1 minute")
    return step.do("c", lambda: call("c"))


def b_renamed(event, step):
    step.do("a", lambda: call("a"))
    step.do("b2", lambda: call("b2"))  # renamed under a waiting instance
    step.sleep("nap", "1 minute")
    return step.do("c", lambda: call("c"))


def b_removed(event, step):
    step.do("a", lambda: call("a"))
    step.sleep("nap", "1 minute")
    return step.do("c", lambda: call("c"))


def step_appended(event, step):
    step.do("a", lambda: call("a"))
    step.do("b", lambda: call("b"))
    step.sleep("nap", "1 minute")
    step.do("c", lambda: call("c"))
    return step.do("d", lambda: call("d"))  # new work after the history ends: fine


def message_edited(event, step):
    step.do("a", lambda: call("a"))
    step.do("b", lambda: call("b"))
    step.sleep("nap", "1 minute")
    step.log.info("edited in place")  # same steps, different code
    return step.do("c", lambda: call("c"))


def branch_on_result(event, step):
    # A deterministic branch on a stored result asks for the same names on every replay.
    kind = step.do("a", lambda: call("a"))
    if kind == "a":
        step.do("b", lambda: call("b"))
    else:
        step.do("other", lambda: call("other"))
    step.sleep("nap", "1 minute")
    return step.do("c", lambda: call("c"))


NAME = "t-edited"


@pytest.fixture
def deploy():
    """Register (or replace, as an in-place edit does) the code of t-edited v1."""

    def install(fn):
        registry.register(WorkflowDefinition(name=NAME, version=1, fn=fn))

    yield install
    registry.unregister(NAME, 1)


def start_on(harness, deploy, fn, instance_id="e1"):
    deploy(fn)
    harness.create(NAME, id=instance_id)
    assert harness.status(NAME, instance_id)["status"] == "waiting"
    CALLS.clear()


def step_names(harness, instance_id="e1"):
    return [s["name"] for s in harness.history(NAME, instance_id)["steps"]]


def system_warnings(harness, instance_id="e1"):
    logs = harness.history(NAME, instance_id)["logs"]
    return [x["message"] for x in logs if x["category"] == "system" and x["level"] == "warn"]


def test_a_renamed_step_under_a_waiting_instance_errors_it_with_non_determinism(harness, deploy):
    start_on(harness, deploy, original)
    deploy(b_renamed)
    harness.advance("1 minute")
    status = harness.status(NAME, "e1")
    assert status["status"] == "errored"
    assert status["error"]["name"] == "NonDeterminismError"
    assert "'b'" in status["error"]["message"] and "'b2'" in status["error"]["message"]
    assert CALLS == []  # the renamed step never ran as a new side effect
    assert step_names(harness) == ["a", "b", "nap"]  # the history was not mixed


def test_a_removed_completed_step_is_a_divergence(harness, deploy):
    start_on(harness, deploy, original)
    deploy(b_removed)
    harness.advance("1 minute")
    status = harness.status(NAME, "e1")
    assert status["error"]["name"] == "NonDeterminismError"
    assert "'b'" in status["error"]["message"] and "'c'" in status["error"]["message"]
    assert CALLS == []


def test_a_step_added_after_the_recorded_history_is_not_a_divergence(harness, deploy):
    start_on(harness, deploy, original)
    deploy(step_appended)
    harness.advance("1 minute")
    assert harness.status(NAME, "e1") == {"status": "complete", "output": "d"}
    assert CALLS == ["c", "d"]


def test_a_deterministic_branch_on_a_stored_result_replays_cleanly(harness, deploy):
    start_on(harness, deploy, branch_on_result)
    harness.advance("1 minute")
    assert harness.status(NAME, "e1") == {"status": "complete", "output": "c"}


def test_workflow_code_cannot_swallow_a_non_determinism_error(harness, deploy):
    def swallowing(event, step):
        step.do("a", lambda: call("a"))
        with contextlib.suppress(BaseException):  # what the rules forbid, on purpose
            step.do("b2", lambda: call("b2"))
        step.sleep("nap", "1 minute")
        return step.do("c", lambda: call("c"))

    start_on(harness, deploy, original)
    deploy(swallowing)
    harness.advance("1 minute")
    assert harness.status(NAME, "e1")["error"]["name"] == "NonDeterminismError"
    assert CALLS == []


def test_restart_runs_the_new_code_from_the_top(harness, deploy):
    start_on(harness, deploy, original)
    deploy(b_renamed)
    harness.advance("1 minute")
    harness.restart(NAME, "e1")
    harness.advance("1 minute")
    assert harness.status(NAME, "e1") == {"status": "complete", "output": "c"}
    assert step_names(harness) == ["a", "b2", "nap", "c"]


def test_changed_code_warns_once_in_the_system_log_and_does_not_stop_the_run(harness, deploy):
    def two_naps(event, step):
        step.do("a", lambda: call("a"))
        step.do("b", lambda: call("b"))
        step.sleep("nap", "1 minute")
        step.sleep("nap-2", "1 minute")  # a second resume on the changed code
        return step.do("c", lambda: call("c"))

    start_on(harness, deploy, original)
    deploy(two_naps)
    harness.advance("1 minute")
    harness.advance("1 minute")
    assert harness.status(NAME, "e1") == {"status": "complete", "output": "c"}
    warnings = system_warnings(harness)
    assert len(warnings) == 1
    assert "code changed since this instance started" in warnings[0]


def test_unchanged_code_resumes_without_a_warning(harness, deploy):
    start_on(harness, deploy, original)
    harness.advance("1 minute")
    assert harness.status(NAME, "e1")["status"] == "complete"
    assert system_warnings(harness) == []


def test_restart_records_the_code_it_starts_on(harness, deploy):
    start_on(harness, deploy, original)
    deploy(message_edited)
    harness.restart(NAME, "e1")
    harness.advance("1 minute")
    assert harness.status(NAME, "e1")["status"] == "complete"
    assert system_warnings(harness) == []


def test_the_console_instance_page_says_the_code_changed(harness, deploy, admin_client):
    start_on(harness, deploy, original)
    instance = harness.instance(NAME, "e1")
    page = reverse("admin:workflows_workflowinstance_change", args=[instance.pk])
    assert 'id="code-changed"' not in admin_client.get(page).text
    deploy(message_edited)
    harness.advance("1 minute")
    assert harness.status(NAME, "e1")["status"] == "complete"
    shown = admin_client.get(page).text
    assert 'id="code-changed"' in shown
    assert "code changed since this instance started</b>" in shown
