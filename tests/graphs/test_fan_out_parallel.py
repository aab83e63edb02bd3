"""Fan-out branches run side by side (graph-run v2: lanes of one step.parallel): branches
waiting on people wait together and finish in any order, a fan-in settles as soon as its
strategy or its timeout says so, and runs started on v1 keep replaying on v1."""

import pytest

from graphs import answers, services
from graphs.models import GraphToken
from ops.errors import ApiError
from tests.graphs.helpers import doc, node
from tests.graphs.test_runs_harness import publish, start, status
from workflows import services as engine


def waiting_doc(sync: dict, *, human_timeout="2 days") -> dict:
    """load → foreach item: ask (human) → fan-in (sync) → done."""
    return doc(
        [
            node(
                "load", input_mapping={"items": "/input/items"}, output_mapping={"/items": "/items"}
            ),
            node(
                "ask",
                "human",
                action={"event_type": "answer", "timeout": human_timeout},
                output_mapping={"/answer": ""},
            ),
            node("done", "set", action={"values": {"/finished": {"value": True}}}),
        ],
        [
            {"ref": "each", "from": "load", "to": "ask", "foreach": {"collection": "/items"}},
            {
                "from": "ask",
                "to": "done",
                "synchronization": {
                    "fan_out": "each",
                    **sync,
                    "merge": {"source": "/answer", "target": "/answers", "strategy": "append"},
                },
            },
        ],
    )


def asks(run) -> dict[str, str]:
    return dict(GraphToken.objects.filter(run=run, node_ref="ask").values_list("path_id", "status"))


def step_statuses(harness, run) -> dict[str, str]:
    steps = harness.history("graph-run", run.run_id)["steps"]
    return {s["name"]: s["status"] for s in steps}


def test_every_branch_waits_at_once_and_answers_arrive_in_any_order(harness):
    publish(waiting_doc({"strategy": "all"}))
    run = start(harness, {"items": ["a", "b", "c", "d"]})
    # All four branches reached their human node; none holds the others back.
    assert asks(run) == {f"0.{i}.0": "executing" for i in range(4)}
    for n, answer in enumerate([3, 1, 4, 2], 1):
        harness.advance("1 minute")
        harness.send_event("graph-run", run.run_id, "answer", {"n": answer})
        expected = "complete" if n == 4 else "waiting"
        assert status(harness, run)["status"] == expected
    final = status(harness, run)["output"]
    assert sorted(a["n"] for a in final["answers"]) == [1, 2, 3, 4]
    assert final["finished"] is True
    assert set(asks(run).values()) == {"completed"}
    answers = [s for n, s in step_statuses(harness, run).items() if n.endswith(" ask answer")]
    assert answers == ["complete"] * 4  # one answer per branch


def test_a_fan_in_timeout_fires_while_branches_still_wait(harness):
    publish(
        waiting_doc(
            {"strategy": "all", "timeout": "1 hour", "on_timeout": "proceed_with_available"}
        )
    )
    run = start(harness, {"items": ["a", "b", "c"]})
    harness.send_event("graph-run", run.run_id, "answer", {"n": 1})
    assert status(harness, run)["status"] == "waiting"
    harness.advance("1 hour")
    final = status(harness, run)
    assert final["status"] == "complete"
    assert final["output"]["answers"] == [{"n": 1}]
    assert sorted(asks(run).values()) == ["cancelled", "cancelled", "completed"]
    steps = step_statuses(harness, run)
    assert sorted(s for n, s in steps.items() if n.endswith(" ask answer/any/wait")) == [
        "cancelled",
        "cancelled",
        "complete",
    ]


def test_m_of_n_proceeds_with_the_first_answers_and_cancels_the_rest(harness):
    publish(waiting_doc({"strategy": {"m_of_n": 2}}))
    run = start(harness, {"items": ["a", "b", "c"]})
    harness.send_event("graph-run", run.run_id, "answer", {"n": 1})
    assert status(harness, run)["status"] == "waiting"
    harness.advance("1 minute")
    harness.send_event("graph-run", run.run_id, "answer", {"n": 2})
    final = status(harness, run)
    assert final["status"] == "complete"
    assert final["output"]["answers"] == [{"n": 1}, {"n": 2}]
    assert sorted(asks(run).values()) == ["cancelled", "completed", "completed"]


