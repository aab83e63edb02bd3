"""Instance actions (pause/resume/terminate/restart), events, the runner tick and the audit
rows every mutation writes."""

import pytest

from ops.models import AuditLog
from tests.workflows.test_http_support import ALL_SCOPES, EVENTS, MANAGE, create, instance_url
from workflows.models import WorkflowEvent, WorkflowInstance


@pytest.fixture
def ops_api(operator_api):
    return operator_api(*ALL_SCOPES, name="oncall")


@pytest.fixture
def waiting(ops_api, harness):
    """An h5-approval instance "o1" waiting for its approve event."""
    create(ops_api, id="o1", params={"order": 1})
    harness.run_until_idle()
    return "o1"


def act(client, action, instance_id="o1", **extra):
    return client.post(instance_url(instance_id, f"/{action}"), {}, format="json", **extra)


def test_pause_resume_terminate_answer_ok_and_details(ops_api, waiting):
    assert act(ops_api, "pause").json() == {"ok": True, "details": {"status": "paused"}}
    assert act(ops_api, "resume").json() == {"ok": True, "details": {"status": "active"}}
    assert act(ops_api, "terminate").json() == {"ok": True, "details": {"status": "terminated"}}


def test_resume_on_a_running_instance_does_nothing(ops_api, waiting):
    assert act(ops_api, "resume").json() == {"ok": True, "details": {"status": "waiting"}}


@pytest.mark.parametrize("action", ["pause", "terminate"])
def test_pause_or_terminate_a_finished_instance_is_409_instance_terminal(ops_api, waiting, action):
    act(ops_api, "terminate")
    response = act(ops_api, action)
    assert (response.status_code, response.json()["code"]) == (409, "instance_terminal")


def test_restart_starts_a_new_run_that_the_runner_picks_up(ops_api, waiting, harness):
    act(ops_api, "terminate")
    response = act(ops_api, "restart")
    assert response.json() == {"ok": True, "details": {"status": "active"}}
    harness.run_until_idle()
    body = ops_api.get(instance_url("o1")).json()
    assert (body["details"]["status"], body["meta"]["run_number"]) == ("waiting", 2)


def test_actions_on_an_unknown_instance_are_404(ops_api):
    response = act(ops_api, "pause", "ghost")
    assert (response.status_code, response.json()["code"]) == (404, "instance_not_found")


def test_an_event_completes_the_waiting_instance(ops_api, waiting, harness):
    response = ops_api.post(
        instance_url("o1", "/events"), {"type": "approve", "payload": {"by": "ann"}}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {"details": {"status": "waiting"}}
    harness.run_until_idle()
    assert ops_api.get(instance_url("o1")).json()["details"] == {
        "status": "complete",
        "output": {"order": 1, "approved_by": "ann"},
    }


def test_two_identical_events_without_a_key_are_two_events(ops_api, waiting):
    for _ in range(2):
        ops_api.post(instance_url("o1", "/events"), {"type": "noise"}, format="json")
    assert WorkflowEvent.objects.filter(type="noise").count() == 2


def test_the_same_event_with_the_same_key_is_stored_once(ops_api, waiting):
    for _ in range(2):
        response = ops_api.post(
            instance_url("o1", "/events"),
            {"type": "noise"},
            format="json",
            HTTP_IDEMPOTENCY_KEY="e1",
        )
        assert response.status_code == 200
    assert WorkflowEvent.objects.filter(type="noise").count() == 1
    assert response["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"type": "bad type!"}, "invalid_event_type"),
        ({"type": "x" * 101}, "invalid_event_type"),
        ({"type": 3}, "invalid_request"),
        ({}, "invalid_request"),
    ],
)
def test_bad_event_types_are_400(ops_api, waiting, body, code):
    response = ops_api.post(instance_url("o1", "/events"), body, format="json")
    assert (response.status_code, response.json()["code"]) == (400, code)


def test_an_event_to_a_finished_instance_is_409(ops_api, waiting):
    act(ops_api, "terminate")
    response = ops_api.post(instance_url("o1", "/events"), {"type": "approve"}, format="json")
    assert (response.status_code, response.json()["code"]) == (409, "instance_terminal")


