"""Rolling a code workflow out and back without a deploy: an instance on an explicit version
beside the active pointer (API, CLI, Python), and a disabled workflow whose new instances are
refused with 409 `disabled` on every road (API, CLI, Python, cron, child workflows) while the
running ones go on; disable and enable are audited."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

import tests.workflows.rollout_workflows  # noqa: F401 - registers roll-*
from ops.models import AuditLog
from tests.workflows.test_http_support import ALL_SCOPES, READ, create, new_key
from workflows import actions, get_workflow, rollout, services, triggers, workflow
from workflows.authoring import registry
from workflows.errors import IdempotencyConflict, VersionNotFound, WorkflowDisabled
from workflows.models import WorkflowDeployment, WorkflowInstance


@pytest.fixture
def ops_api(operator_api):
    return operator_api(*ALL_SCOPES, name="oncall")


def versions_of(name: str) -> dict:
    return dict(
        WorkflowInstance.objects.filter(workflow_name=name).values_list("instance_id", "version")
    )


# -- a canary on an explicit version -------------------------------------------------------------


def test_an_instance_runs_an_explicit_version_beside_the_active_pointer(harness):
    services.instance_create(workflow_name="h5-ver", instance_id="stable")
    services.instance_create(workflow_name="h5-ver", instance_id="canary", version=2)
    harness.run_until_idle()
    assert harness.status("h5-ver", "stable")["output"] == "v1"
    assert harness.status("h5-ver", "canary")["output"] == "v2"
    assert services.workflow_active_version(name="h5-ver") == 1  # the pointer did not move
    services.instance_create(workflow_name="h5-ver", instance_id="after")
    assert versions_of("h5-ver") == {"stable": 1, "canary": 2, "after": 1}


def test_the_python_api_creates_on_an_explicit_version(harness):
    handle = get_workflow("h5-ver").create(id="py-canary", version=2, idempotency_key="k1")
    harness.run_until_idle()
    assert handle.status() == {"status": "complete", "output": "v2"}
    # The version is one of the arguments a repeated key must match.
    with pytest.raises(IdempotencyConflict):
        get_workflow("h5-ver").create(id="py-canary", version=1, idempotency_key="k1")


def test_the_api_creates_on_an_explicit_version(ops_api):
    response = create(ops_api, "h5-ver", id="api-canary", version=2)
    assert response.status_code == 201
    assert versions_of("h5-ver") == {"api-canary": 2}
    assert ops_api.get("/v1/workflows/h5-ver/versions/active").json()["active_version"] == 1


@pytest.mark.parametrize(
    ("version", "status", "code"),
    [(9, 404, "version_not_found"), ("two", 400, "invalid_request"), (0, 400, "invalid_request")],
)
def test_the_api_refuses_an_unknown_or_malformed_version_with_a_code(
    ops_api, version, status, code
):
    response = create(ops_api, "h5-ver", id="nope", version=version)
    assert (response.status_code, response.json()["code"]) == (status, code)
    assert not WorkflowInstance.objects.filter(instance_id="nope").exists()


def test_the_cli_creates_on_an_explicit_version(db):
    out = io.StringIO()
    call_command(
        "workflows",
        "create",
        "--workflow",
        "h5-ver",
        "--id",
        "cli-canary",
        "--version",
        "2",
        stdout=out,
    )
    assert "(v2)" in out.getvalue()
    assert versions_of("h5-ver") == {"cli-canary": 2}
    with pytest.raises(CommandError, match="version_not_found"):
        call_command("workflows", "create", "--workflow", "h5-ver", "--version", "7")


def test_an_unknown_version_is_refused_in_python(db):
    with pytest.raises(VersionNotFound):
        services.instance_create(workflow_name="h5-ver", version=7)


# -- disable / enable ----------------------------------------------------------------------------


def test_a_disabled_workflow_refuses_new_instances_and_running_ones_continue(harness):
    harness.create("roll-wait", "running")
    actions.do_disable_workflow(name="roll-wait", actor="alice")
    with pytest.raises(WorkflowDisabled) as refused:
        services.instance_create(workflow_name="roll-wait", instance_id="new")
    assert (refused.value.code, refused.value.status) == ("disabled", 409)
    harness.send_event("roll-wait", "running", "go")
    assert harness.status("roll-wait", "running") == {"status": "complete", "output": "two"}
    actions.do_enable_workflow(name="roll-wait", actor="alice")
    harness.create("roll-wait", "after-enable")
    assert harness.status("roll-wait", "after-enable")["status"] == "waiting"


def test_a_disabled_workflow_refuses_canaries_batches_and_python_creates(db):
    actions.do_disable_workflow(name="h5-ver")
    with pytest.raises(WorkflowDisabled):
        services.instance_create(workflow_name="h5-ver", version=2)
    with pytest.raises(WorkflowDisabled):
        services.instance_create_batch(workflow_name="h5-ver", items=[{"id": "b1"}])
    with pytest.raises(WorkflowDisabled):
        get_workflow("h5-ver").create(id="py")
    assert not WorkflowInstance.objects.filter(workflow_name="h5-ver").exists()


def test_the_api_disables_and_enables_and_refuses_creates_with_409_disabled(ops_api):
    response = ops_api.post("/v1/workflows/h5-ver/disable", HTTP_IDEMPOTENCY_KEY=new_key())
    assert response.status_code == 200 and response.json()["disabled"] is True
    refused = create(ops_api, "h5-ver", id="x")
    assert (refused.status_code, refused.json()["code"]) == (409, "disabled")
    response = ops_api.post("/v1/workflows/h5-ver/enable")
    assert response.status_code == 200 and response.json()["disabled"] is False
    assert create(ops_api, "h5-ver", id="x").status_code == 201


def test_disabling_needs_the_manage_scope_and_a_known_workflow(operator_api, ops_api):
    reader = operator_api(READ, name="reader")
    assert reader.post("/v1/workflows/h5-ver/disable").status_code == 403
    response = ops_api.post("/v1/workflows/nope/disable")
    assert (response.status_code, response.json()["code"]) == (404, "workflow_not_found")


def test_disable_and_enable_are_audited(ops_api):
    ops_api.post("/v1/workflows/h5-ver/disable")
    call_command(
        "workflows", "enable", "--workflow", "h5-ver", "--reason", "fixed", stdout=io.StringIO()
    )
    rows = list(AuditLog.objects.filter(resource="workflow:h5-ver").order_by("id"))
    assert [(r.action, r.actor.split(":")[0]) for r in rows] == [
        ("workflow.disable", "api_key"),
        ("workflow.enable", "system"),
    ]
    assert rows[1].metadata == {"changed": True, "reason": "fixed"}


def test_the_cli_disables_and_refuses_creates(db):
    call_command("workflows", "disable", "--workflow", "h5-ver", stdout=io.StringIO())
    assert WorkflowDeployment.objects.get(workflow_name="h5-ver").disabled
    with pytest.raises(CommandError, match="^disabled: "):
        call_command("workflows", "create", "--workflow", "h5-ver", stdout=io.StringIO())


def test_a_child_of_a_disabled_workflow_is_not_started(harness):
    actions.do_disable_workflow(name="roll-child")
    harness.create("roll-parent", "p")
    output = harness.status("roll-parent", "p")["output"]
    assert "disabled" in output["child_failed"]
    assert not WorkflowInstance.objects.filter(workflow_name="roll-child").exists()


def test_a_disabled_workflows_schedule_fires_nothing_and_moves_on(harness):
    @workflow(name="roll-cron", schedules=["*/15 * * * *"])
    def every_quarter(event, step):
        return event.payload

    try:
        harness.run_until_idle()  # first sight: the schedule row is created
        actions.do_disable_workflow(name="roll-cron")
        harness.advance("15 minutes")
        assert not WorkflowInstance.objects.filter(workflow_name="roll-cron").exists()
        actions.do_enable_workflow(name="roll-cron")
        harness.advance("15 minutes")
        assert list(
            WorkflowInstance.objects.filter(workflow_name="roll-cron").values_list(
                "instance_id", flat=True
            )
        ) == ["cron-20260101T1230Z"]
    finally:
        registry.unregister("roll-cron", 1)
        triggers.gate.reset()


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_one_statement_create_sees_a_disable_made_elsewhere():
    """The process remembers the active version and creates in one statement; a disable made
    since (by another process) still refuses the next create."""
    services.instance_create(workflow_name="h5-ver", instance_id="fast-1")  # remembered active
    WorkflowDeployment.objects.filter(workflow_name="h5-ver").update(disabled=True)
    with pytest.raises(WorkflowDisabled):
        services.instance_create(workflow_name="h5-ver", instance_id="fast-2")


def test_the_console_disables_after_a_confirmation_and_enables_again(client, staff):
    client.force_login(staff)
    url = reverse("admin:workflows_switch", args=["disable", "h5-ver"])
    assert "Disable h5-ver?" in client.post(url).content.decode()
    assert not rollout.is_disabled(name="h5-ver")
    page = client.post(url, {"confirm": "yes"}, follow=True).content.decode()
    assert "Disabled h5-ver: new instances are refused." in page and "Enable h5-ver" in page
    assert rollout.is_disabled(name="h5-ver")
    assert AuditLog.objects.get(action="workflow.disable").actor == f"user:{staff.username}"
    enable = reverse("admin:workflows_switch", args=["enable", "h5-ver"])
    client.post(enable, {"confirm": "yes"})
    assert not rollout.is_disabled(name="h5-ver")
