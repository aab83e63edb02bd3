"""Versions (active pointer, activate, rollback), authentication and scopes, WORKFLOWS_POLICIES,
and the OpenAPI schema listing every route."""

import pytest
from rest_framework.test import APIClient

from ops.errors import ApiError
from ops.models import AuditLog
from tests.workflows.test_http_support import ALL_SCOPES, CREATE, READ, create, instance_url
from workflows.models import WorkflowDeployment, WorkflowInstance


@pytest.fixture
def ops_api(operator_api):
    return operator_api(*ALL_SCOPES, name="oncall")


def test_active_version_defaults_to_the_first_registered(ops_api):
    body = ops_api.get("/v1/workflows/h5-ver/versions/active").json()
    assert (body["workflow_name"], body["active_version"], body["versions"]) == (
        "h5-ver",
        1,
        [1, 2],
    )


def test_activate_switches_new_instances_and_old_ones_keep_their_version(ops_api, harness):
    create(ops_api, "h5-ver", id="old")
    response = ops_api.post("/v1/workflows/h5-ver/versions/2/activate", {}, format="json")
    assert response.status_code == 200
    assert response.json()["active_version"] == 2
    create(ops_api, "h5-ver", id="new")
    harness.run_until_idle()
    outputs = {
        i: ops_api.get(instance_url(i, name="h5-ver")).json()["details"]["output"]
        for i in ("old", "new")
    }
    assert outputs == {"old": "v1", "new": "v2"}
    rollback = ops_api.post("/v1/workflows/h5-ver/versions/1/activate", {}, format="json")
    assert rollback.json()["active_version"] == 1
    activations = AuditLog.objects.filter(action="workflow.version_activate").order_by("id")
    assert [(a.resource, a.result, a.actor.endswith(":oncall")) for a in activations] == [
        ("workflow:h5-ver", "ok", True),
        ("workflow:h5-ver", "ok", True),
    ]


def test_activate_with_a_key_is_audited_once_with_the_key(ops_api):
    ops_api.post(
        "/v1/workflows/h5-ver/versions/2/activate", {}, format="json", HTTP_IDEMPOTENCY_KEY="act-2"
    )
    row = AuditLog.objects.get(action="workflow.version_activate")
    assert (row.idempotency_key, row.metadata) == ("act-2", {"version": 2})


@pytest.mark.parametrize(
    ("url", "status", "code"),
    [
        ("/v1/workflows/h5-ver/versions/7/activate", 404, "version_not_found"),
        ("/v1/workflows/nope/versions/1/activate", 404, "workflow_not_found"),
    ],
)
def test_activate_refusals(ops_api, url, status, code):
    response = ops_api.post(url, {}, format="json")
    assert (response.status_code, response.json()["code"]) == (status, code)
    assert AuditLog.objects.get().result == code


def test_no_active_version_is_409_on_versions_active_and_on_create(ops_api):
    WorkflowDeployment.objects.create(
        workflow_name="h5-ver", active_version=5, updated_at="2026-01-01T00:00:00Z"
    )
    response = ops_api.get("/v1/workflows/h5-ver/versions/active")
    assert (response.status_code, response.json()["code"]) == (409, "no_active_deployment")
    assert create(ops_api, "h5-ver").json()["code"] == "no_active_deployment"


def test_an_instance_whose_version_left_the_code_shows_version_missing(ops_api):
    create(ops_api, "h5-ver", id="ghost-version")
    WorkflowInstance.objects.filter(instance_id="ghost-version").update(version=9)
    body = ops_api.get(instance_url("ghost-version", name="h5-ver")).json()
    assert body["details"]["status"] == "version_missing"
    listed = ops_api.get("/v1/workflows/h5-ver/instances?status=version_missing").json()
    assert [i["id"] for i in listed["instances"]] == ["ghost-version"]


# --- authentication and scopes ---------------------------------------------------------------


def test_no_credentials_is_401_authentication_required(api, db):
    for response in (
        api.get("/v1/workflows"),
        api.post("/v1/workflows/_runner/tick", {}, format="json"),
        api.post("/v1/workflows/h5-approval/instances", {}, format="json"),
    ):
        assert (response.status_code, response.json()["code"]) == (401, "authentication_required")


