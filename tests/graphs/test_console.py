"""The graphs console: definition page with the drawing and a diff, publish, run page with the
token tree and timeline, approve/reject of a waiting human node (audited)."""

import pytest

from graphs import services
from graphs.models import GraphDefinition, GraphRun, GraphToken
from ops.models import AuditLog
from tests.graphs.helpers import doc, node
from tests.graphs.test_api import approval_doc


@pytest.fixture
def console(client, staff):
    client.force_login(staff)
    return client


def test_definition_page_draws_the_graph_and_diffs_versions(console):
    first = services.definition_create(document=approval_doc())
    changed = approval_doc()
    changed["nodes"][3]["action"]["values"] = {"/result": {"value": "ok"}}
    second = services.definition_create(document=changed)
    page = console.get(f"/admin/graphs/graphdefinition/{second.pk}/change/?diff=1")
    html = page.content.decode()
    assert page.status_code == 200
    assert "<svg" in html and ">ack<" in html and "join all" in html and "foreach /items" in html
    assert "diff_chg" in html or "diff_add" in html
    assert console.get("/admin/graphs/graphdefinition/").status_code == 200
    assert first.status == "draft"


def test_publish_from_the_console_refuses_invalid_drafts_and_audits(console):
    broken = approval_doc()
    broken["transitions"][0]["to"] = "nowhere"
    draft = services.definition_create(document=broken)
    console.post(f"/admin/graphs/graphdefinition/{draft.pk}/publish/")
    draft.refresh_from_db()
    assert draft.status == "draft"
    assert AuditLog.objects.get(action="graph_definition.publish").result == "invalid_graph"
    page = console.get(f"/admin/graphs/graphdefinition/{draft.pk}/change/")
    assert "cannot draw" in page.content.decode()
    good = services.definition_create(document=approval_doc())
    console.post(f"/admin/graphs/graphdefinition/{good.pk}/publish/")
    assert GraphDefinition.objects.get(pk=good.pk).status == "published"


def test_run_page_shows_tokens_and_timeline_and_approves_the_human_node(console, harness):
    definition = services.definition_create(document=approval_doc())
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name="approve", definition=definition.name)
    run = services.run_create(binding_name="approve", run_input={"items": [1, 2]})
    harness.run_until_idle()
    page = console.get(f"/admin/graphs/graphrun/{run.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Waiting for a person" in html and "0.1.0" in html and "fan_in_completed" in html
    assert console.get("/admin/graphs/graphrun/").status_code == 200

    console.post(
        f"/admin/graphs/graphrun/{run.pk}/decide/",
        {"event_type": "ack", "decision": "approve", "note": "fine"},
    )
    harness.run_until_idle()
    assert harness.status("graph-run", run.run_id)["output"]["result"] == "approved"
    row = AuditLog.objects.get(action="graph_run.send_event")
    assert row.actor == "user:charlie"
    assert row.metadata == {"type": "ack", "token": "1", "node": "ack", "decision": "approve"}
    run = GraphRun.objects.get(pk=run.pk)
    assert run.context["ack"]["by"] == "charlie"


def test_reject_sends_approved_false_and_unknown_event_types_are_refused(console, harness):
    definition = services.definition_create(document=approval_doc())
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name="approve", definition=definition.name)
    run = services.run_create(binding_name="approve", run_input={"items": []})
    harness.run_until_idle()
    console.post(
        f"/admin/graphs/graphrun/{run.pk}/decide/", {"event_type": "other", "decision": "approve"}
    )
    assert not AuditLog.objects.filter(action="graph_run.send_event").exists()
    console.post(
        f"/admin/graphs/graphrun/{run.pk}/decide/", {"event_type": "ack", "decision": "reject"}
    )
    harness.run_until_idle()
    assert harness.status("graph-run", run.run_id)["output"]["result"] == "escalated"


def test_approve_on_one_of_several_waiting_branches_answers_that_branch(console, harness):
    document = doc(
        [
            node(
                "load", input_mapping={"items": "/input/items"}, output_mapping={"/items": "/items"}
            ),
            node("ask", "human", action={"event_type": "ack"}, output_mapping={"/ack": ""}),
        ],
        [{"ref": "each", "from": "load", "to": "ask", "foreach": {"collection": "/items"}}],
        name="per-branch",
    )
    definition = services.definition_create(document=document)
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name="per-branch", definition=definition.name)
    run = services.run_create(binding_name="per-branch", run_input={"items": [1, 2, 3]})
    harness.run_until_idle()
    html = console.get(f"/admin/graphs/graphrun/{run.pk}/change/").content.decode()
    assert html.count('name="token"') == 3
    console.post(
        f"/admin/graphs/graphrun/{run.pk}/decide/",
        {"event_type": "ack", "token": "0.2.0", "decision": "reject"},
    )
    harness.run_until_idle()
    answered = GraphToken.objects.get(run=run, path_id="0.2.0")
    assert answered.status == "completed" and answered.output["approved"] is False
    assert GraphToken.objects.get(run=run, path_id="0.0.0").status == "executing"


def test_the_drawing_marks_failure_routes(console):
    document = doc(
        [node("call"), node("done"), node("escalate")],
        [{"from": "call", "to": "done"}, {"from": "call", "to": "escalate", "on": "failure"}],
        name="drawn",
    )
    definition = services.definition_create(document=document)
    html = console.get(f"/admin/graphs/graphdefinition/{definition.pk}/change/").content.decode()
    assert "on failure" in html and 'stroke="#b91c1c"' in html
