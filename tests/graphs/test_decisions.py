"""Pure decisions: every transition rule, with no database and fake action results."""

import pytest

from graphs import decisions
from graphs.decisions import MergeError, merge_values
from graphs.pointers import MISSING
from tests.graphs.helpers import Driver, doc, node


def t(src, dst, **extra):
    return {"from": src, "to": dst, **extra}


def eq(pointer, literal):
    return {"op": "==", "left": {"path": pointer}, "right": {"value": literal}}


def linear(*refs):
    return doc([node(r) for r in refs], [t(a, b) for a, b in zip(refs, refs[1:], strict=False)])


def test_linear_run_visits_each_node_once_and_completes_with_the_context():
    d = Driver(linear("a", "b", "c"), {"x": 1})
    outcome = d.run({})
    assert isinstance(outcome, decisions.Complete)
    assert d.dispatched == [("0", "a"), ("1", "b"), ("2", "c")]
    assert outcome.output == {"input": {"x": 1}}
    assert d.events()[0] == "run_started" and d.events()[-1] == "run_completed"
    numbers = [e["sequence_number"] for e in d.state.journal]
    assert numbers == list(range(1, len(numbers) + 1))


def test_output_mapping_writes_the_context_and_input_mapping_reads_it():
    document = doc(
        [
            node("a", output_mapping={"/got": "/v", "/whole": ""}),
            node("b", input_mapping={"from_a": "/got", "lit": {"value": 7}, "none": "/nope"}),
        ],
        [t("a", "b")],
    )
    d = Driver(document)
    seen = {}

    def b(state, path):
        seen.update(decisions.node_input(d.graph, state, path))
        return {}

    d.run({"a": {"v": 3}, "b": b})
    assert seen == {"from_a": 3, "lit": 7, "none": None}
    assert d.state.context["whole"] == {"v": 3}
    assert "context_updated" in d.events()


def tiered():
    return doc(
        [node("start", output_mapping={"/score": "/score"}), node("hi"), node("mid"), node("lo")],
        [
            t(
                "start",
                "hi",
                priority=1,
                condition={"op": ">", "left": {"path": "/score"}, "right": {"value": 10}},
            ),
            t(
                "start",
                "mid",
                priority=2,
                condition={"op": ">", "left": {"path": "/score"}, "right": {"value": 5}},
            ),
            t("start", "lo", priority=3),
        ],
    )


@pytest.mark.parametrize(("score", "winner"), [(11, "hi"), (7, "mid"), (1, "lo")])
def test_the_first_tier_with_a_match_wins(score, winner):
    d = Driver(tiered())
    d.run({"start": {"score": score}})
    assert [ref for _, ref in d.dispatched] == ["start", winner]


def test_every_match_in_the_winning_tier_fires_in_parallel():
    document = doc(
        [node("s"), node("x"), node("y"), node("z")],
        [t("s", "x", priority=1), t("s", "y", priority=1), t("s", "z", priority=2)],
    )
    d = Driver(document)
    d.run({})
    assert sorted(ref for _, ref in d.dispatched) == ["s", "x", "y"]


def test_no_matching_transition_fails_the_run_naming_the_node():
    document = doc([node("s"), node("x")], [t("s", "x", condition=eq("/input/go", True))])
    d = Driver(document, {"go": False})
    outcome = d.run({})
    assert isinstance(outcome, decisions.Fail)
    assert outcome.error["name"] == "NoTransition" and outcome.error["node"] == "s"
    assert d.events()[-1] == "run_failed"


def test_a_failed_node_fails_the_run():
    d = Driver(linear("a", "b"))
    outcome = d.run({"a": RuntimeError("down")})
    assert isinstance(outcome, decisions.Fail)
    assert d.tokens()["0"] == ("a", "failed")
    assert "node_failed" in d.events()


def fan(strategy="all", merge="append", *, foreach=True, extra_sync=None, after=None):
    fan_out = {
        "ref": "each",
        **({"foreach": {"collection": "/items"}} if foreach else {"spawn_count": 3}),
    }
    sync = {
        "fan_out": "each",
        "strategy": strategy,
        "merge": {"source": "/r", "target": "/out", "strategy": merge},
    }
    sync.update(extra_sync or {})
    return doc(
        [
            node("load", output_mapping={"/items": "/items"}),
            node(
                "work",
                input_mapping={
                    "item": "/branch/item",
                    "index": "/branch/index",
                    "total": "/branch/total",
                },
                output_mapping={"/r": ""},
            ),
            node("join"),
        ],
        [t("load", "work", **fan_out), t("work", "join", synchronization=sync)],
    )


