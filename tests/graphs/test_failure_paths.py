"""Failure is a path, on the engine (harness clock, both databases): a node failing after its
retries takes its failure route with the attempts it took, inside a fan-out branch too; a
`workflow` node catches its child's failure; a timed-out run waits at its human gate; the
output_schema judges the final context."""

from graphs import graph_action
from graphs.models import GraphRunEvent, GraphToken
from tests.graphs.helpers import doc, node
from tests.graphs.test_runs_harness import publish, start, status
from workflows import NonRetryableError, workflow


@graph_action("tests.fail_for")
def fail_for(input: dict) -> dict:  # noqa: A002
    if input["item"] == input["bad"]:
        raise ConnectionError(f"cannot deliver {input['item']}")
    return {"delivered": input["item"]}


@workflow(name="tests-graph-child-fails")
def failing_child(event, step):
    step.do("refuse", lambda: (_ for _ in ()).throw(NonRetryableError("the child says no")))


def on_failure(src, dst, **extra):
    return {"from": src, "to": dst, "on": "failure", **extra}


def escalate():
    return node("escalate", "set", action={"values": {"/outcome": {"value": "escalated"}}})


def test_a_node_failing_after_its_retries_takes_its_failure_route_with_its_attempts(harness):
    publish(
        doc(
            [
                node(
                    "call",
                    name="tests.boom",
                    retries={"limit": 2, "delay": "1 second", "backoff": "constant"},
                ),
                node("done", "set", action={"values": {"/outcome": {"value": "done"}}}),
                escalate(),
            ],
            [{"from": "call", "to": "done"}, on_failure("call", "escalate")],
        )
    )
    run = start(harness)
    harness.advance("1 second")
    harness.advance("1 second")
    final = status(harness, run)
    assert final["status"] == "complete", final
    assert final["output"]["outcome"] == "escalated"
    assert final["output"]["errors"]["call"] == {
        "name": "RuntimeError",
        "message": "boom",
        "node": "call",
        "attempts": 3,
    }
    tokens = dict(GraphToken.objects.filter(run=run).values_list("node_ref", "status"))
    assert tokens == {"call": "failed", "escalate": "completed"}
    steps = {s["name"]: s["attempts"] for s in harness.history("graph-run", run.run_id)["steps"]}
    assert steps["0 call"] == 3 and "0 call failed" in steps


def test_a_failure_route_inside_a_fan_out_branch_lets_the_branch_reach_its_fan_in(harness):
    publish(
        doc(
            [
                node(
                    "load",
                    input_mapping={"items": "/input/items"},
                    output_mapping={"/items": "/items"},
                ),
                node(
                    "deliver",
                    name="tests.fail_for",
                    input_mapping={"item": "/branch/item", "bad": {"value": "b"}},
                    output_mapping={"/r": "/delivered"},
                    retries={"limit": 0},
                ),
                node(
                    "by-hand", "set", action={"values": {"/r": {"path": "/errors/deliver/message"}}}
                ),
                node("noted", "set", action={"values": {"/noted": {"value": True}}}),
                node("report", "set", action={"values": {"/outcome": {"value": "reported"}}}),
            ],
            [
                {
                    "ref": "each",
                    "from": "load",
                    "to": "deliver",
                    "foreach": {"collection": "/items"},
                },
                {"from": "deliver", "to": "noted"},
                on_failure("deliver", "by-hand"),
                {"from": "by-hand", "to": "noted"},
                {
                    "from": "noted",
                    "to": "report",
                    "synchronization": {
                        "fan_out": "each",
                        "merge": {
                            "source": "/r",
                            "target": "/results",
                            "strategy": "keyed_by_branch",
                        },
                    },
                },
            ],
        )
    )
    run = start(harness, {"items": ["a", "b", "c"]})
    final = status(harness, run)
    assert final["status"] == "complete", final
    assert final["output"]["results"] == {"0": "a", "1": "cannot deliver b", "2": "c"}
    failed = GraphToken.objects.get(run=run, node_ref="deliver", status="failed")
    assert failed.error["attempts"] == 1 and failed.branch_index == 1


