"""Failure is a path (pure decisions, no database): failure routes with tiers and conditions
reading /errors, a run-level human gate on timeout, the output_schema, the fan-out bound — and
the validation that names a route that can never be taken."""

import pytest

from graphs import decisions
from graphs.errors import InvalidGraph
from tests.graphs.helpers import Driver, Failure, doc, node, parse


def t(src, dst, **extra):
    return {"from": src, "to": dst, **extra}


def on_failure(src, dst, **extra):
    return t(src, dst, on="failure", **extra)


def error_is(name):
    return {"op": "==", "left": {"path": "/errors/call/name"}, "right": {"value": name}}


def webhook_graph(*failure_routes):
    targets = sorted({r["to"] for r in failure_routes})
    return doc(
        [node("call"), node("done"), *(node(ref) for ref in targets)],
        [t("call", "done"), *failure_routes],
    )


def test_a_node_failing_after_its_retries_writes_its_error_and_takes_its_failure_route():
    d = Driver(webhook_graph(on_failure("call", "escalate")))
    outcome = d.run({"call": Failure("clinic down", attempts=3)})
    assert isinstance(outcome, decisions.Complete)
    assert [ref for _, ref in d.dispatched] == ["call", "escalate"]
    error = {"name": "Failure", "message": "clinic down", "node": "call", "attempts": 3}
    assert outcome.output["errors"] == {"call": error}
    assert d.tokens()["0"] == ("call", "failed") and d.state.tokens["0"].error == error
    assert d.events()[-1] == "run_completed"


def test_a_success_takes_only_the_success_routes():
    d = Driver(webhook_graph(on_failure("call", "escalate")))
    outcome = d.run({"call": {"ok": True}})
    assert [ref for _, ref in d.dispatched] == ["call", "done"]
    assert "errors" not in outcome.output


def test_without_a_failure_route_a_failure_fails_the_run_as_before():
    d = Driver(webhook_graph())
    outcome = d.run({"call": Failure("clinic down", attempts=6)})
    assert isinstance(outcome, decisions.Fail) and outcome.error["name"] == "NodeFailed"
    assert "errors" not in d.state.context


@pytest.mark.parametrize(("name", "winner"), [("Timeout", "later"), ("HTTPError", "escalate")])
def test_failure_routes_form_priority_tiers_with_conditions_on_the_error(name, winner):
    d = Driver(
        webhook_graph(
            on_failure("call", "later", priority=1, condition=error_is("Timeout")),
            on_failure("call", "escalate", priority=2),
        )
    )
    exc = type(name, (Failure,), {})("it failed", attempts=2)
    d.run({"call": exc})
    assert [ref for _, ref in d.dispatched] == ["call", winner]


def test_every_matching_failure_route_of_the_winning_tier_fires():
    d = Driver(webhook_graph(on_failure("call", "escalate"), on_failure("call", "later")))
    d.run({"call": Failure("x")})
    assert sorted(ref for _, ref in d.dispatched) == ["call", "escalate", "later"]


def test_when_no_failure_route_matches_the_run_fails_naming_the_node():
    d = Driver(webhook_graph(on_failure("call", "later", condition=error_is("Timeout"))))
    outcome = d.run({"call": Failure("refused")})
    assert isinstance(outcome, decisions.Fail)
    assert outcome.error == {
        "name": "NodeFailed",
        "message": "node 'call' failed: refused",
        "node": "call",
    }


def test_a_routed_failure_inside_a_branch_keeps_the_branch_alive_for_its_fan_in():
    document = doc(
        [
            node("load", output_mapping={"/items": "/items"}),
            node("work", input_mapping={"item": "/branch/item"}, output_mapping={"/r": "/item"}),
            node(
                "fallback", input_mapping={"m": "/errors/work/message"}, output_mapping={"/r": "/m"}
            ),
            node("join"),
        ],
        [
            t("load", "work", ref="each", foreach={"collection": "/items"}),
            on_failure("work", "fallback"),
            t(
                "work",
                "join",
                synchronization={"fan_out": "each", "merge": {"source": "/r", "target": "/out"}},
            ),
            t(
                "fallback",
                "join",
                ref="fell",
                synchronization={"fan_out": "each", "merge": {"source": "/r", "target": "/out"}},
            ),
        ],
    )

    def work(state, path):
        item = state.contexts[state.tokens[path].scope]["branch"]["item"]
        return Failure(f"no {item}") if item == "b" else {"item": item}

    d = Driver(document)

    def fallback(state, path):
        return decisions.node_input(d.graph, state, path)

    outcome = d.run({"load": {"items": ["a", "b", "c"]}, "work": work, "fallback": fallback})
    assert isinstance(outcome, decisions.Complete)
    assert sorted(outcome.output["out"]) == ["a", "c", "no b"]


