"""The parsed form of a graph definition (Graph, Node, Transition, Sync, Merge) and the small
checks every part of the parser shares; each refusal is InvalidGraph naming the ref and field."""

import re
from dataclasses import dataclass, field

from graphs import pointers
from graphs.errors import InvalidGraph
from workflows import durations
from workflows.errors import InvalidDuration

REF = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,63}$")
NAME = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9-_]{0,63}$")
RESERVED_CONTEXT_ROOTS = ("input", "branch")  # written by the engine, never by a mapping
DEFAULT_PRIORITY = 1
SUCCESS, FAILURE = "success", "failure"  # a transition's `on`


@dataclass(frozen=True)
class Merge:
    source: str
    target: str
    strategy: str


@dataclass(frozen=True)
class Sync:
    fan_out: str
    strategy: str  # all | any | m_of_n
    m: int | None
    timeout_ms: int | None
    on_timeout: str
    merge: Merge | None


@dataclass(frozen=True)
class Transition:
    ref: str
    source: str
    target: str
    priority: int
    condition: dict | None = None
    foreach: str | None = None  # context pointer of the collection
    spawn_count: int | None = None
    sync: Sync | None = None
    max_iterations: int | None = None
    on: str = SUCCESS  # FAILURE: taken when the source node fails for good

    @property
    def fans_out(self) -> bool:
        return self.foreach is not None or self.spawn_count is not None


@dataclass(frozen=True)
class Node:
    ref: str
    kind: str
    action: dict
    input_mapping: dict = field(default_factory=dict)
    output_mapping: dict = field(default_factory=dict)
    retries: dict | None = None
    timeout_ms: int | None = None


@dataclass(frozen=True)
class Graph:
    name: str
    initial_node: str
    nodes: dict[str, Node]
    transitions: tuple[Transition, ...]
    input_schema: dict | None = None
    context_schema: dict | None = None
    timeout_ms: int | None = None
    on_timeout: str = "fail"
    timeout_gate: str | None = (
        None  # on_timeout human_gate: the human node a timed-out run waits at
    )
    output_schema: dict | None = None
    tags: tuple[str, ...] = ()
    four_eyes: bool = False  # the run's starter may not answer its human nodes

    def outgoing(self, node_ref: str, on: str = SUCCESS) -> list[Transition]:
        return [t for t in self.transitions if t.source == node_ref and t.on == on]

    def transition(self, ref: str) -> Transition:
        return next(t for t in self.transitions if t.ref == ref)


def fail(message: str, *, ref=None, field=None, **extra):
    raise InvalidGraph(message, ref=ref, field=field, **extra)


def duration(raw, *, ref, field) -> int:
    try:
        ms = durations.to_ms(raw)
    except (InvalidDuration, TypeError, ValueError) as exc:
        fail(f"{field} of {ref!r}: {exc}", ref=ref, field=field)
    if ms <= 0:
        fail(f"{field} of {ref!r} must be positive", ref=ref, field=field)
    return ms


def pointer(raw, *, ref, field, writable=False) -> str:
    if not pointers.is_valid(raw):
        fail(f"{field} of {ref!r}: {raw!r} is not a JSON pointer", ref=ref, field=field)
    if writable:
        root = pointers.first_segment(raw)
        if root is None or root in RESERVED_CONTEXT_ROOTS:
            fail(
                f"{field} of {ref!r}: cannot write to {raw!r} (the whole context, /input and "
                "/branch are reserved)",
                ref=ref,
                field=field,
            )
    return raw


def keys(obj, allowed: set, *, ref, what: str) -> None:
    if not isinstance(obj, dict):
        fail(f"{what} of {ref!r} must be an object", ref=ref, field=what)
    unknown = set(obj) - allowed
    if unknown:
        fail(f"{what} of {ref!r} has unknown key(s) {sorted(unknown)}", ref=ref, field=what)


def operand_or_pointer(raw, *, ref, field) -> None:
    if isinstance(raw, str):
        pointer(raw, ref=ref, field=field)
    elif not (isinstance(raw, dict) and set(raw) in ({"value"}, {"path"})):
        fail(
            f"{field} of {ref!r} must be a pointer, {{'path'}} or {{'value'}}", ref=ref, field=field
        )
    elif "path" in raw:
        pointer(raw["path"], ref=ref, field=field)
