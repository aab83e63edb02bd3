"""The graph vocabulary: parse a definition document into a Graph, refusing anything outside it.

Every refusal is InvalidGraph with the offending node or transition `ref` (and the `field`), so
a publish answers a 400 that says exactly what to fix. Checks, in order: shape and names, node
actions (registered python names, known workflows, durations, mappings), transitions (known
refs, conditions, fan-out/fan-in pairing, merges), JSON Schemas, reachability from the initial
node, and cycles (a transition that closes one needs loop_config.max_iterations).
"""

import hashlib
import re
import string
from dataclasses import dataclass, field

from jsonschema import SchemaError
from jsonschema.validators import validator_for

from graphs import actions, conditions, pointers
from graphs.errors import InvalidGraph
from workflows import durations
from workflows.errors import InvalidDuration

REF = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,63}$")
NAME = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9-_]{0,63}$")
TOP_KEYS = {
    "name",
    "version",
    "description",
    "initial_node",
    "input_schema",
    "context_schema",
    "timeout",
    "on_timeout",
    "nodes",
    "transitions",
}
NODE_KEYS = {
    "ref",
    "description",
    "action",
    "input_mapping",
    "output_mapping",
    "retries",
    "timeout",
}
ACTION_KEYS = {
    "python": ({"name"}, set()),
    "http": ({"url"}, {"method", "headers", "body", "timeout"}),
    "workflow": (set(), {"workflow", "binding"}),  # exactly one: a code workflow or a graph
    "human": ({"event_type"}, {"timeout"}),
    "set": ({"values"}, set()),
    "sleep": ({"duration"}, set()),
}
GRAPH_RUN = "graph-run"  # the interpreter (graphs.services.GRAPH_WORKFLOW): graphs are bindings
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
TRANSITION_KEYS = {
    "ref",
    "description",
    "from",
    "to",
    "priority",
    "condition",
    "foreach",
    "spawn_count",
    "synchronization",
    "loop_config",
}
MERGE_STRATEGIES = ("append", "merge_object", "keyed_by_branch", "last_wins")
FAN_IN_TIMEOUT_ACTIONS = ("proceed_with_available", "fail")
RUN_TIMEOUT_ACTIONS = ("fail", "cancel_all")
RESERVED_CONTEXT_ROOTS = ("input", "branch")  # written by the engine, never by a mapping
MAX_NODES = 200
MAX_TRANSITIONS = 500
MAX_SPAWN = 1000
DEFAULT_PRIORITY = 1
DEFAULT_HUMAN_TIMEOUT_MS = 24 * 3_600_000


def token_event_type(event_type: str, path: str) -> str:
    """The engine event type that answers only token `path`'s human node (graph-run v3): the
    node's type, "--", the path with "_" for "." (a hash of the path when that is too long)."""
    full = f"{event_type}--{path.replace('.', '_')}"
    if len(full) <= 100:
        return full
    return f"{event_type}--{hashlib.sha256(path.encode()).hexdigest()[:16]}"


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

    def outgoing(self, node_ref: str) -> list[Transition]:
        return [t for t in self.transitions if t.source == node_ref]

    def transition(self, ref: str) -> Transition:
        return next(t for t in self.transitions if t.ref == ref)


def _fail(message: str, *, ref=None, field=None):
    raise InvalidGraph(message, ref=ref, field=field)


def _duration(raw, *, ref, field) -> int:
    try:
        ms = durations.to_ms(raw)
    except (InvalidDuration, TypeError, ValueError) as exc:
        _fail(f"{field} of {ref!r}: {exc}", ref=ref, field=field)
    if ms <= 0:
        _fail(f"{field} of {ref!r} must be positive", ref=ref, field=field)
    return ms


def _pointer(raw, *, ref, field, writable=False) -> str:
    if not pointers.is_valid(raw):
        _fail(f"{field} of {ref!r}: {raw!r} is not a JSON pointer", ref=ref, field=field)
    if writable:
        root = pointers.first_segment(raw)
        if root is None or root in RESERVED_CONTEXT_ROOTS:
            _fail(
                f"{field} of {ref!r}: cannot write to {raw!r} (the whole context, /input and "
                "/branch are reserved)",
                ref=ref,
                field=field,
            )
    return raw