def test_foreach_opens_one_branch_per_item_with_branch_info_and_merges_in_order():
    d = Driver(fan())
    outcome = d.run(
        {
            "load": {"items": ["a", "b", "c"]},
            "work": lambda s, p: decisions.node_input(d.graph, s, p),
        }
    )
    assert isinstance(outcome, decisions.Complete)
    assert d.state.context["out"] == [
        {"item": "a", "index": 0, "total": 3},
        {"item": "b", "index": 1, "total": 3},
        {"item": "c", "index": 2, "total": 3},
    ]
    tokens = d.state.tokens
    assert [p for p in tokens if tokens[p].node == "work"] == ["0.0.0", "0.1.0", "0.2.0"]
    assert tokens["0.1.0"].fan_out == "each" and tokens["0.1.0"].branch_index == 1
    assert tokens["0.1.0"].branch_total == 3 and tokens["0.1.0"].parent == "0"
    assert tokens["1"].node == "join" and tokens["1"].scope == ""
    assert d.events().count("fan_in_waiting") == 3 and d.events().count("fan_in_completed") == 1
    # Branch outputs stay in their branch: the run context only gets the merge target.
    assert "r" not in d.state.context and "branch" not in d.state.context


def test_spawn_count_opens_n_branches_with_null_items():
    d = Driver(fan(foreach=False))
    d.run({"work": lambda s, p: decisions.node_input(d.graph, s, p)["item"]})
    assert d.state.context["out"] == [None, None, None]


def test_empty_foreach_goes_straight_to_the_fan_in_with_an_empty_merge():
    d = Driver(fan())
    outcome = d.run({"load": {"items": []}})
    assert isinstance(outcome, decisions.Complete)
    assert d.state.context["out"] == []
    assert [ref for _, ref in d.dispatched] == ["load", "join"]


def test_foreach_over_a_non_array_fails_the_run_naming_the_transition():
    d = Driver(fan())
    outcome = d.run({"load": {"items": "nope"}})
    assert outcome.error["name"] == "ForeachNotArray" and outcome.error["transition"] == "each"


def test_any_continues_with_the_first_arrival_and_cancels_the_rest():
    d = Driver(fan("any"))
    d.run(
        {
            "load": {"items": [1, 2, 3]},
            "work": lambda s, p: s.contexts[s.tokens[p].scope]["branch"]["item"],
        }
    )
    assert d.state.context["out"] == [1]
    statuses = {p: tok.status for p, tok in d.state.tokens.items() if tok.node == "work"}
    assert statuses == {"0.0.0": "completed", "0.1.0": "cancelled", "0.2.0": "cancelled"}
    assert [ref for _, ref in d.dispatched].count("work") == 1


def test_m_of_n_waits_for_m_branches():
    d = Driver(fan({"m_of_n": 2}))
    d.run(
        {
            "load": {"items": [1, 2, 3]},
            "work": lambda s, p: s.contexts[s.tokens[p].scope]["branch"]["item"],
        }
    )
    assert d.state.context["out"] == [1, 2]


def test_m_of_n_tolerates_failed_branches_while_enough_can_still_arrive():
    d = Driver(fan({"m_of_n": 2}))

    def work(state, path):
        item = state.contexts[state.tokens[path].scope]["branch"]["item"]
        return RuntimeError("bad") if item == 1 else item

    outcome = d.run({"load": {"items": [1, 2, 3]}, "work": work})
    assert isinstance(outcome, decisions.Complete)
    assert d.state.context["out"] == [2, 3]


def test_all_fails_once_a_branch_fails():
    d = Driver(fan("all"))

    def work(state, path):
        return RuntimeError("bad") if state.tokens[path].branch_index == 1 else 1

    outcome = d.run({"load": {"items": [1, 2, 3]}, "work": work})
    assert isinstance(outcome, decisions.Fail)
    assert outcome.error["name"] == "FanInUnsatisfiable"
    assert d.state.tokens["0.2.0"].status == "cancelled"


def branch_times(late_index, late_ms):
    return lambda path, ref: late_ms if ref == "work" and path.startswith(f"0.{late_index}.") else 0


def test_fan_in_timeout_proceeds_with_the_branches_that_arrived_in_time():
    d = Driver(fan(extra_sync={"timeout": "1 minute", "on_timeout": "proceed_with_available"}))
    # Branch 0 finishes at 0 ms, branch 1 at two minutes: the timeout fires before it is used.
    results = {
        "load": {"items": [10, 20, 30]},
        "work": lambda s, p: s.contexts[s.tokens[p].scope]["branch"]["item"],
    }
    at = {"0.0.0": 0, "0.1.0": 120_000}
    outcome = d.run(results, at_ms=lambda path, ref: at.get(path, 0))
    assert isinstance(outcome, decisions.Complete)
    assert d.state.context["out"] == [10]
    assert d.state.tokens["0.2.0"].status == "cancelled"


def test_fan_in_timeout_with_fail_fails_the_run():
    d = Driver(fan(extra_sync={"timeout": "1 minute", "on_timeout": "fail"}))
    results = {"load": {"items": [1, 2]}, "work": 1}
    outcome = d.run(results, at_ms=lambda path, ref: 120_000 if path == "0.0.0" else 0)
    assert outcome.error["name"] == "FanInTimeout"


