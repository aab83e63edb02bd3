"""A `workflow` node can start a graph as its child: {"kind": "workflow", "binding": NAME}
starts a run of that binding (its version chosen when the node starts, its input checked
against the child's input_schema) and the child run's context is the node's output."""

import pytest

from graphs import services
from graphs.errors import InvalidGraph
from graphs.models import GraphRun, GraphToken
from tests.graphs.helpers import doc, node, parse
from tests.graphs.test_runs_harness import start, status


def child_doc():
    return doc(
        [node("double", "set", action={"values": {"/twice": {"path": "/input/n"}}})],
        [],
        name="child",
        input_schema={"type": "object", "required": ["n"]},
    )


def parent_doc(binding="child-b", mapping=None):
    return doc(
        [
            node(
                "sub",
                "workflow",
                action={"binding": binding},
                input_mapping=mapping or {"n": "/input/n"},
                output_mapping={"/from_child": "/twice"},
                retries={"limit": 0},
            )
        ],
        [],
        name="parent",
    )


def publish_as(document, binding):
    definition = services.definition_create(document=document)
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name=binding, definition=definition.name)


def test_a_workflow_node_runs_a_graph_binding_as_its_child(harness):
    publish_as(child_doc(), "child-b")
    publish_as(parent_doc(), "parent-b")
    run = start(harness, {"n": 21}, binding="parent-b")
    harness.run_until_idle()
    final = status(harness, run)
    assert final["status"] == "complete", final
    assert final["output"]["from_child"] == 21
    child = GraphRun.objects.get(binding_name="child-b")
    assert child.instance.parent_id == run.instance_id
    assert child.definition.name == "child" and child.context["twice"] == 21
    assert GraphToken.objects.get(run=child, node_ref="double").status == "completed"


def test_a_child_graph_refusing_its_input_fails_the_node_with_the_reason(harness):
    publish_as(child_doc(), "child-b")
    publish_as(parent_doc(mapping={"m": "/input/n"}), "parent-b")
    run = start(harness, {"n": 1}, binding="parent-b")
    final = status(harness, run)
    assert final["status"] == "errored"
    assert "input_schema" in final["error"]["message"] or "'n' is a required" in str(final["error"])
    assert not GraphRun.objects.filter(binding_name="child-b").exists()


def test_graph_run_itself_is_not_a_workflow_a_node_can_name():
    with pytest.raises(InvalidGraph) as refused:
        parse(doc([node("sub", "workflow", action={"workflow": "graph-run"})], []))
    assert refused.value.extra["ref"] == "sub" and "binding" in refused.value.message
    with pytest.raises(InvalidGraph):
        parse(doc([node("sub", "workflow", action={"workflow": "child-wf", "binding": "b"})], []))
    with pytest.raises(InvalidGraph):
        parse(doc([node("sub", "workflow", action={})], []))