def _schema(raw, field: str) -> dict | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        _fail(f"{field} must be a JSON Schema object", field=field)
    try:
        validator_for(raw).check_schema(raw)
    except SchemaError as exc:
        _fail(f"{field} is not a valid JSON Schema: {exc.message}", field=field)
    return raw


def _keys(obj, allowed: set, *, ref, what: str) -> None:
    if not isinstance(obj, dict):
        _fail(f"{what} of {ref!r} must be an object", ref=ref, field=what)
    unknown = set(obj) - allowed
    if unknown:
        _fail(f"{what} of {ref!r} has unknown key(s) {sorted(unknown)}", ref=ref, field=what)


def _operand_or_pointer(raw, *, ref, field) -> None:
    if isinstance(raw, str):
        _pointer(raw, ref=ref, field=field)
    elif not (isinstance(raw, dict) and set(raw) in ({"value"}, {"path"})):
        _fail(
            f"{field} of {ref!r} must be a pointer, {{'path'}} or {{'value'}}", ref=ref, field=field
        )
    elif "path" in raw:
        _pointer(raw["path"], ref=ref, field=field)


def _action(raw, ref: str, known_workflows) -> tuple[str, dict]:
    if not isinstance(raw, dict) or "kind" not in raw:
        _fail(f"node {ref!r} needs an action {{'kind': ...}}", ref=ref, field="action")
    kind = raw["kind"]
    if kind not in ACTION_KEYS:
        _fail(f"node {ref!r}: unknown action kind {kind!r}", ref=ref, field="action.kind")
    required, optional = ACTION_KEYS[kind]
    _keys(raw, required | optional | {"kind"}, ref=ref, what="action")
    missing = required - set(raw)
    if missing:
        _fail(f"node {ref!r}: {kind} action needs {sorted(missing)}", ref=ref, field="action")
    if kind == "python" and actions.get(raw["name"]) is None:
        _fail(f"node {ref!r}: unknown python action {raw['name']!r}", ref=ref, field="action.name")
    if kind == "workflow":
        _child(raw, ref, known_workflows)
    if kind == "human":
        if not isinstance(raw["event_type"], str) or not NAME.match(raw["event_type"]):
            _fail(f"node {ref!r}: bad event_type", ref=ref, field="action.event_type")
        _duration(raw.get("timeout", DEFAULT_HUMAN_TIMEOUT_MS), ref=ref, field="action.timeout")
    if kind == "sleep":
        _duration(raw["duration"], ref=ref, field="action.duration")
    if kind == "set":
        if not isinstance(raw["values"], dict) or not raw["values"]:
            _fail(f"node {ref!r}: set needs values {{pointer: operand}}", ref=ref, field="values")
        for target, operand in raw["values"].items():
            _pointer(target, ref=ref, field="action.values", writable=True)
            _operand_or_pointer(operand, ref=ref, field="action.values")
    if kind == "http":
        _http(raw, ref)
    return kind, dict(raw)


def _child(raw: dict, ref: str, known_workflows) -> None:
    if ("workflow" in raw) == ("binding" in raw):
        _fail(
            f"node {ref!r}: a workflow action names a code `workflow` or a graph `binding`",
            ref=ref,
            field="action",
        )
    if "binding" in raw:
        if not isinstance(raw["binding"], str) or not NAME.match(raw["binding"]):
            _fail(f"node {ref!r}: bad binding name", ref=ref, field="action.binding")
        return
    if raw["workflow"] == GRAPH_RUN:
        _fail(
            f"node {ref!r}: start a graph with {{'binding': NAME}}, not workflow {GRAPH_RUN!r}",
            ref=ref,
            field="action.workflow",
        )
    if raw["workflow"] not in known_workflows:
        _fail(
            f"node {ref!r}: unknown workflow {raw['workflow']!r}", ref=ref, field="action.workflow"
        )


