"""Versions (active pointer, version_missing), creation rules and limits, selectors."""

import pytest

from ops.models import AuditLog
from workflows import actions, get_workflow, selectors, services, workflow
from workflows.authoring import registry
from workflows.errors import (
    InstanceIdAlreadyExists,
    InstanceNotFound,
    InvalidInstanceId,
    InvalidPayload,
    NoActiveDeployment,
    VersionNotFound,
    WorkflowNotFound,
)
from workflows.models import WorkflowDeployment


@workflow(name="t-ver", version=1)
def ver1(event, step):
    step.sleep("nap", "1 minute")
    return step.do("which", lambda: "v1")


@workflow(name="t-ver", version=2)
def ver2(event, step):
    step.sleep("nap", "1 minute")
    return step.do("which", lambda: "v2")


def test_first_registered_version_is_activated_when_no_pointer_exists(harness):
    assert selectors.workflow_summaries()
    harness.create("t-ver", id="a")
    assert WorkflowDeployment.objects.get(workflow_name="t-ver").active_version == 1
    assert harness.instance("t-ver", "a").version == 1


def test_activation_switches_new_instances_while_old_ones_keep_their_version(harness):
    harness.create("t-ver", id="old")
    actions.do_activate_version(workflow_name="t-ver", version=2, actor="user:alice")
    harness.create("t-ver", id="new")
    harness.advance("1 minute")
    assert harness.status("t-ver", "old")["output"] == "v1"
    assert harness.status("t-ver", "new")["output"] == "v2"
    audit = AuditLog.objects.get(action="workflow.version_activate")
    assert audit.actor == "user:alice" and audit.resource == "workflow:t-ver"
    with pytest.raises(VersionNotFound):
        actions.do_activate_version(workflow_name="t-ver", version=9, actor="x")
    summary = next(s for s in selectors.workflow_summaries() if s["name"] == "t-ver")
    assert summary == {"name": "t-ver", "versions": [1, 2], "active_version": 2, "schedules": []}


def test_a_missing_version_is_never_run_and_shows_as_version_missing(harness):
    harness.create("t-ver", id="gone")
    registry.unregister("t-ver", 1)
    try:
        harness.advance("2 minutes")
        assert harness.status("t-ver", "gone") == {"status": "version_missing"}
        assert harness.instance("t-ver", "gone").status == "waiting"
        missing = selectors.instances_for_list(workflow_name="t-ver", status="version_missing")
        assert [i.instance_id for i in missing] == ["gone"]
        with pytest.raises(NoActiveDeployment) as err:  # the pointer names v1, which is gone
            harness.create("t-ver", id="new")
        assert err.value.code == "no_active_deployment"
    finally:
        order = list(registry._order)
        registry.register(registry_def(ver1, 1))
        registry._order = [("t-ver", 1)] + [k for k in order if k != ("t-ver", 1)]
    harness.advance("1 minute")  # the code is back: it runs again
    assert harness.status("t-ver", "gone") == {"status": "complete", "output": "v1"}


def registry_def(fn, version):
    from workflows.authoring import WorkflowDefinition

    return WorkflowDefinition(name="t-ver", version=version, fn=fn)


def test_unknown_workflows_and_instances_are_clear_errors(harness):
    with pytest.raises(WorkflowNotFound) as err:
        get_workflow("nope")
    assert err.value.code == "workflow_not_found" and err.value.status == 404
    with pytest.raises(InstanceNotFound):
        get_workflow("t-ver").get("missing")


@pytest.mark.parametrize("bad_id", ["", "-leading-dash", "has space", "x" * 101, "é"])
def test_instance_ids_must_match_the_pattern(harness, bad_id):
    with pytest.raises(InvalidInstanceId):
        harness.create("noop3", id=bad_id)


def test_ids_are_generated_unique_and_duplicates_are_refused(harness):
    generated = harness.create("noop3")
    assert len(generated) == 32
    assert harness.create("noop3", id="x_1-ok") == "x_1-ok"
    with pytest.raises(InstanceIdAlreadyExists) as err:
        harness.create("noop3", id="x_1-ok")
    assert err.value.status == 409


def test_params_must_be_json_and_at_most_one_mib(harness):
    with pytest.raises(InvalidPayload):
        harness.create("noop3", id="big", params={"x": "y" * (1024 * 1024)})
    with pytest.raises(InvalidPayload):
        harness.create("noop3", id="obj", params={"x": object()})


def test_create_batch_skips_existing_ids_and_leaves_them_out(harness):
    wf = get_workflow("noop3")
    wf.create(id="b1")
    created = wf.create_batch([{"id": "b1"}, {"id": "b2", "params": {"a": 1}}, {"id": "b2"}])
    assert [i.id for i in created] == ["b2"]
    harness.run_until_idle()
    assert wf.get("b2").status() == {"status": "complete", "output": 3}


def test_list_and_detail_selectors_describe_the_current_step(harness):
    services.workflow_version_activate(name="t-ver", version=1)
    harness.create("t-ver", id="d")
    instance = harness.instance("t-ver", "d")
    meta = selectors.instance_meta(instance)
    assert meta["run_number"] == 1 and meta["version"] == 1
    assert meta["current_step"]["name"] == "nap"
    assert meta["current_step"]["type"] == "sleep"
    assert meta["current_step"]["status"] == "sleeping"
    assert meta["current_step"]["wake_at"] is not None
    listed = selectors.instances_for_list(workflow_name="t-ver", status="waiting")
    assert [i.instance_id for i in listed] == ["d"]
    assert selectors.instance_details(instance) == {"status": "waiting"}


def test_restart_and_retries_stay_on_the_instance_version(harness):
    services.workflow_version_activate(name="t-ver", version=1)
    harness.create("t-ver", id="keep")
    services.workflow_version_activate(name="t-ver", version=2)
    harness.restart("t-ver", "keep")
    harness.advance("1 minute")
    assert harness.status("t-ver", "keep")["output"] == "v1"
    assert harness.instance("t-ver", "keep").run_number == 2


def test_a_batch_with_one_bad_id_writes_nothing(harness):
    with pytest.raises(InvalidInstanceId):
        get_workflow("noop3").create_batch([{"id": "fine"}, {"id": "not fine"}])
    assert not selectors.instances_for_list(workflow_name="noop3").exists()