def test_an_unknown_key_is_401(api, db):
    api.credentials(HTTP_X_ADMIN_KEY="vfk_nope")
    assert api.get("/v1/workflows").status_code == 401


def test_reading_needs_workflows_read(operator_api):
    assert operator_api(READ).get("/v1/workflows").status_code == 200
    response = operator_api(CREATE).get("/v1/workflows")
    assert (response.status_code, response.json()["code"]) == (403, "permission_denied")


def test_a_wildcard_key_may_do_everything(operator_api):
    client = operator_api("*")
    assert create(client, id="o1").status_code == 201
    assert client.post(instance_url("o1", "/pause"), {}, format="json").status_code == 200


def test_a_staff_session_may_do_everything(staff):
    client = APIClient(enforce_csrf_checks=False)
    client.force_login(staff)
    assert create(client, id="o1").status_code == 201
    assert client.post(instance_url("o1", "/terminate"), {}, format="json").status_code == 200
    assert AuditLog.objects.filter(actor="user:charlie").count() == 2


def test_a_logged_in_non_staff_user_is_403(alice):
    client = APIClient()
    client.force_login(alice)
    assert client.get("/v1/workflows").status_code == 403


# --- policies --------------------------------------------------------------------------------

seen = []


def deny_on_friday(request, *, operation, workflow_name, instance_id):
    seen.append((operation, workflow_name, instance_id))
    raise ApiError(423, "change_freeze", "No changes during the freeze.")


def say_no(request, *, operation, workflow_name, instance_id):
    return False


def allow(request, **kwargs):
    return None


def test_a_policy_can_deny_with_its_own_json_error(ops_api, settings):
    settings.WORKFLOWS_POLICIES = {"manage": f"{__name__}.deny_on_friday"}
    create(ops_api, id="o1")
    seen.clear()
    response = ops_api.post(instance_url("o1", "/pause"), {}, format="json")
    assert response.status_code == 423
    assert response.json() == {"code": "change_freeze", "message": "No changes during the freeze."}
    assert seen == [("manage", "h5-approval", "o1")]
    assert ops_api.get(instance_url("o1")).status_code == 200  # reads are another operation


def test_a_policy_returning_false_is_403_and_names_itself(ops_api, settings):
    settings.WORKFLOWS_POLICIES = {"create": [f"{__name__}.allow", f"{__name__}.say_no"]}
    response = create(ops_api, id="o1")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert response.json()["policy"].endswith("say_no")
    assert not WorkflowInstance.objects.exists()


def test_policies_run_only_after_the_scope_check(operator_api, settings):
    settings.WORKFLOWS_POLICIES = {"tick": f"{__name__}.deny_on_friday"}
    seen.clear()
    response = operator_api(READ).post("/v1/workflows/_runner/tick", {}, format="json")
    assert response.status_code == 403
    assert seen == []


# --- schema ----------------------------------------------------------------------------------


def test_the_openapi_schema_documents_every_workflow_route(api, db):
    paths = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    expected = {
        ("/v1/workflows", "get"),
        ("/v1/workflows/{name}/instances", "get"),
        ("/v1/workflows/{name}/instances", "post"),
        ("/v1/workflows/{name}/instances/batch", "post"),
        ("/v1/workflows/{name}/instances/{instance_id}", "get"),
        ("/v1/workflows/{name}/instances/{instance_id}/pause", "post"),
        ("/v1/workflows/{name}/instances/{instance_id}/resume", "post"),
        ("/v1/workflows/{name}/instances/{instance_id}/terminate", "post"),
        ("/v1/workflows/{name}/instances/{instance_id}/restart", "post"),
        ("/v1/workflows/{name}/instances/{instance_id}/events", "post"),
        ("/v1/workflows/{name}/instances/{instance_id}/history", "get"),
        ("/v1/workflows/_runner/tick", "post"),
        ("/v1/workflows/{name}/versions/active", "get"),
        ("/v1/workflows/{name}/versions/{version}/activate", "post"),
    }
    assert expected <= {(p, m) for p, ops in paths.items() for m in ops}
    create_op = paths["/v1/workflows/{name}/instances"]["post"]
    key = next(p for p in create_op["parameters"] if p["name"] == "Idempotency-Key")
    assert key["required"] is True and key["in"] == "header"
    assert {"201", "400", "401", "403", "404", "409"} <= set(create_op["responses"])