def _http(raw: dict, ref: str) -> None:
    if not isinstance(raw["url"], str) or not raw["url"].startswith(("http://", "https://")):
        _fail(f"node {ref!r}: url must be an http(s) URL template", ref=ref, field="action.url")
    if raw.get("method", "POST") not in HTTP_METHODS:
        _fail(f"node {ref!r}: method must be one of {HTTP_METHODS}", ref=ref, field="action.method")
    for name, value in (raw.get("headers") or {}).items():
        secret_ref = isinstance(value, dict) and set(value) == {"secret"}
        if not isinstance(name, str) or not (isinstance(value, str) or secret_ref):
            _fail(
                f"node {ref!r}: header {name!r} must be a string or {{'secret': NAME}}",
                ref=ref,
                field="action.headers",
            )
    if "body" in raw:
        _operand_or_pointer(raw["body"], ref=ref, field="action.body")
    if "timeout" in raw:
        _duration(raw["timeout"], ref=ref, field="action.timeout")


def _node(raw, known_workflows) -> Node:
    if not isinstance(raw, dict):
        _fail("every node must be an object", field="nodes")
    ref = raw.get("ref")
    if not isinstance(ref, str) or not REF.match(ref):
        _fail(f"node ref {ref!r} must match {REF.pattern}", ref=ref, field="ref")
    _keys(raw, NODE_KEYS, ref=ref, what="node")
    kind, action = _action(raw.get("action"), ref, known_workflows)
    input_mapping = raw.get("input_mapping") or {}
    _keys(input_mapping, set(input_mapping), ref=ref, what="input_mapping")
    for key, source in input_mapping.items():
        _operand_or_pointer(source, ref=ref, field=f"input_mapping.{key}")
    output_mapping = raw.get("output_mapping") or {}
    _keys(output_mapping, set(output_mapping), ref=ref, what="output_mapping")
    for target, source in output_mapping.items():
        _pointer(target, ref=ref, field="output_mapping", writable=True)
        _pointer(source, ref=ref, field="output_mapping")
    if kind == "http":
        _url_placeholders(action["url"], input_mapping, ref)
    retries = raw.get("retries")
    if retries is not None:
        _retries(retries, ref)
    timeout_ms = None
    if raw.get("timeout") is not None:
        timeout_ms = _duration(raw["timeout"], ref=ref, field="timeout")
    return Node(ref, kind, action, dict(input_mapping), dict(output_mapping), retries, timeout_ms)