def test_a_workflow_node_catches_its_childs_failure_only_with_catch():
    nodes = [node("child", "workflow", action={"workflow": "child-wf", "catch": True}), node("x")]
    d = Driver(doc(nodes, [on_failure("child", "x")]))
    child = {"workflow": "child-wf", "id": "r-0-child", "status": "errored", "error": None}
    outcome = d.run({"child": Failure("child ended errored", child=child)})
    assert [ref for _, ref in d.dispatched] == ["child", "x"]
    assert outcome.output["errors"]["child"]["child"] == child

    plain = Driver(doc(nodes, [on_failure("child", "x")]))
    plain.state.tokens["0"]  # a child failure the node does not catch fails the run
    decisions.node_started(plain.state, "0")
    decisions.node_failed(
        plain.graph, plain.state, "0", {"name": "ChildWorkflowError"}, at_ms=0, routable=False
    )
    assert plain.state.outcome[0] == "failed"


def test_the_error_written_for_a_failure_route_is_held_to_the_context_schema():
    schema = {"type": "object", "properties": {"errors": False}}
    d = Driver(doc([node("call"), node("x")], [on_failure("call", "x")], context_schema=schema))
    outcome = d.run({"call": Failure("down")})
    assert isinstance(outcome, decisions.Fail) and outcome.error["name"] == "ContextInvalid"


# -- run timeout: human_gate ---------------------------------------------------------------


def gated(*, gate=True, **extra):
    nodes = [
        node("start"),
        node("wait", "sleep", action={"duration": "2 hours"}),
        node("done", output_mapping={"/outcome": "/outcome"}),
    ]
    transitions = [t("start", "wait"), t("wait", "done")]
    if gate:
        nodes += [
            node(
                "review", "human", action={"event_type": "review"}, output_mapping={"/review": ""}
            ),
            node("resume", output_mapping={"/outcome": "/outcome"}),
        ]
        transitions.append(t("review", "resume"))
        extra = {"on_timeout": "human_gate", "timeout_gate": "review", **extra}
    return doc(nodes, transitions, timeout="1 hour", **extra)


def test_on_timeout_human_gate_waits_at_the_gate_instead_of_failing():
    d = Driver(gated())
    late = {"wait": 2 * 3_600_000, "review": 9 * 3_600_000}
    outcome = d.run(
        {
            "wait": None,
            "done": {"outcome": "done"},
            "review": {"approved": True},
            "resume": {"outcome": "reviewed"},
        },
        at_ms=lambda path, ref: late.get(ref, 0),
    )
    assert isinstance(outcome, decisions.Complete)
    assert outcome.output["outcome"] == "reviewed" and outcome.output["review"]["approved"]
    tokens = d.tokens()
    assert tokens["2"] == ("done", "timed_out")  # what ran at the deadline stops there
    assert tokens["3"] == ("review", "completed") and tokens["4"] == ("resume", "completed")
    timed_out = next(e for e in d.state.journal if e["type"] == "run_timed_out")
    assert timed_out["data"] == {"gate": "review"}


def test_with_on_timeout_fail_the_same_run_fails():
    d = Driver(gated(gate=False, on_timeout="fail"))
    outcome = d.run({}, at_ms=lambda path, ref: 2 * 3_600_000 if ref == "wait" else 0)
    assert isinstance(outcome, decisions.Fail) and outcome.error["name"] == "RunTimeout"


# -- output_schema -------------------------------------------------------------------------

OUTPUT = {"type": "object", "required": ["outcome"], "properties": {"outcome": {"type": "string"}}}


def test_a_final_context_that_breaks_the_output_schema_fails_the_run_with_the_paths():
    document = doc([node("a", output_mapping={"/outcome": "/v"})], [], output_schema=OUTPUT)
    d = Driver(document)
    outcome = d.run({"a": {"v": 3}})
    assert isinstance(outcome, decisions.Fail) and outcome.error["name"] == "OutputInvalid"
    assert outcome.error["errors"] == [{"path": "/outcome", "message": "3 is not of type 'string'"}]
    assert d.events()[-1] == "run_failed"
    assert isinstance(Driver(document).run({"a": {"v": "ok"}}), decisions.Complete)


# -- the fan-out bound ---------------------------------------------------------------------


def fanned(*failure_routes):
    return doc(
        [node("load", output_mapping={"/items": "/items"}), node("work")]
        + [node(r["to"]) for r in failure_routes],
        [t("load", "work", ref="each", foreach={"collection": "/items"}), *failure_routes],
    )


