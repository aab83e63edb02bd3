"""The shipped example (demo/graphs/lab-out-of-range.json) as `make run` starts it: the
labs action finds the out-of-range markers, one webhook call each, then the clinician's
acknowledgement or the 48 h escalation."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from demo.graph_demo import EXAMPLE
from graphs.models import GraphRun, GraphToken
from tests.graphs.helpers import parse

HOOK = "https://hooks.test/clinic-hook"


@pytest.fixture
def demo_run(web, harness, settings):
    settings.GRAPHS_HTTP_SECRETS = {"CLINIC_TOKEN": "t0ken"}
    call_command("labs_graph_demo", hook_url=HOOK, stdout=io.StringIO())
    harness.run_until_idle()
    return GraphRun.objects.get()


def test_the_example_file_is_a_valid_graph():
    graph = parse(json.loads(EXAMPLE.read_text()), publishing=True)
    assert graph.initial_node == "load" and set(graph.nodes) == {
        "load",
        "notify",
        "phone-clinic",
        "notified",
        "ack",
        "done",
        "escalate",
    }
    assert [t.target for t in graph.outgoing("notify", "failure")] == ["phone-clinic"]
    assert graph.tags == ("labs", "clinic")


def test_demo_run_notifies_each_out_of_range_marker_and_waits_for_the_clinician(
    demo_run, web, harness
):
    assert harness.status("graph-run", demo_run.run_id)["status"] == "waiting"
    sent = sorted(json.loads(r.content)["code"] for r in web.requests)
    assert sent == ["hba1c", "ldl"]  # vitamin D is in range
    assert all(r.headers["authorization"] == "t0ken" and str(r.url) == HOOK for r in web.requests)
    demo_run.refresh_from_db()
    assert demo_run.context["notifications"] == [{"ok": True}, {"ok": True}]
    assert GraphToken.objects.get(run=demo_run, node_ref="ack").status == "executing"

    harness.send_event("graph-run", demo_run.run_id, "clinician_ack", {"approved": True})
    final = harness.status("graph-run", demo_run.run_id)
    assert final["status"] == "complete" and final["output"]["outcome"] == "acknowledged"


def test_no_acknowledgement_in_48_hours_escalates(demo_run, harness):
    harness.advance("48 hours")
    final = harness.status("graph-run", demo_run.run_id)
    assert final["status"] == "complete" and final["output"]["outcome"] == "escalated"
    assert final["output"]["ack"] == {"timed_out": True}


def test_running_the_demo_twice_reuses_the_version_and_the_run(demo_run, web, harness):
    call_command("labs_graph_demo", hook_url=HOOK, stdout=io.StringIO())
    assert GraphRun.objects.count() == 1


def test_graphs_import_and_export_commands(db, tmp_path, capsys):
    call_command("graphs", "import", str(EXAMPLE), "--publish", "--binding", "labs")
    assert "lab-out-of-range v1 published" in capsys.readouterr().out
    call_command("graphs", "import", str(EXAMPLE), "--publish")  # same content: same version
    assert "v1" in capsys.readouterr().out
    out = tmp_path / "x.json"
    call_command("graphs", "export", "lab-out-of-range", "--output", str(out))
    exported = json.loads(out.read_text())
    assert (
        exported["version"] == 1 and exported["nodes"] == json.loads(EXAMPLE.read_text())["nodes"]
    )
    yaml_file = tmp_path / "g.yaml"
    yaml_file.write_text(
        "name: tiny\ninitial_node: a\nnodes:\n  - ref: a\n    action: {kind: sleep, duration: 1 second}\ntransitions: []\n"
    )
    call_command("graphs", "import", str(yaml_file))
    assert "tiny v1 draft" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.yaml", "a: [\n", "not valid YAML"),
        ("list.yaml", "- 1\n- 2\n", "must be a JSON object"),
        ("list.json", "[1]", "must be a JSON object"),
        ("bad.json", "{", "not valid JSON"),
    ],
)
def test_graphs_import_refuses_unreadable_files_with_a_command_error(
    db, tmp_path, name, text, message
):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(CommandError, match=message):
        call_command("graphs", "import", str(path))
