"""The JSON every API body, workflow param, event payload and step result must be: parsed (or
checked) once here, refused with a reason instead of a 500 or a silent surprise later.

Rules, each with the reason it is refused under:
- nesting at most MAX_DEPTH levels (`too_deep`): Python's parser recurses and dies near 1,000;
- no duplicate object keys (`duplicate_key`): which one wins differs between parsers;
- no lone surrogates or NUL characters in strings (`invalid_unicode`): neither is storable in
  PostgreSQL's jsonb, and lone surrogates are not Unicode at all;
- numbers finite (`non_finite_number`): NaN, Infinity and 1e400 are not JSON values;
- text valid UTF-8 (`invalid_utf8`) and JSON at all (`syntax`).
"""

import json
import re

MAX_DEPTH = 100

# Strings are skipped whole, so brackets inside them never count as nesting.
_DEPTH_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class InvalidJson(ValueError):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def _refuse_constant(name: str):
    raise InvalidJson("non_finite_number", f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise InvalidJson("non_finite_number", f"{text} is beyond the range of a double")
    return value


def _unique_pairs(pairs: list) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise InvalidJson("duplicate_key", f"duplicate object key {key!r}")
            seen.add(key)
    return result


def _check_depth_of_text(text: str) -> None:
    depth = 0
    for match in _DEPTH_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise InvalidJson("too_deep", f"nesting deeper than {MAX_DEPTH} levels")
        elif token in "]}":
            depth -= 1


def _check_string(value: str) -> None:
    if "\x00" in value:
        raise InvalidJson("invalid_unicode", "strings must not contain NUL (\\u0000)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJson("invalid_unicode", "strings must not contain lone surrogates") from None


def check_value(value) -> None:
    """Raise InvalidJson unless `value` (already Python) obeys the rules; iterative, so a
    hostile depth cannot blow the stack before it is refused."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_string(item)
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise InvalidJson("non_finite_number", f"{item} is not a JSON number")
        elif isinstance(item, dict | list | tuple):
            if depth > MAX_DEPTH:
                raise InvalidJson("too_deep", f"nesting deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str):
                        _check_string(key)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)


def loads(data: bytes | str):
    """Parse JSON text under the rules above; InvalidJson (a ValueError) says which one broke."""
    if isinstance(data, bytes | bytearray):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidJson("invalid_utf8", f"body is not UTF-8: {exc.reason}") from None
    _check_depth_of_text(data)
    try:
        value = json.loads(
            data,
            object_pairs_hook=_unique_pairs,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
        )
    except InvalidJson:
        raise
    except (ValueError, RecursionError) as exc:
        raise InvalidJson("syntax", f"not valid JSON: {exc}") from None
    check_value(value)
    return value
