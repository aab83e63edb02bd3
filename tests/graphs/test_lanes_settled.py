"""When a fan-out's join is decided by the branches finished so far (graphs.lanes.settled, the
`until` of its step.parallel) — pure, no database."""

import pytest

from graphs.lanes import settled
from graphs.state import Group
from tests.graphs.helpers import doc, node, parse


def graph(sync=None):
    transitions = [{"ref": "each", "from": "a", "to": "b", "spawn_count": 3}]
    join = {"ref": "in", "from": "b", "to": "c"}  # without sync: each branch goes on to c
    transitions.append(join if sync is None else {**join, "synchronization": sync})
    return parse(doc([node("a"), node("b"), node("c")], transitions))


def group(fan_in="in"):
    return Group(
        id="0:each", fan_out="each", fan_in=fan_in, origin="0", parent_scope="",
        scopes=["0.0", "0.1", "0.2"], started_ms=0,
    )  # fmt: skip


def lane(index, *, arrived_at=None, failed=False, outcome=None, timed_out=False):
    arrivals = (
        [] if arrived_at is None else [{"group": "0:each", "index": index, "at_ms": arrived_at}]
    )
    return {
        "arrivals": arrivals,
        "failed": [f"0.{index}.0"] if failed else [],
        "outcome": outcome,
        "timed_out": timed_out,
    }


@pytest.mark.parametrize(
    ("strategy", "done", "expected"),
    [
        ("all", {"0": lane(0, arrived_at=5), "1": lane(1, arrived_at=6)}, False),
        ("all", {str(i): lane(i, arrived_at=i) for i in range(3)}, True),
        ("all", {"1": lane(1)}, True),  # ended without arriving: all can no longer be met
        ("any", {"2": lane(2, arrived_at=9)}, True),
        ("any", {"0": lane(0), "1": lane(1)}, False),  # one branch can still arrive
        ({"m_of_n": 2}, {"0": lane(0, arrived_at=1)}, False),
        ({"m_of_n": 2}, {"0": lane(0, arrived_at=1), "2": lane(2, arrived_at=2)}, True),
        ({"m_of_n": 2}, {"0": lane(0), "1": lane(1)}, True),  # unsatisfiable
    ],
)
def test_strategy_met_or_unreachable(strategy, done, expected):
    assert (
        settled(graph({"fan_out": "each", "strategy": strategy}), group(), done, None) is expected
    )


def test_the_timer_a_late_arrival_a_failed_run_or_a_run_timeout_settle_it():
    g = graph({"fan_out": "each", "timeout": "1 second", "on_timeout": "proceed_with_available"})
    assert settled(g, group(), {"deadline": {"deadline": True}}, 1000)
    assert settled(g, group(), {"0": lane(0, arrived_at=1000)}, 1000)
    assert not settled(g, group(), {"0": lane(0, arrived_at=999)}, 1000)
    assert settled(g, group(), {"0": lane(0, outcome={"name": "X", "message": "m"})}, 1000)
    assert settled(g, group(), {"0": lane(0, timed_out=True)}, 1000)


def test_without_a_fan_in_only_a_failed_branch_settles_it_early():
    g = graph()
    assert not settled(g, group(fan_in=None), {"0": lane(0), "1": lane(1)}, None)
    assert settled(g, group(fan_in=None), {"1": lane(1, failed=True)}, None)
