"""step.run_workflow: the child is created with the parent's step boundary under a derived id,
its completion wakes the parent, its failure raises ChildWorkflowError, terminating the parent
terminates it; the HTTP detail, console and CLI show the links."""

from tests.workflows import test_cli
from workflows import ChildWorkflowError
from workflows.engine.compose import child_instance_id
from workflows.models import WorkflowInstance

server, wf = test_cli.server, test_cli.wf  # the live-server CLI fixtures


def test_parent_gets_the_childs_output_and_catches_the_failing_childs_error(harness):
    harness.create("parent", id="p1")
    status = harness.status("parent", "p1")
    assert status["status"] == "complete"
    output = status["output"]
    assert output["good"] == {"doubled": 42}
    assert output["bad"]["status"] == "errored"
    assert output["bad"]["error"]["name"] == "NonRetryableError"
    assert output["bad"]["id"] == "p1-try-bad"
    assert harness.status("child-ok", "p1-make-double") == {
        "status": "complete",
        "output": {"doubled": 42},
    }
    kids = WorkflowInstance.objects.filter(parent__instance_id="p1").order_by("id")
    assert [(k.workflow_name, k.instance_id) for k in kids] == [
        ("child-ok", "p1-make-double"),
        ("child-bad", "p1-try-bad"),
    ]


def test_child_error_is_importable_from_workflows_and_carries_the_child():
    exc = ChildWorkflowError("x", workflow="w", id="i", status="errored", error={"name": "E"})
    assert (exc.workflow, exc.id, exc.status, exc.error) == ("w", "i", "errored", {"name": "E"})


def test_a_sleeping_child_wakes_its_parent_when_it_completes(harness):
    harness.create("parent", id="p2", params={"child": {"nap": "10 minutes"}})
    assert harness.status("parent", "p2")["status"] == "waiting"
    assert harness.status("child-ok", "p2-make-double")["status"] == "waiting"
    harness.advance("10 minutes")  # well before the parent's own hourly re-check
    assert harness.status("parent", "p2")["status"] == "complete"


def test_replay_never_creates_a_second_child(harness):
    harness.create("parent", id="p3", params={"child": {"nap": "1 hour"}})
    harness.advance("30 minutes")
    harness.advance("30 minutes")
    assert WorkflowInstance.objects.filter(workflow_name="child-ok").count() == 1


def test_terminating_the_parent_terminates_its_running_children(harness):
    harness.create("parent-long", id="p4", params={"id": "kid-4"})
    assert harness.status("child-ok", "kid-4")["status"] == "waiting"
    harness.terminate("parent-long", "p4")
    assert harness.status("child-ok", "kid-4")["status"] == "terminated"


def test_terminating_a_child_raises_child_workflow_error_in_the_parent(harness):
    harness.create("parent-long", id="p5", params={"id": "kid-5"})
    harness.terminate("child-ok", "kid-5")
    harness.run_until_idle()
    status = harness.status("parent-long", "p5")
    assert status["status"] == "errored"
    assert status["error"]["name"] == "ChildWorkflowError"


def test_restarting_a_parent_restarts_its_finished_child(harness):
    harness.create("parent", id="p6")
    harness.restart("parent", "p6")
    assert harness.status("parent", "p6")["status"] == "complete"
    assert harness.instance("child-ok", "p6-make-double").run_number == 2


def test_long_child_ids_are_cut_with_a_hash():
    long_parent = "p" * 90
    one = child_instance_id(long_parent, "fan/branch-a/some long step name")
    two = child_instance_id(long_parent, "fan/branch-b/some long step name")
    assert len(one) == 100 and len(two) == 100 and one != two
    assert child_instance_id("p1", "fan/a/~3/Get It") == "p1-fan-a-3-get-it"


def test_http_detail_shows_parent_and_children(operator_api, harness):
    from tests.workflows.test_http_support import ALL_SCOPES

    api = operator_api(*ALL_SCOPES, name="oncall")
    harness.create("parent", id="p7")
    body = api.get("/v1/workflows/parent/instances/p7").json()
    assert body["parent"] is None
    assert body["children"] == [
        {"workflow": "child-ok", "id": "p7-make-double", "status": "complete"},
        {"workflow": "child-bad", "id": "p7-try-bad", "status": "errored"},
    ]
    child = api.get("/v1/workflows/child-ok/instances/p7-make-double").json()
    assert child["parent"] == {"workflow": "parent", "id": "p7"}
    assert child["children"] == []


def test_console_links_parent_and_children(client, staff, harness):
    harness.create("parent", id="p8")
    client.force_login(staff)
    parent_row = harness.instance("parent", "p8")
    child_row = harness.instance("child-ok", "p8-make-double")
    page = client.get(f"/admin/workflows/workflowinstance/{parent_row.pk}/change/")
    assert f"/admin/workflows/workflowinstance/{child_row.pk}/change/".encode() in page.content
    page = client.get(f"/admin/workflows/workflowinstance/{child_row.pk}/change/")
    assert f"/admin/workflows/workflowinstance/{parent_row.pk}/change/".encode() in page.content


def test_cli_get_shows_parent_and_children(wf, transactional_db):
    from workflows import get_workflow
    from workflows.engine import tick

    get_workflow("parent").create(id="pc")
    while tick(threaded=False):
        pass
    code, out, err = wf("instances", "get", "-w", "parent", "--id", "pc")
    assert code == 0, err
    assert "child:    child-ok/pc-make-double  complete" in out
    assert "child:    child-bad/pc-try-bad  errored" in out
    code, out, _ = wf("instances", "get", "-w", "child-ok", "--id", "pc-make-double")
    assert "parent:   parent/pc" in out


def test_a_child_finishing_while_its_parent_is_paused_is_seen_on_resume(harness):
    harness.create("parent", id="p9", params={"child": {"nap": "10 minutes"}})
    harness.pause("parent", "p9")
    harness.advance("10 minutes")
    assert harness.status("child-ok", "p9-make-double")["status"] == "complete"
    assert harness.status("parent", "p9")["status"] == "paused"
    harness.resume("parent", "p9")
    assert harness.status("parent", "p9")["status"] == "complete"
