"""Recovery from the API, the command and the engine's rules: retry now (a step in backoff runs
at once, its attempt count kept), skip wait (a sleep completes now), rerun from a chosen step;
each refused with a 409 code when the instance is not in that state, and each audited once."""

import pytest
from django.core.management import CommandError, call_command

from ops.models import AuditLog
from tests.workflows.test_http_support import ALL_SCOPES
from workflows import actions, workflow
from workflows.errors import NotInBackoff, NotSleeping
from workflows.models import WorkflowStep

CALLS: dict[str, int] = {}


def _count(key: str) -> int:
    CALLS[key] = CALLS.get(key, 0) + 1
    return CALLS[key]


@workflow(name="t-recover-backoff")
def backoff(event, step):
    key = event.payload["key"]

    def flaky():
        if _count(key) == 1:
            raise RuntimeError("the first attempt fails")
        return "fetched"

    return step.do("fetch", flaky, retries={"limit": 5, "delay": "1 hour"})


@workflow(name="t-recover-sleep")
def long_sleep(event, step):
    step.do("before", lambda: 1)
    step.sleep("nap", "1 day")
    return step.do("after", lambda: "woke")


@workflow(name="t-recover-steps")
def three_steps(event, step):
    key = event.payload["key"]
    for name in ("a", "b", "c"):
        step.do(name, lambda name=name: _count(f"{key}:{name}"))
    return "done"


@pytest.fixture(autouse=True)
def _fresh_calls():
    CALLS.clear()


@pytest.fixture
def ops_api(operator_api):
    return operator_api(*ALL_SCOPES, name="oncall")


def url(name: str, instance_id: str, action: str) -> str:
    return f"/v1/workflows/{name}/instances/{instance_id}/{action}"


@pytest.fixture
def in_backoff(harness):
    harness.create("t-recover-backoff", id="b1", params={"key": "b1"})
    assert WorkflowStep.objects.get(name="fetch").status == "retrying"
    return "b1"


@pytest.fixture
def sleeping(harness):
    harness.create("t-recover-sleep", id="s1", params={})
    assert WorkflowStep.objects.get(name="nap").status == "sleeping"
    return "s1"


def audit_rows(action: str):
    return list(AuditLog.objects.filter(action=f"workflow_instance.{action}").order_by("id"))


def test_retry_now_runs_the_step_in_backoff_at_once_and_keeps_its_attempt_count(
    ops_api, harness, in_backoff
):
    response = ops_api.post(url("t-recover-backoff", "b1", "retry-now"), {}, format="json")
    assert response.status_code == 200, response.json()
    harness.run_until_idle()  # the clock has not moved: without retry now nothing would be due
    assert harness.status("t-recover-backoff", "b1") == {"status": "complete", "output": "fetched"}
    assert WorkflowStep.objects.get(name="fetch").attempts == 2


def test_retry_now_is_audited_once_with_the_step_and_attempts(ops_api, in_backoff):
    ops_api.post(url("t-recover-backoff", "b1", "retry-now"), {}, format="json")
    [row] = audit_rows("retry_now")
    assert (row.result, row.resource) == ("ok", "workflow_instance:t-recover-backoff/b1")
    assert row.metadata == {"step": "fetch", "attempts": 1}
    assert row.actor.startswith("api_key:")


def test_retry_now_without_a_step_in_backoff_is_409_not_in_backoff_and_audited(ops_api, sleeping):
    response = ops_api.post(url("t-recover-sleep", "s1", "retry-now"), {}, format="json")
    assert (response.status_code, response.json()["code"]) == (409, "not_in_backoff")
    [row] = audit_rows("retry_now")
    assert row.result == "not_in_backoff"


def test_retry_now_on_a_paused_instance_is_refused(harness, in_backoff):
    harness.pause("t-recover-backoff", "b1")
    with pytest.raises(NotInBackoff):
        actions.do_retry_now(instance=harness.instance("t-recover-backoff", "b1"), actor="x")


def test_skip_wait_completes_the_sleep_now_and_the_run_goes_on(ops_api, harness, sleeping):
    response = ops_api.post(url("t-recover-sleep", "s1", "skip-wait"), {}, format="json")
    assert response.status_code == 200, response.json()
    harness.run_until_idle()
    assert harness.status("t-recover-sleep", "s1") == {"status": "complete", "output": "woke"}
    assert WorkflowStep.objects.get(name="nap").status == "complete"
    [row] = audit_rows("skip_wait")
    assert (row.result, row.metadata) == ("ok", {"step": "nap"})