def test_a_workflow_node_with_catch_routes_its_childs_failure(harness):
    publish(
        doc(
            [
                node(
                    "sub", "workflow", action={"workflow": "tests-graph-child-fails", "catch": True}
                ),
                escalate(),
            ],
            [on_failure("sub", "escalate")],
        )
    )
    run = start(harness)
    final = status(harness, run)
    assert final["status"] == "complete", final
    error = final["output"]["errors"]["sub"]
    assert error["name"] == "ChildWorkflowError" and error["attempts"] == 1
    assert error["child"]["status"] == "errored"
    assert error["child"]["error"]["message"] == "the child says no"


def test_without_catch_a_childs_failure_fails_the_run_and_the_failure_route_serves_the_node(
    harness,
):
    publish(doc([node("boom", name="tests.boom", retries={"limit": 0})], [], name="child"), "kid")
    publish(
        doc(
            [node("sub", "workflow", action={"binding": "kid"}, retries={"limit": 0}), escalate()],
            [on_failure("sub", "escalate")],
            name="parent",
        ),
        "parent",
    )
    run = start(harness, binding="parent")
    final = status(harness, run)
    assert final["status"] == "errored" and "child" in final["error"]["message"]

    from graphs import services  # the binding's own refusal is the node's failure: routed

    services.binding_set_enabled(name="kid", enabled=False)
    second = start(harness, binding="parent")
    final = status(harness, second)
    assert final["status"] == "complete" and final["output"]["outcome"] == "escalated"
    assert "disabled" in final["output"]["errors"]["sub"]["message"]


def gate_doc():
    return doc(
        [
            node("ask", "human", action={"event_type": "ack", "timeout": "48 hours"}),
            node("done", "set", action={"values": {"/outcome": {"value": "acknowledged"}}}),
            node(
                "review",
                "human",
                action={"event_type": "review", "timeout": "7 days"},
                output_mapping={"/review": ""},
            ),
            node("reviewed", "set", action={"values": {"/outcome": {"value": "reviewed"}}}),
        ],
        [{"from": "ask", "to": "done"}, {"from": "review", "to": "reviewed"}],
        timeout="1 hour",
        on_timeout="human_gate",
        timeout_gate="review",
    )


def test_a_timed_out_run_with_a_human_gate_waits_there_instead_of_failing(harness):
    publish(gate_doc())
    run = start(harness)
    harness.advance("1 hour")
    assert status(harness, run)["status"] == "waiting"
    tokens = dict(GraphToken.objects.filter(run=run).values_list("node_ref", "status"))
    assert tokens == {"ask": "timed_out", "review": "executing"}
    assert GraphRunEvent.objects.filter(run=run, type="run_timed_out").count() == 1

    harness.advance("2 days")  # past the run's deadline again: the gate keeps waiting
    assert status(harness, run)["status"] == "waiting"
    harness.send_event("graph-run", run.run_id, "review", {"by": "dr. who"})
    final = status(harness, run)
    assert final["status"] == "complete" and final["output"]["outcome"] == "reviewed"
    assert final["output"]["review"] == {"by": "dr. who"}


def test_a_final_context_breaking_the_output_schema_errors_the_run_naming_the_path(harness):
    publish(
        doc(
            [node("set", "set", action={"values": {"/outcome": {"value": 42}}})],
            [],
            output_schema={"type": "object", "properties": {"outcome": {"type": "string"}}},
        )
    )
    run = start(harness)
    final = status(harness, run)
    assert final["status"] == "errored"
    assert "/outcome" in final["error"]["message"] and "output_schema" in final["error"]["message"]
    failed = GraphRunEvent.objects.get(run=run, type="run_failed")
    assert failed.data["error"]["errors"] == [
        {"path": "/outcome", "message": "42 is not of type 'string'"}
    ]
