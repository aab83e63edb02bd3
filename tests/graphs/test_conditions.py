"""Structured conditions: every operator, missing paths, type mismatches, and bad shapes."""

import pytest

from graphs.conditions import ConditionError, check, evaluate

CTX = {"n": 5, "s": "abc", "flag": True, "list": [1, 2], "obj": {"k": None}}


def cmp(op, left, right):
    return {"op": op, "left": left, "right": right}


def path(p):
    return {"path": p}


def value(v):
    return {"value": v}


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        (cmp("==", path("/n"), value(5)), True),
        (cmp("==", path("/flag"), value(1)), False),  # JSON true is not 1
        (cmp("!=", path("/s"), value("x")), True),
        (cmp("<", path("/n"), value(6)), True),
        (cmp("<=", path("/n"), value(5)), True),
        (cmp(">", path("/n"), value(5)), False),
        (cmp(">=", path("/n"), value(5)), True),
        (cmp(">", path("/s"), value(1)), False),  # different kinds never order
        (cmp("<", path("/missing"), value(1)), False),  # missing reads as null
        (cmp("==", path("/missing"), value(None)), True),
        (cmp("in", path("/n"), value([4, 5])), True),
        (cmp("in", value(3), path("/list")), False),
        (cmp("in", value("b"), path("/s")), True),
        (cmp("in", value("k"), path("/obj")), True),
        ({"op": "exists", "path": "/obj/k"}, True),  # present with null is present
        ({"op": "exists", "path": "/obj/nope"}, False),
        ({"and": [cmp("==", path("/n"), value(5)), {"op": "exists", "path": "/s"}]}, True),
        ({"or": [cmp("==", path("/n"), value(1)), cmp("==", path("/s"), value("abc"))]}, True),
        ({"not": cmp("==", path("/n"), value(5))}, False),
    ],
)
def test_condition_evaluates(cond, expected):
    check(cond)
    assert evaluate(cond, CTX) is expected


def test_no_condition_always_matches():
    assert evaluate(None, {}) is True


@pytest.mark.parametrize(
    "cond",
    [
        "n == 5",  # no expressions from strings
        {"op": "=~", "left": path("/n"), "right": value(1)},
        {"op": "==", "left": path("/n")},
        {"op": "==", "left": {"path": "n"}, "right": value(1)},  # not a pointer
        {"op": "==", "left": {"expr": "1+1"}, "right": value(2)},
        {"and": []},
        {"not": [cmp("==", path("/n"), value(5))]},
        {"op": "exists", "path": "/x", "extra": 1},
    ],
)
def test_condition_outside_the_vocabulary_is_refused(cond):
    with pytest.raises(ConditionError):
        check(cond)