def test_a_failing_branch_without_a_fan_in_fails_the_run_while_others_wait(harness):
    publish(
        doc(
            [
                node(
                    "load",
                    input_mapping={"items": "/input/items"},
                    output_mapping={"/items": "/items"},
                ),
                node(
                    "pick",
                    input_mapping={"item": "/branch/item"},
                    output_mapping={"/item": "/item"},
                ),
                node("ask", "human", action={"event_type": "answer", "timeout": "2 days"}),
                node("bad", name="tests.boom", retries={"limit": 0}),
            ],
            [
                {"ref": "each", "from": "load", "to": "pick", "foreach": {"collection": "/items"}},
                {
                    "from": "pick",
                    "to": "ask",
                    "condition": {
                        "op": "==",
                        "left": {"path": "/item"},
                        "right": {"value": "wait"},
                    },
                },
                {
                    "from": "pick",
                    "to": "bad",
                    "condition": {
                        "op": "==",
                        "left": {"path": "/item"},
                        "right": {"value": "fail"},
                    },
                },
            ],
        )
    )
    run = start(harness, {"items": ["wait", "fail"]})
    final = status(harness, run)
    assert final["status"] == "errored" and "bad" in final["error"]["message"]
    assert asks(run) == {"0.0.1": "cancelled"}


def test_runs_started_on_v1_finish_on_v1_while_new_runs_start_on_v2(harness):
    publish(waiting_doc({"strategy": "all"}))
    engine.workflow_version_activate(name="graph-run", version=1)
    old = start(harness, {"items": ["a", "b"]})
    assert old.instance.version == 1
    assert sorted(asks(old).values()) == ["executing", "pending"]  # v1: one branch at a time
    engine.workflow_version_activate(name="graph-run", version=2)
    new = start(harness, {"items": ["a", "b"]})
    assert new.instance.version == 2
    assert sorted(asks(new).values()) == ["executing", "executing"]
    for _ in range(2):
        harness.send_event("graph-run", old.run_id, "answer", {"n": 1})
    assert status(harness, old)["status"] == "complete"
    assert [s["name"] for s in harness.history("graph-run", old.run_id)["steps"]][:3] == [
        "0 load",
        "0.0.0 ask start",
        "0.0.0 ask",
    ]


def test_nested_fan_out_inside_a_branch_joins_before_its_outer_fan_in(harness):
    publish(
        doc(
            [
                node(
                    "load",
                    input_mapping={"items": "/input/items"},
                    output_mapping={"/items": "/items"},
                ),
                node(
                    "split",
                    input_mapping={"item": "/branch/item"},
                    output_mapping={"/parts": "/item"},
                ),
                node("part", input_mapping={"p": "/branch/item"}, output_mapping={"/p": "/p"}),
                node("joined", input_mapping={"parts": "/ps"}, output_mapping={"/ps": "/parts"}),
                node("done"),
            ],
            [
                {
                    "ref": "outer",
                    "from": "load",
                    "to": "split",
                    "foreach": {"collection": "/items"},
                },
                {
                    "ref": "inner",
                    "from": "split",
                    "to": "part",
                    "foreach": {"collection": "/parts"},
                },
                {
                    "from": "part",
                    "to": "joined",
                    "synchronization": {
                        "fan_out": "inner",
                        "merge": {"source": "/p", "target": "/ps", "strategy": "append"},
                    },
                },
                {
                    "from": "joined",
                    "to": "done",
                    "synchronization": {
                        "fan_out": "outer",
                        "merge": {"source": "/ps", "target": "/all", "strategy": "keyed_by_branch"},
                    },
                },
            ],
        )
    )
    run = start(harness, {"items": [[1, 2], [3], []]})
    final = status(harness, run)
    assert final["status"] == "complete", final
    assert final["output"]["all"] == {"0": [1, 2], "1": [3], "2": []}
    services.run_get(run_id=run.run_id)  # the projection is readable
    statuses = set(GraphToken.objects.filter(run=run).values_list("status", flat=True))
    assert statuses == {"completed"}


