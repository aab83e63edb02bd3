"""A graph run about a user carries them as its subject (services.run_create(subject=), the API's
username, `vitalflow-wf graphs run --subject`, the demo's run about a lab upload), on the run and
on its instance; a child run inherits it; a wipe of the user terminates their waiting runs and
deletes them with their tokens, events (the context's history), answers and instances."""

import io

import pytest
from django.core.management import call_command

from demo.graph_demo import BINDING
from graphs import services
from graphs.models import GraphAnswer, GraphRun, GraphRunEvent, GraphToken
from ingest.actions import do_user_wipe
from tests.graphs.helpers import doc, node
from tests.graphs.test_child_graphs import child_doc, parent_doc, publish_as
from tests.graphs.test_cli import vf  # noqa: F401 - fixture
from workflows.models import WorkflowInstance, WorkflowStep

pytestmark = pytest.mark.django_db


def gate_doc():
    return doc(
        [
            node("load", "set", action={"values": {"/value": {"path": "/input/value"}}}),
            node("ack", "human", action={"event_type": "ok"}, output_mapping={"/ack": ""}),
        ],
        [{"from": "load", "to": "ack"}],
        name="gate",
    )


def test_a_run_created_for_a_user_carries_them_on_the_run_and_its_instance(harness, alice):
    publish_as(gate_doc(), "gate")
    run = services.run_create(binding_name="gate", run_input={"value": 1}, subject=alice)
    assert run.subject_id == alice.pk and run.instance.subject_id == alice.pk
    nobodys = services.run_create(binding_name="gate", run_input={"value": 2})
    assert nobodys.subject_id is None and nobodys.instance.subject_id is None


def test_a_child_run_inherits_its_parents_subject(harness, alice):
    publish_as(child_doc(), "child-b")
    publish_as(parent_doc(), "parent-b")
    services.run_create(binding_name="parent-b", run_input={"n": 2}, subject=alice)
    harness.run_until_idle()
    child = GraphRun.objects.get(binding_name="child-b")
    assert child.subject_id == alice.pk and child.instance.subject_id == alice.pk


def test_the_api_takes_the_subject_by_username_and_refuses_an_unknown_one(
    harness, operator_api, alice
):
    publish_as(gate_doc(), "gate")
    api = operator_api("graphs:run")
    url = "/v1/graphs/bindings/gate/runs"
    body = {"input": {"value": 1}, "subject": "alice"}
    answer = api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="r-1")
    assert answer.status_code == 201, answer.json()
    assert GraphRun.objects.get(run_id=answer.json()["id"]).subject_id == alice.pk
    body["subject"] = "nobody-by-that-name"
    refused = api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="r-2")
    assert refused.status_code == 400 and refused.json()["code"] == "unknown_subject"
    assert GraphRun.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_console_script_starts_a_run_for_a_subject(vf, alice):  # noqa: F811 - the fixture
    publish_as(gate_doc(), "gate")
    code, out, err = vf(
        "graphs", "run", "--binding", "gate", "--input", '{"value": 1}', "--subject", "alice"
    )
    assert code == 0, err
    assert GraphRun.objects.get().subject_id == alice.pk


def test_the_demo_run_about_a_users_upload_is_theirs(harness, web, settings):
    settings.GRAPHS_HTTP_SECRETS = {"CLINIC_TOKEN": "t0ken"}
    call_command("labs_graph_demo", hook_url="https://hooks.test/h", stdout=io.StringIO())
    run = GraphRun.objects.get(binding_name=BINDING)
    assert run.subject is not None and run.subject.username == "demo"


def test_a_wipe_stops_the_users_waiting_run_and_deletes_it_with_its_history(harness, alice, bob):
    publish_as(gate_doc(), "gate")
    alices = services.run_create(binding_name="gate", run_input={"value": 6.9}, subject=alice)
    bobs = services.run_create(binding_name="gate", run_input={"value": 7.1}, subject=bob)
    harness.run_until_idle()
    assert harness.status("graph-run", alices.run_id)["status"] == "waiting"
    instance_pk = alices.instance_id

    counts = do_user_wipe(user=alice, actor="user:charlie")

    assert counts["stopped_workflows"] == 1
    assert counts["graph_runs"] == 1 and counts["graph_tokens"] >= 2
    assert counts["graph_run_events"] > 0 and counts["workflow_instances"] == 1
    assert not GraphRun.objects.filter(pk=alices.pk).exists()
    for model in (GraphToken, GraphRunEvent, GraphAnswer):
        assert not model.objects.filter(run_id=alices.pk).exists()
    assert not WorkflowInstance.objects.filter(pk=instance_pk).exists()
    assert not WorkflowStep.objects.filter(instance_id=instance_pk).exists()
    assert harness.status("graph-run", bobs.run_id)["status"] == "waiting"  # bob's waits on
    assert GraphToken.objects.filter(run=bobs).exists()


def test_the_users_export_holds_their_runs_with_context_tokens_and_history(harness, alice, bob):
    import json
    import zipfile

    from ingest.export import user_export_write

    publish_as(gate_doc(), "gate")
    alices = services.run_create(binding_name="gate", run_input={"value": 6.9}, subject=alice)
    services.run_create(binding_name="gate", run_input={"value": 7.1}, subject=bob)
    harness.run_until_idle()
    out = io.BytesIO()
    user_export_write(user=alice, out=out)
    archive = zipfile.ZipFile(out)

    def rows(table):
        return [json.loads(line) for line in archive.read(f"tables/{table}.jsonl").splitlines()]

    [run] = rows("graph_runs")
    assert run["run_id"] == alices.run_id and run["context"]["value"] == 6.9
    assert {t["node_ref"] for t in rows("graph_tokens")} == {"load", "ack"}
    assert rows("graph_run_events") and all(
        e["run_id"] == alices.pk for e in rows("graph_run_events")
    )
    assert [i["instance_id"] for i in rows("workflow_instances")] == [alices.run_id]
