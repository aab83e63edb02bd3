"""The JSON a delivery's exact bytes hold, or why they hold none.

raw_events keeps the body as received (sha256(body) == dedup_key); the payload the normalizers,
the console and the API read is parsed from it. The parse is strict where Python's json module
is lenient and lenient where it breaks rows:
- NaN / Infinity / -Infinity literals are not JSON (RFC 8259): the body is unparseable;
- a number beyond float range (1e400) is valid JSON, but float() makes it inf, which no JSON
  encoder (DRF, the console, jsonb) will write back: it is kept as its literal text ("1e400"),
  which the normalizers' defensive readers treat as "not a number".
"""

import json
import math
import re

EMPTY = "empty"
INVALID_UTF8 = "invalid_utf8"
INVALID_JSON = "invalid_json"
NON_FINITE = "nan_or_infinity"
NOT_AN_OBJECT = "not_an_object"
TOO_DEEP = "too_deep"


class Unparseable(ValueError):
    """The body is not a JSON object; `reason` is one of the constants above."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class _NonFinite(ValueError):
    pass


def _reject_constant(name: str):
    raise _NonFinite(name)


def number_or_literal(text: str):
    """json's parse_float: the float, or the literal itself when it overflows to ±inf."""
    value = float(text)
    return value if math.isfinite(value) else text


# Shared by every parse of a delivery so the envelope and the payload agree on what is JSON.
STRICT = {"parse_float": number_or_literal, "parse_constant": _reject_constant}


def text_of(body: bytes | bytearray | memoryview) -> str:
    """The body as text; Unparseable(empty | invalid_utf8) when it is not. Decoded in place:
    a copy of a 40 MB body as bytes first would cost the web worker 40 MB more."""
    if not bytes(body[:1024]).strip() and not bytes(body).strip():
        raise Unparseable(EMPTY)
    try:
        return str(body, "utf-8")
    except UnicodeDecodeError as exc:
        raise Unparseable(INVALID_UTF8, str(exc)) from None


# Strings no database column takes: NUL (PostgreSQL text and jsonb refuse it) and lone
# surrogates (no UTF-8 encoding exists). In a valid body they can only come as \u escapes.
_UNSAFE_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
_UNSAFE_CHAR = re.compile("[\x00\ud800-\udfff]")


def safe_text(text: str) -> str:
    """`text` with NUL and lone surrogates written as visible escapes (`\\u0000`, `\\ud800`):
    what every column copied out of a delivery holds instead. The stored body keeps the bytes."""
    if not _UNSAFE_CHAR.search(text):
        return text
    return _UNSAFE_CHAR.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def safe_json(value):
    """`value` with safe_text applied to every string in it, keys included."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_text(k): safe_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [safe_json(v) for v in value]
    return value


def json_loads(body: bytes | bytearray | memoryview | str, **hooks):
    """json.loads with the rules above, strings made safe (safe_text); raises Unparseable for
    anything but a JSON value."""
    text = body if isinstance(body, str) else text_of(body)
    try:
        doc = json.loads(text, **STRICT, **hooks)
        return safe_json(doc) if _UNSAFE_ESCAPE.search(text) else doc
    except _NonFinite as exc:
        raise Unparseable(NON_FINITE, str(exc)) from None
    except RecursionError:
        raise Unparseable(TOO_DEEP) from None
    except ValueError as exc:
        raise Unparseable(INVALID_JSON, str(exc)[:200]) from None


def payload_parse(body: bytes | bytearray | memoryview) -> dict:
    """The delivery's JSON object, or Unparseable (including not_an_object)."""
    doc = json_loads(body)
    if not isinstance(doc, dict):
        raise Unparseable(NOT_AN_OBJECT, type(doc).__name__)
    return doc