def test_an_answer_naming_a_token_goes_to_that_branch(harness):
    publish(waiting_doc({"strategy": "all"}))
    run = start(harness, {"items": ["a", "b", "c"]})
    answers.run_answer(run_id=run.run_id, type="answer", payload={"n": 2}, token="0.2.0")
    harness.run_until_idle()
    # Answered and arrived at the fan-in (its rows are stored while the others still wait).
    assert asks(run) == {
        "0.0.0": "executing",
        "0.1.0": "executing",
        "0.2.0": "waiting_for_siblings",
    }
    harness.advance("1 minute")
    answers.run_answer(
        run_id=run.run_id, type="answer", payload={"n": 0}
    )  # no token: first waiting
    harness.run_until_idle()
    assert asks(run)["0.0.0"] == "waiting_for_siblings" and asks(run)["0.1.0"] == "executing"
    harness.advance("1 minute")
    answers.run_answer(run_id=run.run_id, type="answer", payload={"n": 1}, token="0.1.0")
    harness.run_until_idle()
    final = status(harness, run)
    assert final["status"] == "complete"
    assert final["output"]["answers"] == [{"n": 2}, {"n": 0}, {"n": 1}]  # in answer order


@pytest.mark.parametrize(
    ("token", "type_", "code"),
    [
        ("0.9.0", "answer", "no_waiting_human"),  # no such token
        ("0", "answer", "no_waiting_human"),  # not a human node
        ("0.1.0", "other", "no_waiting_human"),  # waits for another type
    ],
)
def test_an_answer_naming_a_token_that_does_not_wait_for_it_is_refused(harness, token, type_, code):
    publish(waiting_doc({"strategy": "all"}))
    run = start(harness, {"items": ["a", "b"]})
    with pytest.raises(ApiError) as refused:
        answers.run_answer(run_id=run.run_id, type=type_, payload={}, token=token)
    assert (refused.value.status, refused.value.code) == (409, code)
    assert token in refused.value.message


def test_runs_on_older_interpreters_take_answers_by_type_only(harness):
    publish(waiting_doc({"strategy": "all"}))
    engine.workflow_version_activate(name="graph-run", version=2)
    run = start(harness, {"items": ["a"]})
    with pytest.raises(ApiError) as refused:
        answers.run_answer(run_id=run.run_id, type="answer", payload={}, token="0.0.0")
    assert (refused.value.status, refused.value.code) == (409, "event_not_targetable")
    answers.run_answer(run_id=run.run_id, type="answer", payload={"n": 1})
    harness.run_until_idle()
    assert status(harness, run)["status"] == "complete"


@pytest.mark.parametrize(
    ("on_timeout", "expected"), [("fail", "errored"), ("cancel_all", "complete")]
)
def test_the_run_timeout_fires_while_branches_wait_longer_than_the_run_may_last(
    harness, on_timeout, expected
):
    publish(
        waiting_doc({"strategy": "all"}, human_timeout="7 days")
        | {"timeout": "1 day", "on_timeout": on_timeout}
    )
    run = start(harness, {"items": ["a", "b"]})
    harness.send_event("graph-run", run.run_id, "answer", {"n": 1})
    harness.advance("1 day")
    final = status(harness, run)
    assert final["status"] == expected, final
    # The answered branch waited at the fan-in; both end as the run's timeout says.
    gone = "timed_out" if on_timeout == "fail" else "cancelled"
    assert sorted(asks(run).values()) == [gone, gone]


def test_the_run_timeout_fires_while_a_top_level_node_sleeps(harness):
    publish(
        doc(
            [
                node("nap", "sleep", action={"duration": "3 days"}),
                node("after", "set", action={"values": {"/late": {"value": True}}}),
            ],
            [{"from": "nap", "to": "after"}],
            timeout="1 hour",
        )
    )
    run = start(harness, {})
    harness.advance("1 hour")
    final = status(harness, run)
    assert final["status"] == "errored" and "timeout" in final["error"]["message"]
    assert GraphToken.objects.get(run=run, node_ref="nap").status == "timed_out"


def test_a_failed_branch_fails_an_all_fan_in_at_once_while_others_wait(harness):
    document = waiting_doc({"strategy": "all"})
    document["nodes"].append(node("bad", name="tests.boom", retries={"limit": 0}))
    document["transitions"][0]["to"] = "route"
    document["nodes"].append(node("route", input_mapping={"item": "/branch/item"}))
    document["transitions"] += [
        {
            "from": "route",
            "to": "ask",
            "condition": {"op": "!=", "left": {"path": "/branch/item"}, "right": {"value": "x"}},
        },
        {
            "from": "route",
            "to": "bad",
            "condition": {"op": "==", "left": {"path": "/branch/item"}, "right": {"value": "x"}},
        },
    ]
    publish(document)
    run = start(harness, {"items": ["a", "x", "b"]})
    final = status(harness, run)
    assert final["status"] == "errored"
    assert "needs 3 of 3" in final["error"]["message"]
    assert set(asks(run).values()) == {"cancelled"}
