"""vitalflow-wf graphs … against a live test server (in-process graphs.cli.main)."""

import io
import json

import pytest

from graphs import cli
from ops.services import api_key_create
from tests.graphs.helpers import doc, node
from workflows.engine import tick


@pytest.fixture
def vf(live_server, db):
    _, raw = api_key_create(
        name="cli", scopes=["graphs:read", "graphs:write", "graphs:run", "graphs:approve"]
    )

    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(
            ["--url", f"{live_server.url}/v1", "-H", f"X-Admin-Key: {raw}", *argv], out=out, err=err
        )
        return code, out.getvalue(), err.getvalue()

    return run


def test_publish_run_list_and_approve_through_the_cli(vf, tmp_path):
    document = doc(
        [
            node("ack", "human", action={"event_type": "ok"}, output_mapping={"/ack": ""}),
            node("end", "set", action={"values": {"/done": {"value": True}}}),
        ],
        [{"from": "ack", "to": "end"}],
        name="cli-graph",
    )
    path = tmp_path / "g.json"
    path.write_text(json.dumps(document))
    code, out, err = vf("graphs", "publish", "--file", str(path))
    assert code == 0, err
    assert out.startswith("cli-graph v1 published")
    assert "cli-graph  v1  published" in vf("graphs", "list")[1]
    assert (
        json.loads(vf("graphs", "get", "--name", "cli-graph", "--version", "1", "--document")[1])[
            "name"
        ]
        == "cli-graph"
    )

    from graphs import services

    services.binding_create(name="cli-b", definition="cli-graph")
    code, out, err = vf("graphs", "run", "--binding", "cli-b", "--input", "{}")
    assert code == 0, err
    run_id = out.split()[0]
    tick(max_instances=5, threaded=False)
    assert f"{run_id}  cli-b v1  waiting" in vf("graphs", "runs", "--binding", "cli-b")[1]
    code, out, _ = vf(
        "graphs", "events", "--run", run_id, "--type", "ok", "--payload", '{"approved": true}'
    )
    assert code == 0 and "sent ok" in out
    tick(max_instances=5, threaded=False)
    events = vf("graphs", "events", "--run", run_id)[1]
    assert "#1    run_started" in events and "run_completed" in events


def test_events_with_a_token_answer_that_branch(vf):
    from graphs import services

    document = doc(
        [
            node(
                "load", input_mapping={"items": "/input/items"}, output_mapping={"/items": "/items"}
            ),
            node("ask", "human", action={"event_type": "ok"}),
        ],
        [{"ref": "each", "from": "load", "to": "ask", "foreach": {"collection": "/items"}}],
        name="cli-branches",
    )
    definition = services.definition_create(document=document)
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name="cli-br", definition="cli-branches")
    run = services.run_create(binding_name="cli-br", run_input={"items": [1, 2]})
    tick(max_instances=5, threaded=False)
    code, out, err = vf(
        "graphs",
        "events",
        "--run",
        run.run_id,
        "--type",
        "ok",
        "--token",
        "0.1.0",
        "--payload",
        "1",
    )
    assert code == 0 and "(token 0.1.0)" in out, err
    code, _, err = vf("graphs", "events", "--run", run.run_id, "--type", "ok", "--token", "0.1.0")
    assert code == 1 and "already_answered" in err and "api_key:" in err  # names the first


def test_cli_errors_show_the_api_code(vf):
    code, _, err = vf("graphs", "get", "--name", "nope", "--version", "1")
    assert code == 1 and "definition_not_found" in err


def test_approvers_names_the_group_that_answers_a_binding(vf):
    from django.contrib.auth.models import Group

    from graphs import services
    from graphs.models import GraphBinding

    Group.objects.create(name="clinicians")
    definition = services.definition_create(document=doc([node("a")], [], name="cli-appr"))
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name="cli-appr", definition="cli-appr")
    code, out, err = vf("graphs", "approvers", "--binding", "cli-appr", "--group", "clinicians")
    assert code == 0 and "answered by group clinicians" in out, err
    assert GraphBinding.objects.get(name="cli-appr").approvers.name == "clinicians"
    code, out, _ = vf("graphs", "approvers", "--binding", "cli-appr", "--none")
    assert code == 0 and "global approvers only" in out
    code, _, err = vf("graphs", "approvers", "--binding", "cli-appr", "--group", "nobody")
    assert code == 1 and "group_not_found" in err
