"""Work done for a user says so: an instance created with `subject` (programmatic create, the
harness, the HTTP API's username, `manage.py workflows create --subject`, `vitalflow-wf instances
create --subject`) carries that user, its children inherit it, and a wipe of the user terminates
the live ones first and then deletes them with every row hanging from them."""

import io

import pytest
from django.core.management import CommandError, call_command

from ingest.actions import do_user_wipe
from ops.models import AuditLog, IdempotencyKey
from tests.workflows.test_cli import server, wf  # noqa: F401 - fixtures
from workflows import get_workflow
from workflows.models import (
    Status,
    WorkflowEvent,
    WorkflowInstance,
    WorkflowLog,
    WorkflowStep,
    WorkflowTask,
)
from workflows.testing import WorkflowHarness

pytestmark = pytest.mark.django_db


def instance(name: str, instance_id: str) -> WorkflowInstance:
    return WorkflowInstance.objects.get(workflow_name=name, instance_id=instance_id)


def test_an_instance_created_for_a_user_carries_them_as_its_subject(harness, alice, bob):
    harness.create("nap-and-event", id="for-alice", subject=alice)
    handle = get_workflow("nap-and-event").create(id="for-bob", subject=bob.pk)
    harness.create("nap-and-event", id="nobodys")
    assert instance("nap-and-event", "for-alice").subject_id == alice.pk
    assert instance("nap-and-event", handle.id).subject_id == bob.pk
    assert instance("nap-and-event", "nobodys").subject_id is None


def test_a_child_instance_inherits_its_parents_subject(harness, alice):
    harness.create("parent-long", id="p1", params={"id": "kid-1"}, subject=alice)
    assert instance("child-ok", "kid-1").subject_id == alice.pk


def test_the_api_takes_the_subject_by_username(operator_api, alice):
    api = operator_api("*")
    answer = api.post(
        "/v1/workflows/nap-and-event/instances",
        {"id": "api-1", "subject": "alice"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-1",
    )
    assert answer.status_code == 201, answer.json()
    assert instance("nap-and-event", "api-1").subject_id == alice.pk


def test_an_unknown_subject_is_a_400_naming_the_problem(operator_api, alice):
    api = operator_api("*")
    answer = api.post(
        "/v1/workflows/nap-and-event/instances",
        {"id": "api-2", "subject": "nobody-by-that-name"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-2",
    )
    assert answer.status_code == 400
    assert answer.json()["code"] == "unknown_subject"
    assert not WorkflowInstance.objects.filter(instance_id="api-2").exists()


def test_the_manage_command_takes_a_subject(alice):
    out = io.StringIO()
    call_command(
        "workflows", "create", "--workflow", "nap-and-event", "--id", "cmd-1",
        "--subject", "alice", stdout=out,
    )  # fmt: skip
    assert instance("nap-and-event", "cmd-1").subject_id == alice.pk
    with pytest.raises(CommandError, match="unknown_subject"):
        call_command(
            "workflows", "create", "--workflow", "nap-and-event", "--subject", "nobody",
            stdout=io.StringIO(),
        )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_the_console_script_takes_a_subject(wf, alice):  # noqa: F811 - the fixture
    code, out, err = wf(
        "instances", "create", "--workflow", "nap-and-event", "--id", "cli-1",
        "--subject", "alice",
    )  # fmt: skip
    assert code == 0, err
    assert instance("nap-and-event", "cli-1").subject_id == alice.pk


def test_a_wipe_terminates_the_users_live_instances_then_deletes_them(harness, alice, bob):
    harness.create("nap-and-event", id="waiting", subject=alice)
    harness.advance("3 seconds")  # past the nap: waiting for its event
    harness.create("parent-long", id="parent", params={"id": "kid"}, subject=alice)
    harness.create("nap-and-event", id="paused", subject=alice)
    harness.pause("nap-and-event", "paused")
    harness.create("nap-and-event", id="bobs", subject=bob)
    alices = list(WorkflowInstance.objects.filter(subject=alice).values_list("pk", flat=True))
    assert len(alices) == 4  # the child too

    counts = do_user_wipe(user=alice, actor="user:charlie")

    # Four live instances; terminating the parent terminated its child with it.
    assert counts["stopped_workflows"] == 3
    assert counts["workflow_instances"] == 4 and counts["workflow_steps"] > 0
    for model in (WorkflowStep, WorkflowEvent, WorkflowLog, WorkflowTask):
        assert not model.objects.filter(instance_id__in=alices).exists()
    assert not WorkflowInstance.objects.filter(pk__in=alices).exists()
    assert instance("nap-and-event", "bobs").status == Status.WAITING  # bob's goes on
    wiped = AuditLog.objects.get(action="user.wipe")
    assert wiped.metadata["counts"]["stopped_workflows"] == 3


def test_a_runner_in_the_middle_of_a_step_stores_nothing_once_the_wipe_came(alice):
    """The wipe lands while the step's callback runs: the runner's boundary write is refused
    (its instance is terminated, then gone) and nothing of the step is written."""
    from workflows import workflow
    from workflows.authoring import registry

    came = []

    @workflow(name="wiped-mid-step")
    def wiped_mid_step(event, step):
        def work():
            do_user_wipe(user=alice, actor="user:charlie")
            came.append(True)
            step.tx.mutate(lambda: came.append("mutation"))
            return {"value": 6.987654}

        return step.do("work", work)

    try:
        with WorkflowHarness() as harness:
            harness.create("wiped-mid-step", id="mid", subject=alice)
    finally:
        registry.unregister("wiped-mid-step", 1)
    assert came == [True]  # the step's own write never ran
    assert not WorkflowInstance.objects.filter(instance_id="mid").exists()
    assert not WorkflowStep.objects.exists()


def test_stored_answers_to_creating_the_users_instances_are_wiped(harness, alice, bob):
    get_workflow("nap-and-event").create(id="alices-1", subject=alice, idempotency_key="a")
    get_workflow("nap-and-event").create(id="bobs-1", subject=bob, idempotency_key="b")
    assert IdempotencyKey.objects.count() == 2
    counts = do_user_wipe(user=alice, actor="user:charlie")
    assert counts["workflow_idempotency_keys"] == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["b"]


def test_the_users_export_holds_their_instances_steps_and_logs(harness, alice, bob):
    import json
    import zipfile

    from ingest.export import user_export_write

    harness.create("sample-steps", id="alices", subject=alice)
    harness.create("sample-steps", id="bobs", subject=bob)
    out = io.BytesIO()
    user_export_write(user=alice, out=out)
    archive = zipfile.ZipFile(out)
    rows = [
        json.loads(line) for line in archive.read("tables/workflow_instances.jsonl").splitlines()
    ]
    assert [(r["instance_id"], r["subject_id"]) for r in rows] == [("alices", alice.pk)]
    steps = archive.read("tables/workflow_steps.jsonl").decode()
    assert steps and all(
        json.loads(line)["instance_id"] == WorkflowInstance.objects.get(instance_id="alices").pk
        for line in steps.splitlines()
    )
    manifest = json.loads(archive.read("manifest.json"))
    assert {"workflow_instances", "workflow_steps", "workflow_logs", "workflow_events"} <= set(
        manifest["tables"]
    )
