"""Hostile JSON on the JSON endpoints: refused as 400 invalid_json with a reason, never a 500,
never silently half-accepted; params, event payloads and step results obey the same rules."""

import pytest

from ops.strict_json import MAX_DEPTH
from tests.workflows.test_http_support import ALL_SCOPES, instance_url, new_key
from workflows import services
from workflows.models import WorkflowEvent, WorkflowInstance

DEEP = b'{"params": ' + b"[" * 1001 + b"]" * 1001 + b"}"
HOSTILE = [
    (DEEP, "too_deep"),
    (b'{"params": {"x": "\\ud800"}}', "invalid_unicode"),
    (b'{"params": {"x": "a\\u0000b"}}', "invalid_unicode"),
    (b'{"params": {"a": 1, "a": 2}}', "duplicate_key"),
    (b'{"params": {"x": NaN}}', "non_finite_number"),
    (b'{"params": {"x": 1e400}}', "non_finite_number"),
    (b'{"params": {"x": "\xff"}}', "invalid_utf8"),
    (b'{"params": ', "syntax"),
]


@pytest.fixture
def ops_api(operator_api):
    return operator_api(*ALL_SCOPES, name="oncall")


def post_raw(client, url, body: bytes, **headers):
    return client.generic("POST", url, body, content_type="application/json", **headers)


@pytest.mark.parametrize(("body", "reason"), HOSTILE)
def test_instance_create_refuses_hostile_json_and_creates_nothing(ops_api, body, reason):
    response = post_raw(
        ops_api, "/v1/workflows/h5-approval/instances", body, HTTP_IDEMPOTENCY_KEY=new_key()
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_json"
    assert response.json()["reason"] == reason
    assert not WorkflowInstance.objects.exists()


@pytest.mark.parametrize(("body", "reason"), HOSTILE)
def test_send_event_refuses_hostile_json(ops_api, body, reason):
    services.instance_create(workflow_name="h5-approval", instance_id="j1")
    body = body.replace(b'"params"', b'"type": "approve", "payload"', 1)
    response = post_raw(ops_api, instance_url("j1", "/events"), body)
    assert (response.status_code, response.json()["reason"]) == (400, reason)
    assert not WorkflowEvent.objects.exists()


def test_operator_endpoints_of_ingest_refuse_duplicate_keys(operator_api):
    ops = operator_api("ingest:admin")
    response = post_raw(ops, "/v1/admin/replay", b'{"ids": [1], "ids": [2]}')
    assert (response.status_code, response.json()["reason"]) == (400, "duplicate_key")


def test_nesting_at_the_documented_limit_is_accepted(ops_api):
    nested = b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1)
    body = b'{"params": ' + nested + b"}"
    response = post_raw(
        ops_api, "/v1/workflows/h5-approval/instances", body, HTTP_IDEMPOTENCY_KEY=new_key()
    )
    assert response.status_code == 201
