"""Who may answer a human node: the binding's approvers (a Django group named on the binding, or
the permission to answer every binding), API keys with graphs:approve or
graphs:approve:<binding>, never graphs:run alone; refusals are 403 and audited; the console
shows Approve/Reject only to those allowed; four-eyes keeps a run's starter from answering it."""

import pytest
from django.contrib.auth.models import Group, Permission
from rest_framework.test import APIClient

from graphs import answers, selectors, services
from graphs.errors import FourEyes
from graphs.models import GraphAnswer, GraphRun
from ops.models import AuditLog
from tests.factories import UserFactory
from tests.graphs.helpers import doc, node
from workflows.models import WorkflowEvent

RUN_AND_APPROVE = ("graphs:read", "graphs:run", "graphs:approve")


def gate_doc(name="gate", **extra) -> dict:
    """ask (human, event ack) → done when /ack/approved is true, else escalate."""
    return doc(
        [
            node("ask", "human", action={"event_type": "ack"}, output_mapping={"/ack": ""}),
            node("done", "set", action={"values": {"/outcome": {"value": "approved"}}}),
            node("escalate", "set", action={"values": {"/outcome": {"value": "rejected"}}}),
        ],
        [
            {
                "from": "ask",
                "to": "done",
                "priority": 1,
                "condition": {
                    "op": "==",
                    "left": {"path": "/ack/approved"},
                    "right": {"value": True},
                },
            },
            {"from": "ask", "to": "escalate", "priority": 2},
        ],
        name=name,
        **extra,
    )


def publish_binding(binding="gate", document=None, **binding_fields):
    if binding_fields.get("approvers"):
        Group.objects.get_or_create(name=binding_fields["approvers"])
    document = document or gate_doc(name=binding)
    definition = services.definition_create(document=document)
    services.definition_publish(name=definition.name, version=definition.version)
    return services.binding_create(name=binding, definition=definition.name, **binding_fields)


def waiting_run(harness, binding="gate", **run_fields) -> GraphRun:
    run = services.run_create(binding_name=binding, run_input={}, **run_fields)
    harness.run_until_idle()
    assert list(selectors.waiting_human_tokens(run)) == ["0"]
    return run


def answer(client, run, *, approved=True, token="0"):
    body = {"type": "ack", "payload": {"approved": approved}}
    if token is not None:
        body["token"] = token
    return client.post(f"/v1/graphs/runs/{run.run_id}/events", body, format="json")