def test_an_event_never_creates_an_instance(ops_api):
    response = ops_api.post(instance_url("ghost", "/events"), {"type": "approve"}, format="json")
    assert (response.status_code, response.json()["code"]) == (404, "instance_not_found")
    assert not WorkflowInstance.objects.exists()


def test_tick_runs_due_work_and_reports_how_much(ops_api):
    create(ops_api, id="o1")
    create(ops_api, id="o2")
    response = ops_api.post("/v1/workflows/_runner/tick", {"max_instances": 1}, format="json")
    assert response.json() == {"processed": 1}
    assert ops_api.post("/v1/workflows/_runner/tick", {}, format="json").json() == {"processed": 1}
    assert ops_api.post("/v1/workflows/_runner/tick", {}, format="json").json() == {"processed": 0}
    assert set(WorkflowInstance.objects.values_list("status", flat=True)) == {"waiting"}


@pytest.mark.parametrize("body", [{"max_instances": 0}, {"max_steps": "many"}, [1]])
def test_tick_rejects_bad_limits(ops_api, body):
    response = ops_api.post("/v1/workflows/_runner/tick", body, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")


# --- audit -----------------------------------------------------------------------------------


def test_every_mutation_writes_an_audit_row_with_who_where_and_how(ops_api, waiting):
    ops_api.post(
        instance_url("o1", "/events"),
        {"type": "approve"},
        format="json",
        HTTP_USER_AGENT="pytest-agent",
        HTTP_X_REQUEST_ID="req-42",
        HTTP_IDEMPOTENCY_KEY="ev-1",
    )
    act(ops_api, "pause")
    act(ops_api, "resume")
    act(ops_api, "terminate")
    act(ops_api, "terminate")  # refused: audited with the code
    act(ops_api, "restart")
    ops_api.post("/v1/workflows/_runner/tick", {}, format="json")

    rows = list(AuditLog.objects.order_by("id"))
    assert [(r.action, r.result) for r in rows] == [
        ("workflow_instance.create", "ok"),
        ("workflow_instance.send_event", "ok"),
        ("workflow_instance.pause", "ok"),
        ("workflow_instance.resume", "ok"),
        ("workflow_instance.terminate", "ok"),
        ("workflow_instance.terminate", "instance_terminal"),
        ("workflow_instance.restart", "ok"),
        ("workflow.runner_tick", "ok"),
    ]
    event = rows[1]
    assert event.actor.startswith("api_key:") and event.actor.endswith(":oncall")
    assert event.resource == "workflow_instance:h5-approval/o1"
    assert (event.ip, event.user_agent, event.request_id) == ("127.0.0.1", "pytest-agent", "req-42")
    assert (event.idempotency_key, event.deduplicated) == ("ev-1", False)
    assert rows[0].idempotency_key  # creation always carries its key
    assert rows[-1].metadata == {"processed": 1}


def test_a_replayed_create_is_audited_as_deduplicated(ops_api):
    for _ in range(2):
        create(ops_api, id="o1", key="same")
    rows = list(AuditLog.objects.filter(action="workflow_instance.create").order_by("id"))
    assert [(r.deduplicated, r.idempotency_key) for r in rows] == [(False, "same"), (True, "same")]


def test_a_refused_create_is_audited_with_its_code(ops_api):
    create(ops_api, id="bad id")
    row = AuditLog.objects.get()
    assert (row.action, row.result) == ("workflow_instance.create", "invalid_instance_id")


# --- scopes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "allowed"), [(MANAGE, "pause"), (EVENTS, "events"), ("workflows:tick", "tick")]
)
def test_each_mutation_needs_its_own_scope(operator_api, waiting, scope, allowed):
    client = operator_api(scope, name="narrow")
    calls = {
        "pause": lambda: act(client, "pause"),
        "events": lambda: client.post(
            instance_url("o1", "/events"), {"type": "noise"}, format="json"
        ),
        "tick": lambda: client.post("/v1/workflows/_runner/tick", {}, format="json"),
        "create": lambda: create(client, id="o9"),
    }
    for name, call in calls.items():
        response = call()
        if name == allowed:
            assert response.status_code == 200, name
        else:
            assert (response.status_code, response.json()["code"]) == (403, "permission_denied")
