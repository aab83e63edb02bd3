"""Graph runs on the engine (harness clock, both databases): nodes as steps, fan-out, humans,
tokens and sequenced events as the operator sees them."""

from graphs import services
from graphs.models import GraphRun, GraphRunEvent, GraphToken
from tests.graphs.helpers import doc, node

NO_RETRY = {"limit": 0}


def publish(document, binding="b"):
    definition = services.definition_create(document=document)
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name=binding, definition=definition.name)
    return definition


def start(h, run_input=None, binding="b") -> GraphRun:
    run = services.run_create(binding_name=binding, run_input=run_input or {})
    h.run_until_idle()
    run.refresh_from_db()
    return run


def status(h, run):
    return h.status("graph-run", run.run_id)


def fanout_doc():
    return doc(
        [
            node(
                "load", output_mapping={"/items": "/items"}, input_mapping={"items": "/input/items"}
            ),
            node(
                "work",
                input_mapping={"item": "/branch/item"},
                output_mapping={"/r": "/item"},
                retries=NO_RETRY,
            ),
            node(
                "ack",
                "human",
                action={"event_type": "ack", "timeout": "1 hour"},
                output_mapping={"/ack": ""},
            ),
            node("done", "set", action={"values": {"/result": {"value": "approved"}}}),
            node("escalate", "set", action={"values": {"/result": {"value": "escalated"}}}),
        ],
        [
            {"ref": "each", "from": "load", "to": "work", "foreach": {"collection": "/items"}},
            {
                "from": "work",
                "to": "ack",
                "synchronization": {
                    "fan_out": "each",
                    "merge": {"source": "/r", "target": "/all", "strategy": "append"},
                },
            },
            {
                "from": "ack",
                "to": "done",
                "priority": 1,
                "condition": {
                    "op": "==",
                    "left": {"path": "/ack/approved"},
                    "right": {"value": True},
                },
            },
            {"from": "ack", "to": "escalate", "priority": 2},
        ],
    )


def test_fan_out_human_approval_and_completion(harness):
    publish(fanout_doc())
    run = start(harness, {"items": ["a", "b", "c"]})
    assert status(harness, run)["status"] == "waiting"
    assert run.context["all"] == ["a", "b", "c"]
    ack = GraphToken.objects.get(run=run, node_ref="ack")
    assert ack.status == "executing"
    harness.send_event("graph-run", run.run_id, "ack", {"approved": True})
    final = status(harness, run)
    assert final["status"] == "complete"
    assert final["output"]["result"] == "approved"
    run.refresh_from_db()
    assert run.context["ack"] == {"approved": True}
    tokens = {t.path_id: (t.node_ref, t.status) for t in GraphToken.objects.filter(run=run)}
    assert tokens == {
        "0": ("load", "completed"),
        "0.0.0": ("work", "completed"),
        "0.1.0": ("work", "completed"),
        "0.2.0": ("work", "completed"),
        "1": ("ack", "completed"),
        "2": ("done", "completed"),
    }
    events = list(GraphRunEvent.objects.filter(run=run).order_by("sequence_number"))
    assert [e.sequence_number for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "run_started" and events[-1].type == "run_completed"
    # Each node ran exactly once: one step per token.
    steps = [s["name"] for s in harness.history("graph-run", run.run_id)["steps"]]
    assert sorted(s for s in steps if s.endswith(" work")) == [
        "0 each/0/0.0.0 work",
        "0 each/1/0.1.0 work",
        "0 each/2/0.2.0 work",
    ]


def test_human_timeout_escalates(harness):
    publish(fanout_doc())
    run = start(harness, {"items": []})
    harness.advance("2 hours")
    final = status(harness, run)
    assert final["status"] == "complete" and final["output"]["result"] == "escalated"
    assert GraphToken.objects.get(run=run, node_ref="ack").status == "timed_out"


def test_failing_node_fails_the_run_with_its_message(harness):
    publish(
        doc([node("a", name="tests.boom", retries=NO_RETRY), node("b")], [{"from": "a", "to": "b"}])
    )
    run = start(harness)
    final = status(harness, run)
    assert final["status"] == "errored"
    assert "boom" in final["error"]["message"]
    assert GraphRunEvent.objects.filter(run=run, type="run_failed").exists()
    assert GraphToken.objects.get(run=run, path_id="0").status == "failed"


def test_a_run_keeps_its_version_when_a_new_one_is_published(harness):
    first = publish(doc([node("a", "set", action={"values": {"/v": {"value": 1}}})], []))
    run1 = services.run_create(binding_name="b", run_input={})
    second = services.definition_create(
        document=doc([node("a", "set", action={"values": {"/v": {"value": 2}}})], [])
    )
    services.definition_publish(name="g", version=second.version)
    run2 = services.run_create(binding_name="b", run_input={})
    harness.run_until_idle()
    assert status(harness, run1)["output"]["v"] == 1 and run1.definition_id == first.pk
    assert status(harness, run2)["output"]["v"] == 2
    services.binding_pin(name="b", version=1)
    run3 = start(harness)
    assert status(harness, run3)["output"]["v"] == 1


def test_restarting_the_engine_instance_runs_the_graph_again_with_a_fresh_projection(harness):
    publish(fanout_doc())
    run = start(harness, {"items": ["a"]})
    harness.send_event("graph-run", run.run_id, "ack", {"approved": False})
    assert status(harness, run)["output"]["result"] == "escalated"
    harness.restart("graph-run", run.run_id)
    assert status(harness, run)["status"] == "waiting"
    harness.send_event("graph-run", run.run_id, "ack", {"approved": True})
    assert status(harness, run)["output"]["result"] == "approved"
    latest = GraphRunEvent.objects.filter(run=run, engine_run=2).order_by("sequence_number")
    assert latest.first().type == "run_started" and latest.last().type == "run_completed"
    assert GraphRunEvent.objects.filter(run=run, engine_run=1).last().type == "run_completed"
    assert GraphToken.objects.filter(run=run, engine_run=2, node_ref="done").exists()