def session(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def staff_user(username: str, *groups: str):
    """A staff user who may view runs in the console, in `groups`."""
    user = UserFactory(username=username, is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_graphrun"))
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


def outcome(harness, run) -> str | None:
    harness.run_until_idle()
    return (harness.status("graph-run", run.run_id).get("output") or {}).get("outcome")


# -- who may answer, over the API ---------------------------------------------------------------


def test_a_key_with_graphs_run_alone_cannot_answer_and_the_refusal_is_audited(
    operator_api, harness
):
    publish_binding()
    run = waiting_run(harness)
    starter = operator_api("graphs:read", "graphs:run", name="starter")

    refused = answer(starter, run)

    assert refused.status_code == 403
    assert refused.json()["code"] == "permission_denied" and refused.json()["message"]
    assert not WorkflowEvent.objects.filter(instance=run.instance).exists()
    denial = AuditLog.objects.get(action="graph_run.answer_denied")
    assert denial.actor.endswith(":starter") and denial.result == "permission_denied"
    assert denial.resource == f"graph_run:{run.run_id}"
    assert denial.metadata == {"type": "ack", "token": "0"}  # refused before the run is read
    assert AuditLog.objects.filter(result__in=["denied", "permission_denied"]).count() == 1
    assert outcome(harness, run) is None  # still waiting


def test_a_staff_session_outside_the_bindings_approvers_cannot_answer(harness):
    publish_binding()
    run = waiting_run(harness)
    dave = staff_user("dave")

    refused = answer(session(dave), run)

    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert not WorkflowEvent.objects.filter(instance=run.instance).exists()
    assert AuditLog.objects.get(action="graph_run.answer_denied").actor == "user:dave"


def test_the_bindings_approver_group_answers_and_nobody_else_on_the_staff_does(harness):
    publish_binding(approvers="clinicians")
    run = waiting_run(harness)
    bob = staff_user("bob", "clinicians")
    erin = staff_user("erin", "billing")

    assert answer(session(erin), run).status_code == 403
    accepted = answer(session(bob), run, approved=False)

    assert accepted.status_code == 200, accepted.json()
    assert accepted.json()["answer"]["by"] == "user:bob"
    assert accepted.json()["answer"]["decision"] == "reject"
    assert outcome(harness, run) == "rejected"


def test_the_answer_permission_answers_every_binding(harness):
    publish_binding(approvers="clinicians")
    run = waiting_run(harness)
    frank = staff_user("frank")
    frank.user_permissions.add(Permission.objects.get(codename="answer_any_human_node"))

    assert answer(session(frank), run).status_code == 200
    assert outcome(harness, run) == "approved"


def test_a_binding_scope_answers_only_that_bindings_nodes(operator_api, harness):
    publish_binding("gate")
    publish_binding("other")
    gate_run = waiting_run(harness, "gate")
    other_run = waiting_run(harness, "other")
    gate_only = operator_api("graphs:approve:gate", name="gate-approver")

    assert answer(gate_only, other_run).status_code == 403
    assert answer(gate_only, gate_run).status_code == 200
    assert outcome(harness, gate_run) == "approved" and outcome(harness, other_run) is None


def test_a_key_without_any_approve_scope_learns_nothing_about_the_run(operator_api, db):
    reader = operator_api("graphs:read", name="reader")
    refused = reader.post(
        "/v1/graphs/runs/no-such-run/events", {"type": "ack", "token": "0"}, format="json"
    )
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert AuditLog.objects.filter(action="graph_run.answer_denied").count() == 1


def test_a_users_bearer_token_answers_nothing(user_api, harness):
    publish_binding()
    run = waiting_run(harness)
    refused = answer(user_api, run)
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert AuditLog.objects.get(action="graph_run.answer_denied").actor == "user:alice"


def test_denials_are_audited_at_a_bounded_rate(operator_api, harness):
    publish_binding()
    run = waiting_run(harness)
    starter = operator_api("graphs:run", name="flooder")
    for _ in range(30):
        assert answer(starter, run).status_code == 403
    written = AuditLog.objects.filter(action__startswith="graph_run.answer_denied").count()
    assert written < 30
    assert AuditLog.objects.filter(action="graph_run.answer_denied.suppressed").count() == 1


def test_answers_to_graph_runs_cannot_go_around_through_the_workflow_routes(operator_api, harness):
    publish_binding()
    run = waiting_run(harness)
    events_key = operator_api("workflows:events", name="events")

    sent = events_key.post(
        f"/v1/workflows/graph-run/instances/{run.run_id}/events",
        {"type": "ack", "payload": {"approved": True}},
        format="json",
    )

    assert sent.status_code == 403 and sent.json()["code"] == "permission_denied"
    assert not WorkflowEvent.objects.filter(instance=run.instance).exists()
    assert AuditLog.objects.get(action="auth.denied").actor.endswith(":events")
    assert outcome(harness, run) is None


def test_every_answer_is_audited_with_the_actor_and_the_node(operator_api, harness):
    publish_binding()
    run = waiting_run(harness)
    approver = operator_api("graphs:approve", name="nurse-station")

    assert answer(approver, run).status_code == 200

    row = AuditLog.objects.get(action="graph_run.send_event")
    assert row.actor.endswith(":nurse-station") and row.resource == f"graph_run:{run.run_id}"
    assert row.metadata == {"type": "ack", "token": "0", "node": "ask", "decision": "approve"}
    stored = GraphAnswer.objects.get(run=run)
    assert (stored.token_path, stored.node_ref, stored.actor) == ("0", "ask", row.actor)


# -- four-eyes ----------------------------------------------------------------------------------


def test_four_eyes_refuses_the_runs_starter_and_accepts_someone_else(operator_api, harness):
    publish_binding(document=gate_doc(name="gate", four_eyes=True))
    starter = operator_api(*RUN_AND_APPROVE, name="dr-a")
    started = starter.post(
        "/v1/graphs/bindings/gate/runs", {"input": {}}, format="json", HTTP_IDEMPOTENCY_KEY="s1"
    )
    assert started.status_code == 201
    run = GraphRun.objects.get(run_id=started.json()["id"])
    assert run.started_by.endswith(":dr-a")
    harness.run_until_idle()

    own = answer(starter, run)

    assert own.status_code == 403 and own.json()["code"] == "four_eyes"
    assert AuditLog.objects.get(action="graph_run.answer_denied").result == "four_eyes"
    assert not GraphAnswer.objects.exists()
    assert answer(operator_api("graphs:approve", name="dr-b"), run).status_code == 200
    assert outcome(harness, run) == "approved"


def test_without_four_eyes_the_starter_may_answer(operator_api, harness):
    publish_binding()
    starter = operator_api(*RUN_AND_APPROVE, name="dr-a")
    started = starter.post(
        "/v1/graphs/bindings/gate/runs", {"input": {}}, format="json", HTTP_IDEMPOTENCY_KEY="s1"
    )
    run = GraphRun.objects.get(run_id=started.json()["id"])
    harness.run_until_idle()
    assert answer(starter, run).status_code == 200


def test_a_child_run_is_started_by_whoever_started_its_parent(harness):
    publish_binding("child-gate", gate_doc(name="child-gate", four_eyes=True))
    parent = doc(
        [node("sub", "workflow", action={"binding": "child-gate"}, retries={"limit": 0})],
        [],
        name="parent",
    )
    publish_binding("parent", parent)
    services.run_create(binding_name="parent", run_input={}, actor="user:alice")
    harness.run_until_idle()
    child = GraphRun.objects.get(binding_name="child-gate")
    assert child.started_by == "user:alice"

    with pytest.raises(FourEyes):
        answers.run_answer(run_id=child.run_id, type="ack", token="0", actor="user:alice")
    answers.run_answer(
        run_id=child.run_id, type="ack", payload={"approved": True}, token="0", actor="user:bob"
    )
    assert outcome(harness, child) == "approved"


def test_four_eyes_must_be_a_boolean(operator_api, db):
    writer = operator_api("graphs:write")
    writer.post("/v1/graphs/definitions", gate_doc(four_eyes="yes"), format="json")
    refused = writer.post("/v1/graphs/definitions/gate/versions/1/publish")
    assert refused.status_code == 400 and refused.json()["field"] == "four_eyes"


# -- binding approvers through the API ----------------------------------------------------------


def test_a_bindings_approvers_are_set_through_the_api_and_audited(operator_api, db):
    Group.objects.create(name="clinicians")
    writer = operator_api("graphs:read", "graphs:write", name="release-bot")
    definition = services.definition_create(document=gate_doc())
    services.definition_publish(name=definition.name, version=definition.version)

    created = writer.post(
        "/v1/graphs/bindings",
        {"name": "gate", "definition": "gate", "approvers": "clinicians"},
        format="json",
    )
    assert created.status_code == 201 and created.json()["approvers"] == "clinicians"
    unknown = writer.post("/v1/graphs/bindings/gate/approvers", {"group": "nobody"}, format="json")
    assert unknown.status_code == 400 and unknown.json()["code"] == "group_not_found"
    cleared = writer.post("/v1/graphs/bindings/gate/approvers", {"group": None}, format="json")
    assert cleared.status_code == 200 and cleared.json()["approvers"] is None
    row = AuditLog.objects.get(action="graph_binding.approvers")
    assert row.metadata == {"from": "clinicians", "to": None}
    assert row.actor.endswith(":release-bot")
    assert (
        operator_api("graphs:approve")
        .post("/v1/graphs/bindings/gate/approvers", {"group": None}, format="json")
        .status_code
        == 403
    )


def test_manage_py_graphs_approvers_sets_the_group_on_the_box(db):
    from io import StringIO

    from django.core.management import call_command

    from graphs.models import GraphBinding

    publish_binding()
    Group.objects.create(name="clinicians")
    out = StringIO()
    call_command("graphs", "approvers", "gate", "--group", "clinicians", stdout=out)
    assert "answered by group clinicians" in out.getvalue()
    assert GraphBinding.objects.get(name="gate").approvers.name == "clinicians"
    row = AuditLog.objects.get(action="graph_binding.approvers")
    assert row.actor == "manage.py" and row.metadata == {"from": None, "to": "clinicians"}
    call_command("graphs", "approvers", "gate", stdout=out)
    assert GraphBinding.objects.get(name="gate").approvers is None


# -- the console --------------------------------------------------------------------------------


def decide(client, run, decision="approve"):
    return client.post(
        f"/admin/graphs/graphrun/{run.pk}/decide/",
        {"event_type": "ack", "token": "0", "decision": decision},
    )


def test_the_console_shows_approve_and_reject_only_to_the_bindings_approvers(client, harness):
    publish_binding(approvers="clinicians")
    run = waiting_run(harness)
    page = f"/admin/graphs/graphrun/{run.pk}/change/"

    client.force_login(staff_user("erin", "billing"))
    html = client.get(page).content.decode()
    assert "Waiting for a person" in html and 'value="approve"' not in html
    assert "clinicians" in html  # says who may answer
    decide(client, run)
    assert not WorkflowEvent.objects.filter(instance=run.instance).exists()
    assert AuditLog.objects.get(action="graph_run.answer_denied").actor == "user:erin"

    client.force_login(staff_user("bob", "clinicians"))
    html = client.get(page).content.decode()
    assert 'value="approve"' in html and 'value="reject"' in html
    decide(client, run, "reject")
    assert outcome(harness, run) == "rejected"
    assert AuditLog.objects.get(action="graph_run.send_event").actor == "user:bob"


def test_the_console_hides_the_buttons_from_the_starter_under_four_eyes(client, harness):
    publish_binding(document=gate_doc(name="gate", four_eyes=True), approvers="clinicians")
    bob = staff_user("bob", "clinicians")
    started = session(bob).post(
        "/v1/graphs/bindings/gate/runs", {"input": {}}, format="json", HTTP_IDEMPOTENCY_KEY="s1"
    )
    assert started.status_code == 201, started.json()
    run = GraphRun.objects.get(run_id=started.json()["id"])
    harness.run_until_idle()

    client.force_login(bob)
    html = client.get(f"/admin/graphs/graphrun/{run.pk}/change/").content.decode()
    assert 'value="approve"' not in html and "four-eyes" in html
    decide(client, run)
    assert not GraphAnswer.objects.exists()
    assert AuditLog.objects.get(action="graph_run.answer_denied").result == "four_eyes"


def test_the_console_shows_who_answered_a_node_that_has_not_moved_on_yet(client, harness, staff):
    publish_binding()
    run = waiting_run(harness)
    client.force_login(staff)
    decide(client, run)  # not run yet: the node still waits for the runner
    html = client.get(f"/admin/graphs/graphrun/{run.pk}/change/").content.decode()
    assert "Answered by user:charlie" in html and 'value="approve"' not in html


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_the_answer_the_console_sends_decides_the_path(client, harness, staff, decision):
    publish_binding()
    run = waiting_run(harness)
    client.force_login(staff)
    decide(client, run, decision)
    expected = {"approve": "approved", "reject": "rejected"}[decision]
    assert outcome(harness, run) == expected
    assert GraphAnswer.objects.get(run=run).decision == decision
