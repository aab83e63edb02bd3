"""A big delivery parsed as a stream, keeping only the fields its normalizer reads (the paths it
declared with register(…, reads=…); docs/ingest.md › Big deliveries gives their syntax). Numbers
follow ingest.terra.payload; any parse error is a ValueError, and the consumer then parses the
body whole."""

import math
from collections.abc import Iterable, Iterator
from decimal import Decimal

import ijson

from ingest.terra.payload import safe_text


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


WHOLE = _Marker("WHOLE")  # keep the value as it is
COUNT = _Marker("COUNT")  # a list: only its length
OTHER_KEYS = "*"  # in an object node: the node for keys it does not name
_COUNT_SEGMENT = "#count"
_SCALARS = frozenset({"null", "boolean", "integer", "double", "number", "string"})
_OPENERS = frozenset({"start_map", "start_array"})
_CLOSERS = frozenset({"end_map", "end_array"})
_CHUNK = 64 * 1024


class Items:
    """A list whose items are each read with `node`."""

    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    def __eq__(self, other) -> bool:
        return isinstance(other, Items) and other.node == self.node

    def __repr__(self) -> str:
        return f"Items({self.node!r})"


def _path_node(segments: list[str]):
    if not segments:
        return WHOLE
    if segments == [_COUNT_SEGMENT]:
        return COUNT
    head, rest = segments[0], _path_node(segments[1:])
    if head.endswith("[]"):
        return {head[:-2]: Items(rest)}
    return {head: rest}


def _merged(a, b):
    """Two nodes read at the same place: the union of what they keep."""
    if a is WHOLE or b is WHOLE:
        return WHOLE
    if isinstance(a, dict) and isinstance(b, dict):
        merged = dict(a)
        for key, node in b.items():
            merged[key] = _merged(merged[key], node) if key in merged else node
        return merged
    if isinstance(a, Items) and isinstance(b, Items):
        return Items(_merged(a.node, b.node))
    if a is COUNT and b is COUNT:
        return COUNT
    return WHOLE  # read as two different kinds: keep it all rather than guess


def reads_trie(paths: Iterable[str]) -> dict:
    """The node that keeps `paths` (dotted, relative to one data item) of an object."""
    trie: dict = {}
    for path in paths:
        segments = [segment for segment in path.split(".") if segment]
        if not segments or segments[0] == _COUNT_SEGMENT:
            raise ValueError(f"not a read path: {path!r}")
        trie = _merged(trie, _path_node(segments))
    return trie


def payload_trie(item_trie: dict) -> dict:
    """The node for a whole delivery: `data` items read with `item_trie`, the rest whole."""
    return {"data": Items(item_trie), OTHER_KEYS: WHOLE}


def _pieces(body: bytes | bytearray | memoryview) -> Iterator[bytes]:
    view = memoryview(body)
    for start in range(0, len(view), _CHUNK):
        yield bytes(view[start : start + _CHUNK])


class _Reader:
    """ijson's file: the body's pieces one read() at a time (never an empty one before the end)."""

    def __init__(self, pieces: Iterator[bytes]):
        self._pieces = (piece for piece in pieces if piece)

    def read(self, size: int = -1) -> bytes:
        if size == 0:
            return b""  # ijson's probe for bytes or text
        return next(self._pieces, b"")


def _scalar(event: str, value):
    if event == "number" and isinstance(value, Decimal):
        number = float(value)
        return number if math.isfinite(number) else str(value)
    if event in ("string", "map_key"):
        return safe_text(value)
    return value


def _skip(events: Iterator) -> None:
    """Consume the rest of an opened container."""
    depth = 1
    for event, _ in events:
        if event in _OPENERS:
            depth += 1
        elif event in _CLOSERS:
            depth -= 1
            if not depth:
                return
    raise ValueError("incomplete JSON")


def _count(events: Iterator) -> int:
    """Consume the rest of an opened list; returns how many items it had."""
    depth, items = 1, 0
    for event, _ in events:
        if depth == 1 and event not in _CLOSERS:
            items += 1
        if event in _OPENERS:
            depth += 1
        elif event in _CLOSERS:
            depth -= 1
            if not depth:
                return items
    raise ValueError("incomplete JSON")


def _whole(events: Iterator, event: str):
    """The value opened by `event`, built completely."""
    builder = ijson.ObjectBuilder()
    builder.event(event, None)
    depth = 1
    for event, value in events:
        builder.event(event, _scalar(event, value))
        if event in _OPENERS:
            depth += 1
        elif event in _CLOSERS:
            depth -= 1
            if depth == 0:
                return builder.value
    raise ValueError("incomplete JSON")


def _object(events: Iterator, node: dict) -> dict:
    kept: dict = {}
    other = node.get(OTHER_KEYS)
    for event, value in events:
        if event == "end_map":
            return kept
        # map_key: the next event starts its value
        child = node.get(value, other) if value != OTHER_KEYS else other
        event_value = next(events)
        if child is None:
            if event_value[0] in _OPENERS:
                _skip(events)
            continue
        kept[safe_text(value)] = _value(events, *event_value, child)
    raise ValueError("incomplete JSON")


def _list(events: Iterator, node) -> list:
    kept = []
    for event, value in events:
        if event == "end_array":
            return kept
        kept.append(_value(events, event, value, node))
    raise ValueError("incomplete JSON")


def _value(events: Iterator, event: str, value, node):
    """The value that starts with (event, value), keeping what `node` reads."""
    if event in _SCALARS:
        return _scalar(event, value)
    if node is WHOLE:
        return _whole(events, event)
    if event == "start_map":
        if isinstance(node, dict):
            return _object(events, node)
        _skip(events)
        return {}
    # start_array
    if isinstance(node, Items):
        return _list(events, node.node)
    if node is COUNT:
        return [None] * _count(events)
    _skip(events)
    return []


def payload_projected(body: bytes | bytearray | memoryview | Iterable[bytes], trie: dict) -> dict:
    """The delivery's JSON object with only what `trie` (payload_trie) keeps; ValueError when
    the body is not one JSON object. `body`: the bytes, or its pieces in order (read one at a
    time, so the whole body need never be in memory)."""
    pieces = _pieces(body) if isinstance(body, bytes | bytearray | memoryview) else iter(body)
    events = iter(ijson.basic_parse(_Reader(pieces), use_float=False))
    try:
        first = next(events, None)
        if first is None or first[0] != "start_map":
            raise ValueError("not a JSON object")
        projected = _object(events, trie)
        if next(events, None) is not None:
            raise ValueError("trailing data after the JSON object")
    except ijson.JSONError as exc:
        raise ValueError(str(exc)[:200]) from None
    return projected