def _url_placeholders(url: str, input_mapping: dict, ref: str) -> None:
    """Every `{name}` of an http URL template must be a plain key of the node's input_mapping."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(url) if f is not None]
    except ValueError as exc:
        _fail(f"node {ref!r}: bad url template: {exc}", ref=ref, field="action.url")
    for name in fields:
        if not name.isidentifier() or name not in input_mapping:
            _fail(
                f"node {ref!r}: url placeholder {{{name}}} must be a key of input_mapping",
                ref=ref,
                field="action.url",
            )


def _retries(raw, ref: str) -> None:
    from workflows.decisions import retry_policy
    from workflows.errors import WorkflowError

    try:
        retry_policy(raw)
    except WorkflowError as exc:
        _fail(f"retries of {ref!r}: {exc.message}", ref=ref, field="retries")


def _transition(raw, index: int, nodes: dict, seen_refs: set) -> Transition:
    if not isinstance(raw, dict):
        _fail("every transition must be an object", field="transitions")
    source, target = raw.get("from"), raw.get("to")
    ref = raw.get("ref") or f"{source}->{target}"
    if ref in seen_refs:
        ref = raw.get("ref") or f"{ref}#{index}"
        if ref in seen_refs:
            _fail(f"transition ref {ref!r} is used twice", ref=ref, field="ref")
    if not isinstance(ref, str) or not ref or len(ref) > 140:
        _fail(f"transition ref {ref!r} must be a short string", ref=str(ref), field="ref")
    _keys(raw, TRANSITION_KEYS, ref=ref, what="transition")
    for end, value in (("from", source), ("to", target)):
        if value not in nodes:
            _fail(f"transition {ref!r}: unknown node ref {value!r} in {end!r}", ref=ref, field=end)
    priority = raw.get("priority", DEFAULT_PRIORITY)
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
        _fail(f"transition {ref!r}: priority must be an integer ≥ 0", ref=ref, field="priority")
    condition = raw.get("condition")
    if condition is not None:
        try:
            conditions.check(condition)
        except conditions.ConditionError as exc:
            _fail(f"transition {ref!r}: {exc}", ref=ref, field="condition")
    foreach = raw.get("foreach")
    if foreach is not None:
        _keys(foreach, {"collection"}, ref=ref, what="foreach")
        foreach = _pointer(foreach.get("collection"), ref=ref, field="foreach.collection")
    spawn = raw.get("spawn_count")
    if spawn is not None and (
        isinstance(spawn, bool) or not isinstance(spawn, int) or not 1 <= spawn <= MAX_SPAWN
    ):
        _fail(
            f"transition {ref!r}: spawn_count must be 1…{MAX_SPAWN}", ref=ref, field="spawn_count"
        )
    if foreach is not None and spawn is not None:
        _fail(f"transition {ref!r}: foreach or spawn_count, not both", ref=ref, field="foreach")
    loop = raw.get("loop_config")
    max_iterations = None
    if loop is not None:
        _keys(loop, {"max_iterations"}, ref=ref, what="loop_config")
        max_iterations = loop.get("max_iterations")
        if (
            isinstance(max_iterations, bool)
            or not isinstance(max_iterations, int)
            or max_iterations < 1
        ):
            _fail(
                f"transition {ref!r}: loop_config.max_iterations must be an integer ≥ 1",
                ref=ref,
                field="loop_config",
            )
    sync = None
    if raw.get("synchronization") is not None:
        if foreach is not None or spawn is not None:
            _fail(
                f"transition {ref!r}: a fan-in cannot also fan out",
                ref=ref,
                field="synchronization",
            )
        sync = _sync(raw["synchronization"], ref)
    return Transition(
        ref, source, target, priority, condition, foreach, spawn, sync, max_iterations
    )


def _sync(raw, ref: str) -> Sync:
    _keys(
        raw,
        {"fan_out", "strategy", "timeout", "on_timeout", "merge"},
        ref=ref,
        what="synchronization",
    )
    if not isinstance(raw.get("fan_out"), str):
        _fail(
            f"fan-in {ref!r} must name its fan-out transition (synchronization.fan_out)",
            ref=ref,
            field="synchronization.fan_out",
        )
    strategy, m = raw.get("strategy", "all"), None
    if isinstance(strategy, dict) and set(strategy) == {"m_of_n"}:
        m = strategy["m_of_n"]
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            _fail(
                f"fan-in {ref!r}: m_of_n must be an integer ≥ 1",
                ref=ref,
                field="synchronization.strategy",
            )
        strategy = "m_of_n"
    elif strategy not in ("all", "any"):
        _fail(
            f"fan-in {ref!r}: strategy must be all, any or {{'m_of_n': k}}",
            ref=ref,
            field="synchronization.strategy",
        )
    timeout_ms = None
    if raw.get("timeout") is not None:
        timeout_ms = _duration(raw["timeout"], ref=ref, field="synchronization.timeout")
    on_timeout = raw.get("on_timeout", "fail")
    if on_timeout not in FAN_IN_TIMEOUT_ACTIONS:
        _fail(
            f"fan-in {ref!r}: on_timeout must be one of {FAN_IN_TIMEOUT_ACTIONS}",
            ref=ref,
            field="synchronization.on_timeout",
        )
    merge = None
    if raw.get("merge") is not None:
        _keys(raw["merge"], {"source", "target", "strategy"}, ref=ref, what="merge")
        mraw = raw["merge"]
        if mraw.get("strategy", "append") not in MERGE_STRATEGIES:
            _fail(
                f"fan-in {ref!r}: merge strategy must be one of {MERGE_STRATEGIES}",
                ref=ref,
                field="merge.strategy",
            )
        merge = Merge(
            source=_pointer(mraw.get("source"), ref=ref, field="merge.source"),
            target=_pointer(mraw.get("target"), ref=ref, field="merge.target", writable=True),
            strategy=mraw.get("strategy", "append"),
        )
    return Sync(raw["fan_out"], strategy, m, timeout_ms, on_timeout, merge)


def _reachable(start: str, transitions) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        current = todo.pop()
        for t in transitions:
            if t.source == current and t.target not in seen:
                seen.add(t.target)
                todo.append(t.target)
    return seen


def _back_edges(graph_nodes: list[str], initial: str, transitions) -> list[Transition]:
    """Transitions that close a cycle, found by a depth-first walk from the initial node in
    definition order (so the same document always blames the same transition)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    found: list[Transition] = []
    stack = [(initial, iter([t for t in transitions if t.source == initial]))]
    state[initial] = 1
    while stack:
        node, edges = stack[-1]
        edge = next(edges, None)
        if edge is None:
            state[node] = 2
            stack.pop()
            continue
        if state.get(edge.target) == 1:
            found.append(edge)
        elif edge.target not in state:
            state[edge.target] = 1
            stack.append((edge.target, iter([t for t in transitions if t.source == edge.target])))
    return found


