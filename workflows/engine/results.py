"""How a run stores what its steps return: values as JSON gives them back (so a replay sees what
the first run saw), errors as {"name", "message"} plus a bounded "traceback" when one was raised."""

import json

from ops.tracebacks import bounded
from workflows.errors import StepFailed


def roundtrip(value):
    """Results look the same on first run and on replay (tuples become lists, and so on)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.loads(json.dumps(value))


def error_dict(exc: BaseException, *, with_traceback: bool = True) -> dict:
    name = exc.error_name if isinstance(exc, StepFailed) else type(exc).__name__
    error = {"name": name, "message": storable(str(exc))[:2048]}
    if with_traceback and exc.__traceback__ is not None and not isinstance(exc, StepFailed):
        # Frames only, never locals (ops.tracebacks): the console shows it on the step.
        error["traceback"] = bounded(exc)
    return error


def storable(text: str) -> str:
    """An exception's text as every database stores it: a NUL or a lone surrogate (bytes parsed
    as text) is escaped, not refused by PostgreSQL at the boundary."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
