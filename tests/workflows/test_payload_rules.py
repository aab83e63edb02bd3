"""Params, event payloads and step results obey the API's JSON rules (ops/strict_json.py)."""

import pytest

from workflows import services
from workflows.errors import InvalidPayload
from workflows.models import WorkflowInstance


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "params", [{"x": "\ud800"}, {"x": "a\x00"}, {"x": float("nan")}, {"deep": nested(1001)}]
)
def test_programmatic_params_obey_the_same_rules(db, params):
    with pytest.raises(InvalidPayload):
        services.instance_create(workflow_name="noop3", instance_id="p1", params=params)
    assert not WorkflowInstance.objects.exists()


def test_a_step_result_that_is_not_storable_fails_the_instance_clearly(harness):
    harness.create("hostile-result", "r1")
    instance = WorkflowInstance.objects.get(instance_id="r1")
    assert instance.status == "errored"
    assert "invalid_unicode" in instance.error["message"]


def test_an_event_payload_obeys_the_same_rules(harness):
    harness.create("noop3", "e1")
    with pytest.raises(InvalidPayload, match="invalid_unicode"):
        harness.send_event("noop3", "e1", "poke", {"x": "\ud800"})