def test_run_timeout_fails_or_cancels_all():
    for on_timeout, expected in (("fail", decisions.Fail), ("cancel_all", decisions.Complete)):
        d = Driver(linear("a", "b", "c") | {"timeout": "1 hour", "on_timeout": on_timeout})
        outcome = d.run({}, at_ms=lambda path, ref: 7_200_000 if ref == "b" else 0)
        assert isinstance(outcome, expected)
        assert [ref for _, ref in d.dispatched] == ["a", "b"]


def test_human_timeout_output_lets_a_lower_tier_catch_it():
    document = doc(
        [node("ack", output_mapping={"/ack": ""}), node("done"), node("escalate")],
        [
            t("ack", "done", priority=1, condition=eq("/ack/approved", True)),
            t("ack", "escalate", priority=2),
        ],
    )
    d = Driver(document)
    first = d.state.tokens["0"]
    decisions.node_started(d.state, first.path)
    decisions.node_completed(d.graph, d.state, "0", {"timed_out": True}, at_ms=0, timed_out=True)
    d.run({})
    assert [ref for _, ref in d.dispatched] == ["escalate"]
    assert d.state.tokens["0"].status == "timed_out"


def test_loops_stop_at_max_iterations_and_fall_through_to_the_next_tier():
    document = doc(
        [node("poll"), node("done")],
        [
            t("poll", "poll", priority=1, loop_config={"max_iterations": 3}),
            t("poll", "done", priority=2),
        ],
    )
    d = Driver(document)
    d.run({})
    assert [ref for _, ref in d.dispatched] == ["poll"] * 4 + ["done"]


def test_nested_fan_out_keeps_branch_contexts_apart():
    document = doc(
        [
            node("load", output_mapping={"/outer": "/outer"}),
            node("split", output_mapping={"/inner": "/inner"}),
            node("leaf", input_mapping={"v": "/branch/item"}, output_mapping={"/r": "/v"}),
            node("join_inner", action={}),
            node("join_outer"),
        ],
        [
            t("load", "split", ref="outer", foreach={"collection": "/outer"}),
            t("split", "leaf", ref="inner", foreach={"collection": "/inner"}),
            t(
                "leaf",
                "join_inner",
                synchronization={
                    "fan_out": "inner",
                    "merge": {"source": "/r", "target": "/rs", "strategy": "append"},
                },
            ),
            t(
                "join_inner",
                "join_outer",
                synchronization={
                    "fan_out": "outer",
                    "merge": {"source": "/rs", "target": "/all", "strategy": "keyed_by_branch"},
                },
            ),
        ],
    )
    d = Driver(document)
    d.run(
        {
            "load": {"outer": ["x", "y"]},
            "split": lambda s, p: {
                "inner": [
                    s.contexts[s.tokens[p].scope]["branch"]["item"] + str(i) for i in range(2)
                ]
            },
            "leaf": lambda s, p: decisions.node_input(d.graph, s, p),
        }
    )
    assert d.state.context["all"] == {"0": ["x0", "x1"], "1": ["y0", "y1"]}
    assert "0.0.0.0.0" in d.state.tokens  # token 0 of inner branch 0 of outer branch 0


@pytest.mark.parametrize(
    ("strategy", "existing", "expected"),
    [
        ("append", MISSING, [{"a": 1}, {"b": 2}]),
        ("append", [0], [0, {"a": 1}, {"b": 2}]),
        ("merge_object", {"z": 0}, {"z": 0, "a": 1, "b": 2}),
        ("keyed_by_branch", MISSING, {"2": {"a": 1}, "0": {"b": 2}}),
        ("last_wins", MISSING, {"b": 2}),
    ],
)
def test_merge_strategies(strategy, existing, expected):
    values = [(2, {"a": 1}), (1, MISSING), (0, {"b": 2})]
    assert merge_values(strategy, values, existing=existing) == expected


def test_merge_object_refuses_non_objects():
    with pytest.raises(MergeError):
        merge_values("merge_object", [(0, [1])])


def test_context_schema_violation_fails_the_run():
    document = linear("a", "b") | {
        "context_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}
    }
    document["nodes"][0]["output_mapping"] = {"/n": "/n"}
    d = Driver(document)
    outcome = d.run({"a": {"n": "not a number"}})
    assert outcome.error["name"] == "ContextInvalid"
    assert outcome.error["errors"][0]["path"] == "/n"


def test_branch_writes_never_reach_the_parent_context_they_share_values_with():
    document = doc(
        [
            node("load", output_mapping={"/items": "/items", "/shared": "/shared"}),
            node("work", output_mapping={"/shared/list/-": "/v", "/shared/deep/x": "/v"}),
            node("join"),
        ],
        [
            t("load", "work", ref="each", foreach={"collection": "/items"}),
            t("work", "join", synchronization={"fan_out": "each"}),
        ],
    )
    d = Driver(document)
    shared = {"list": [0], "deep": {"x": 0}}
    d.run({"load": {"items": [1, 2], "shared": shared}, "work": {"v": 9}})
    assert d.state.context["shared"] == {"list": [0], "deep": {"x": 0}}
    branches = [c for scope, c in d.state.contexts.items() if scope]
    assert [c["shared"] for c in branches] == [{"list": [0, 9], "deep": {"x": 9}}] * 2
