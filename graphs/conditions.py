"""Structured transition conditions, evaluated against a context. Nothing is parsed from strings.

    {"op": "==|!=|<|<=|>|>=|in", "left": operand, "right": operand}
    {"op": "exists", "path": pointer}
    {"and": [cond, ...]}  {"or": [cond, ...]}  {"not": cond}

An operand is {"path": pointer} or {"value": literal}. A missing path reads as null; ordering
comparisons between values of different kinds (or with null) are false, never an error, so a
condition on data that has not arrived simply does not match.
"""

from graphs import pointers

COMPARISONS = ("==", "!=", "<", "<=", ">", ">=", "in")


class ConditionError(ValueError):
    pass


def check(cond) -> None:
    """Raise ConditionError when `cond` is not in the vocabulary (used on publish)."""
    if not isinstance(cond, dict):
        raise ConditionError(f"a condition must be an object, got {cond!r}")
    if "and" in cond or "or" in cond:
        key = "and" if "and" in cond else "or"
        if set(cond) != {key} or not isinstance(cond[key], list) or not cond[key]:
            raise ConditionError(f"{key!r} takes a non-empty list of conditions and nothing else")
        for item in cond[key]:
            check(item)
        return
    if "not" in cond:
        if set(cond) != {"not"}:
            raise ConditionError("'not' takes one condition and nothing else")
        check(cond["not"])
        return
    op = cond.get("op")
    if op == "exists":
        if set(cond) != {"op", "path"} or not pointers.is_valid(cond["path"]):
            raise ConditionError("'exists' takes {'op', 'path': pointer}")
        return
    if op not in COMPARISONS:
        raise ConditionError(f"unknown condition op {op!r}; use one of {COMPARISONS} or exists")
    if set(cond) != {"op", "left", "right"}:
        raise ConditionError(f"{op!r} takes exactly 'left' and 'right' operands")
    for side in ("left", "right"):
        _check_operand(cond[side], side)


def _check_operand(operand, side: str) -> None:
    if not isinstance(operand, dict) or len(operand) != 1 or not ({"path", "value"} & set(operand)):
        raise ConditionError(f"{side} must be {{'path': pointer}} or {{'value': literal}}")
    if "path" in operand and not pointers.is_valid(operand["path"]):
        raise ConditionError(f"{side}.path {operand['path']!r} is not a JSON pointer")


def _operand(operand: dict, context):
    if "value" in operand:
        return operand["value"]
    found = pointers.get(context, operand["path"])
    return None if found is pointers.MISSING else found


def _ordered(a, b) -> bool:
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    return (isinstance(a, numbers) and isinstance(b, numbers)) or (
        isinstance(a, str) and isinstance(b, str)
    )


def evaluate(cond: dict | None, context) -> bool:
    """True when `cond` holds for `context`; None (no condition) always holds."""
    if cond is None:
        return True
    if "and" in cond:
        return all(evaluate(c, context) for c in cond["and"])
    if "or" in cond:
        return any(evaluate(c, context) for c in cond["or"])
    if "not" in cond:
        return not evaluate(cond["not"], context)
    op = cond["op"]
    if op == "exists":
        return pointers.get(context, cond["path"]) is not pointers.MISSING
    left, right = _operand(cond["left"], context), _operand(cond["right"], context)
    if op == "==":
        return _equal(left, right)
    if op == "!=":
        return not _equal(left, right)
    if op == "in":
        if isinstance(right, list):
            return any(_equal(left, item) for item in right)
        if isinstance(right, str) and isinstance(left, str):
            return left in right
        if isinstance(right, dict) and isinstance(left, str):
            return left in right
        return False
    if not _ordered(left, right):
        return False
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]


def _equal(a, b) -> bool:
    # JSON semantics: true is not 1.
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return a == b