def test_skip_wait_without_a_sleep_is_409_not_sleeping(ops_api, in_backoff):
    response = ops_api.post(url("t-recover-backoff", "b1", "skip-wait"), {}, format="json")
    assert (response.status_code, response.json()["code"]) == (409, "not_sleeping")


def test_skip_wait_on_a_finished_instance_is_refused(harness, sleeping):
    harness.terminate("t-recover-sleep", "s1")
    with pytest.raises(NotSleeping):
        actions.do_skip_wait(instance=harness.instance("t-recover-sleep", "s1"))


def test_recovery_on_an_unknown_instance_is_404(ops_api, db):
    response = ops_api.post(url("t-recover-sleep", "ghost", "skip-wait"), {}, format="json")
    assert (response.status_code, response.json()["code"]) == (404, "instance_not_found")


def test_rerun_from_a_step_keeps_the_steps_before_it_and_is_audited(ops_api, harness):
    harness.create("t-recover-steps", id="r1", params={"key": "r1"})
    response = ops_api.post(
        url("t-recover-steps", "r1", "restart"), {"from_step": "b"}, format="json"
    )
    assert response.status_code == 200, response.json()
    harness.run_until_idle()
    assert [CALLS["r1:a"], CALLS["r1:b"], CALLS["r1:c"]] == [1, 2, 2]
    [row] = audit_rows("restart")
    assert row.metadata == {"from_step": "b"}


def test_rerun_from_a_step_the_run_never_reached_is_400_unknown_step(ops_api, harness):
    harness.create("t-recover-steps", id="r2", params={"key": "r2"})
    response = ops_api.post(
        url("t-recover-steps", "r2", "restart"), {"from_step": "zzz"}, format="json"
    )
    assert (response.status_code, response.json()["code"]) == (400, "unknown_step")
    assert audit_rows("restart")[0].result == "unknown_step"


def test_the_command_retries_now_and_skips_waits(harness, in_backoff, sleeping):
    call_command("workflows", "retry-now", "--workflow", "t-recover-backoff", "--id", "b1")
    call_command("workflows", "skip-wait", "--workflow", "t-recover-sleep", "--id", "s1")
    harness.run_until_idle()
    assert harness.status("t-recover-backoff", "b1")["status"] == "complete"
    assert harness.status("t-recover-sleep", "s1")["status"] == "complete"
    assert [r.actor for r in audit_rows("retry_now") + audit_rows("skip_wait")] == [
        "system:manage.py",
        "system:manage.py",
    ]


def test_the_command_says_why_a_retry_now_is_refused(harness, sleeping):
    with pytest.raises(CommandError, match="not_in_backoff"):
        call_command("workflows", "retry-now", "--workflow", "t-recover-sleep", "--id", "s1")


@pytest.mark.parametrize(
    ("action", "call"),
    [
        ("workflow_instance.pause", lambda i: actions.do_pause(instance=i, actor="user:ann")),
        ("workflow_instance.resume", lambda i: actions.do_resume(instance=i, actor="user:ann")),
        (
            "workflow_instance.terminate",
            lambda i: actions.do_terminate(instance=i, actor="user:ann"),
        ),
        ("workflow_instance.restart", lambda i: actions.do_restart(instance=i, actor="user:ann")),
        (
            "workflow_instance.send_event",
            lambda i: actions.do_send_event(
                instance=i, event_type="note", payload={"hrv": 41}, actor="user:ann"
            ),
        ),
        (
            "workflow_instance.skip_wait",
            lambda i: actions.do_skip_wait(instance=i, actor="user:ann"),
        ),
        (
            "workflow.version_activate",
            lambda i: actions.do_activate_version(
                workflow_name=i.workflow_name, version=1, actor="user:ann"
            ),
        ),
    ],
)
def test_each_action_writes_exactly_one_audit_row_and_never_a_payload(
    harness, sleeping, action, call
):
    call(harness.instance("t-recover-sleep", "s1"))
    [row] = AuditLog.objects.all()
    assert (row.action, row.result, row.actor) == (action, "ok", "user:ann")
    assert row.resource in ("workflow_instance:t-recover-sleep/s1", "workflow:t-recover-sleep")
    assert "41" not in str(row.metadata) and "hrv" not in str(row.metadata)