def test_a_foreach_longer_than_the_fan_out_maximum_fails_its_node_before_any_branch_opens():
    d = Driver(fanned(), max_fan_out=100)
    outcome = d.run({"load": {"items": list(range(100_000))}})
    assert isinstance(outcome, decisions.Fail) and outcome.error["name"] == "NodeFailed"
    assert "100000 branches" in outcome.error["message"] and "100" in outcome.error["message"]
    assert d.tokens() == {"0": ("load", "failed")} and d.state.groups == {}
    assert d.state.tokens["0"].error["name"] == "FanOutTooLarge"


def test_a_fan_out_larger_than_the_steps_left_fails_its_node_and_may_be_routed():
    d = Driver(fanned(on_failure("load", "too-many")), max_fan_out=1000, max_steps=50)
    d.run({"load": {"items": list(range(60))}})
    assert [ref for _, ref in d.dispatched] == ["load", "too-many"]
    assert "50 steps" in d.state.context["errors"]["load"]["message"]
    small = Driver(fanned(), max_fan_out=1000, max_steps=50)
    assert isinstance(small.run({"load": {"items": list(range(40))}}), decisions.Complete)


# -- validation ----------------------------------------------------------------------------


def refused(document, *, publishing=False) -> InvalidGraph:
    with pytest.raises(InvalidGraph) as info:
        parse(document, publishing=publishing)
    return info.value


@pytest.mark.parametrize(
    "kind_action",
    [
        ("human", {"event_type": "ack"}),
        ("sleep", {"duration": "1 second"}),
        ("set", {"values": {"/a": {"value": 1}}}),
        ("workflow", {"workflow": "child-wf"}),
    ],
)
def test_a_failure_route_from_a_node_that_cannot_fail_is_refused(kind_action):
    kind, action = kind_action
    error = refused(doc([node("n", kind, action=action), node("x")], [on_failure("n", "x")]))
    assert error.extra["ref"] == "n->x" and "can never be taken" in error.message


def test_a_workflow_node_with_catch_or_a_binding_may_have_failure_routes():
    for action in ({"workflow": "child-wf", "catch": True}, {"binding": "other"}):
        parse(doc([node("n", "workflow", action=action), node("x")], [on_failure("n", "x")]))


def test_a_failure_route_shadowed_by_an_always_matching_one_is_refused():
    error = refused(
        webhook_graph(
            on_failure("call", "escalate", priority=1),
            on_failure("call", "later", priority=2, ref="never"),
        )
    )
    assert error.extra["ref"] == "never" and "'call->escalate'" in error.message


def test_a_shadowed_success_route_is_refused_on_publish_only():
    document = doc([node("a"), node("b"), node("c")], [t("a", "b"), t("a", "c", priority=2)])
    parse(document)  # a version published before this check still runs
    assert refused(document, publishing=True).extra["ref"] == "a->c"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"on_timeout": "human_gate"}, "timeout_gate"),
        ({"on_timeout": "human_gate", "timeout_gate": "start"}, "timeout_gate"),
        ({"timeout_gate": "done"}, "timeout_gate"),
        ({"tags": ["ok", "ok"]}, "tags"),
        ({"tags": "ok"}, "tags"),
        ({"output_schema": {"type": 3}}, "output_schema"),
    ],
)
def test_bad_gate_tags_and_output_schema_are_refused(change, field):
    assert refused(gated(gate=False, **change)).extra["field"] == field


def test_the_timeout_gate_counts_as_reachable_and_tags_parse():
    graph = parse(gated(tags=["labs", "clinic:v2"]))
    assert graph.timeout_gate == "review" and graph.tags == ("labs", "clinic:v2")


def test_a_bad_on_is_refused():
    assert refused(webhook_graph(t("call", "later", on="maybe"))).extra["field"] == "on"


def test_branches_that_wait_count_the_steps_their_first_node_takes():
    document = doc(
        [
            node("load", output_mapping={"/items": "/items"}),
            node("ask", "human", action={"event_type": "ok"}),
        ],
        [t("load", "ask", ref="each", foreach={"collection": "/items"})],
    )
    d = Driver(document, max_fan_out=1000, max_steps=1024)
    d.state.branch_steps = {"human": 4}  # graph-run v3: start, two waits, the lane's end
    outcome = d.run({"load": {"items": list(range(300))}})
    assert isinstance(outcome, decisions.Fail)
    assert "need at least 1200 steps" in outcome.error["message"]


def test_an_errors_value_that_is_not_an_object_fails_the_run_with_a_mapping_error():
    document = doc(
        [node("start", output_mapping={"/errors": "/e"}), node("call"), node("x")],
        [t("start", "call"), on_failure("call", "x")],
    )
    d = Driver(document)
    outcome = d.run({"start": {"e": ["not", "an", "object"]}, "call": Failure("down")})
    assert isinstance(outcome, decisions.Fail) and outcome.error["name"] == "MappingError"