def parse(doc, *, known_workflows=None) -> Graph:
    """The Graph for `doc`, or InvalidGraph naming what is wrong."""
    if known_workflows is None:
        from workflows.authoring import registry

        known_workflows = set(registry.names())
    if not isinstance(doc, dict):
        _fail("a graph definition must be a JSON object")
    _keys(doc, TOP_KEYS, ref=doc.get("name"), what="definition")
    name = doc.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        _fail(f"name {name!r} must match {NAME.pattern}", field="name")
    raw_nodes = doc.get("nodes")
    if not isinstance(raw_nodes, list) or not 1 <= len(raw_nodes) <= MAX_NODES:
        _fail(f"nodes must be a list of 1…{MAX_NODES} nodes", field="nodes")
    nodes: dict[str, Node] = {}
    for raw in raw_nodes:
        node = _node(raw, known_workflows)
        if node.ref in nodes:
            _fail(f"node ref {node.ref!r} is used twice", ref=node.ref, field="ref")
        nodes[node.ref] = node
    initial = doc.get("initial_node")
    if initial not in nodes:
        _fail(f"initial_node {initial!r} is not a node", ref=initial, field="initial_node")
    raw_transitions = doc.get("transitions", [])
    if not isinstance(raw_transitions, list) or len(raw_transitions) > MAX_TRANSITIONS:
        _fail(f"transitions must be a list of at most {MAX_TRANSITIONS}", field="transitions")
    transitions: list[Transition] = []
    refs: set[str] = set()
    for index, raw in enumerate(raw_transitions):
        t = _transition(raw, index, nodes, refs)
        refs.add(t.ref)
        transitions.append(t)
    by_ref = {t.ref: t for t in transitions}
    for t in transitions:
        if t.sync is None:
            continue
        fan_out = by_ref.get(t.sync.fan_out)
        if fan_out is None or not fan_out.fans_out:
            _fail(
                f"fan-in {t.ref!r} has no matching fan-out: {t.sync.fan_out!r} is not a "
                "foreach/spawn_count transition",
                ref=t.ref,
                field="synchronization.fan_out",
            )
        if t.source not in _reachable(fan_out.target, transitions):
            _fail(
                f"fan-in {t.ref!r} starts at {t.source!r}, which the branches of "
                f"{fan_out.ref!r} never reach",
                ref=t.ref,
                field="synchronization.fan_out",
            )
        if (
            t.sync.m is not None
            and fan_out.spawn_count is not None
            and t.sync.m > fan_out.spawn_count
        ):
            _fail(
                f"fan-in {t.ref!r}: m_of_n {t.sync.m} exceeds spawn_count",
                ref=t.ref,
                field="synchronization.strategy",
            )
    reachable = _reachable(initial, transitions)
    for ref in nodes:
        if ref not in reachable:
            _fail(f"node {ref!r} is unreachable from {initial!r}", ref=ref, field="nodes")
    for edge in _back_edges(list(nodes), initial, transitions):
        if edge.max_iterations is None:
            _fail(
                f"transition {edge.ref!r} closes a cycle: it needs loop_config.max_iterations",
                ref=edge.ref,
                field="loop_config",
            )
    timeout_ms = None
    if doc.get("timeout") is not None:
        timeout_ms = _duration(doc["timeout"], ref=name, field="timeout")
    on_timeout = doc.get("on_timeout", "fail")
    if on_timeout not in RUN_TIMEOUT_ACTIONS:
        _fail(f"on_timeout must be one of {RUN_TIMEOUT_ACTIONS}", field="on_timeout")
    return Graph(
        name=name,
        initial_node=initial,
        nodes=nodes,
        transitions=tuple(transitions),
        input_schema=_schema(doc.get("input_schema"), "input_schema"),
        context_schema=_schema(doc.get("context_schema"), "context_schema"),
        timeout_ms=timeout_ms,
        on_timeout=on_timeout,
    )
