"""The graph vocabulary: parse a definition document into a Graph, refusing anything outside it.

Every refusal is InvalidGraph with the offending node or transition `ref` (and the `field`), so
a publish answers a 400 that says exactly what to fix. Checks, in order: shape and names, node
actions (registered python names, known workflows, durations, mappings), transitions
(graphs/routes.py: known refs, conditions, fan-out/fan-in pairing, merges), JSON Schemas
(graphs/schemas.py), reachability from the initial node, and cycles (a transition that closes
one needs loop_config.max_iterations). The parsed shapes live in graphs/shapes.py.
"""

import hashlib
import re
import string

from graphs import actions, routes, schemas
from graphs.shapes import (  # noqa: F401 - Graph, Node, Transition, … are this module's API
    DEFAULT_PRIORITY,
    FAILURE,
    NAME,
    REF,
    RESERVED_CONTEXT_ROOTS,
    Graph,
    Merge,
    Node,
    Sync,
    Transition,
    duration,
    fail,
    keys,
    operand_or_pointer,
    pointer,
)

TOP_KEYS = {
    "name",
    "version",
    "description",
    "initial_node",
    "input_schema",
    "context_schema",
    "timeout",
    "on_timeout",
    "timeout_gate",
    "output_schema",
    "tags",
    "four_eyes",
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
    "http": ({"url"}, {"method", "headers", "body", "timeout", "idempotency_key"}),
    # exactly one of workflow (code) and binding (graph); catch: the child's failure is the
    # node's, which its failure routes take
    "workflow": (set(), {"workflow", "binding", "catch"}),
    "human": ({"event_type"}, {"timeout"}),
    "set": ({"values"}, set()),
    "sleep": ({"duration"}, set()),
}
GRAPH_RUN = "graph-run"  # the interpreter (graphs.services.GRAPH_WORKFLOW): graphs are bindings
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
RUN_TIMEOUT_ACTIONS = ("fail", "cancel_all", "human_gate")
MAX_NODES = 200
MAX_TRANSITIONS = 500
MAX_SPAWN = routes.MAX_SPAWN
DEFAULT_HUMAN_TIMEOUT_MS = 24 * 3_600_000
TAG = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.:-]{0,63}$")
MAX_TAGS = 20


def token_event_type(event_type: str, path: str) -> str:
    """The engine event type that answers only token `path`'s human node (graph-run v3): the
    node's type, "--", the path with "_" for "." (a hash of the path when that is too long)."""
    full = f"{event_type}--{path.replace('.', '_')}"
    if len(full) <= 100:
        return full
    return f"{event_type}--{hashlib.sha256(path.encode()).hexdigest()[:16]}"


def _action(raw, ref: str, known_workflows) -> tuple[str, dict]:
    if not isinstance(raw, dict) or "kind" not in raw:
        fail(f"node {ref!r} needs an action {{'kind': ...}}", ref=ref, field="action")
    kind = raw["kind"]
    if kind not in ACTION_KEYS:
        fail(f"node {ref!r}: unknown action kind {kind!r}", ref=ref, field="action.kind")
    required, optional = ACTION_KEYS[kind]
    keys(raw, required | optional | {"kind"}, ref=ref, what="action")
    missing = required - set(raw)
    if missing:
        fail(f"node {ref!r}: {kind} action needs {sorted(missing)}", ref=ref, field="action")
    if kind == "python" and actions.get(raw["name"]) is None:
        fail(f"node {ref!r}: unknown python action {raw['name']!r}", ref=ref, field="action.name")
    if kind == "workflow":
        _child(raw, ref, known_workflows)
    if kind == "human":
        if not isinstance(raw["event_type"], str) or not NAME.match(raw["event_type"]):
            fail(f"node {ref!r}: bad event_type", ref=ref, field="action.event_type")
        duration(raw.get("timeout", DEFAULT_HUMAN_TIMEOUT_MS), ref=ref, field="action.timeout")
    if kind == "sleep":
        duration(raw["duration"], ref=ref, field="action.duration")
    if kind == "set":
        if not isinstance(raw["values"], dict) or not raw["values"]:
            fail(f"node {ref!r}: set needs values {{pointer: operand}}", ref=ref, field="values")
        for target, operand in raw["values"].items():
            pointer(target, ref=ref, field="action.values", writable=True)
            operand_or_pointer(operand, ref=ref, field="action.values")
    if kind == "http":
        _http(raw, ref)
    return kind, dict(raw)


def _child(raw: dict, ref: str, known_workflows) -> None:
    if not isinstance(raw.get("catch", False), bool):
        fail(f"node {ref!r}: catch must be true or false", ref=ref, field="action.catch")
    if ("workflow" in raw) == ("binding" in raw):
        fail(
            f"node {ref!r}: a workflow action names a code `workflow` or a graph `binding`",
            ref=ref,
            field="action",
        )
    if "binding" in raw:
        if not isinstance(raw["binding"], str) or not NAME.match(raw["binding"]):
            fail(f"node {ref!r}: bad binding name", ref=ref, field="action.binding")
        return
    if raw["workflow"] == GRAPH_RUN:
        fail(
            f"node {ref!r}: start a graph with {{'binding': NAME}}, not workflow {GRAPH_RUN!r}",
            ref=ref,
            field="action.workflow",
        )
    if raw["workflow"] not in known_workflows:
        fail(
            f"node {ref!r}: unknown workflow {raw['workflow']!r}", ref=ref, field="action.workflow"
        )


def _http(raw: dict, ref: str) -> None:
    if not isinstance(raw["url"], str) or not raw["url"].startswith(("http://", "https://")):
        fail(f"node {ref!r}: url must be an http(s) URL template", ref=ref, field="action.url")
    if raw.get("method", "POST") not in HTTP_METHODS:
        fail(f"node {ref!r}: method must be one of {HTTP_METHODS}", ref=ref, field="action.method")
    for name, value in (raw.get("headers") or {}).items():
        secret_ref = isinstance(value, dict) and set(value) == {"secret"}
        if not isinstance(name, str) or not (isinstance(value, str) or secret_ref):
            fail(
                f"node {ref!r}: header {name!r} must be a string or {{'secret': NAME}}",
                ref=ref,
                field="action.headers",
            )
    if "body" in raw:
        operand_or_pointer(raw["body"], ref=ref, field="action.body")
    if "timeout" in raw:
        duration(raw["timeout"], ref=ref, field="action.timeout")


def _node(raw, known_workflows) -> Node:
    if not isinstance(raw, dict):
        fail("every node must be an object", field="nodes")
    ref = raw.get("ref")
    if not isinstance(ref, str) or not REF.match(ref):
        fail(f"node ref {ref!r} must match {REF.pattern}", ref=ref, field="ref")
    keys(raw, NODE_KEYS, ref=ref, what="node")
    kind, action = _action(raw.get("action"), ref, known_workflows)
    input_mapping = raw.get("input_mapping") or {}
    keys(input_mapping, set(input_mapping), ref=ref, what="input_mapping")
    for key, source in input_mapping.items():
        operand_or_pointer(source, ref=ref, field=f"input_mapping.{key}")
    output_mapping = raw.get("output_mapping") or {}
    keys(output_mapping, set(output_mapping), ref=ref, what="output_mapping")
    for target, source in output_mapping.items():
        pointer(target, ref=ref, field="output_mapping", writable=True)
        pointer(source, ref=ref, field="output_mapping")
    if kind == "http":
        _placeholders(action["url"], input_mapping, ref, "action.url")
        if "idempotency_key" in action:
            if not isinstance(action["idempotency_key"], str) or not action["idempotency_key"]:
                fail(
                    f"node {ref!r}: idempotency_key must be a non-empty string template",
                    ref=ref,
                    field="action.idempotency_key",
                )
            _placeholders(action["idempotency_key"], input_mapping, ref, "action.idempotency_key")
    retries = raw.get("retries")
    if retries is not None:
        _retries(retries, ref)
    timeout_ms = None
    if raw.get("timeout") is not None:
        timeout_ms = duration(raw["timeout"], ref=ref, field="timeout")
    return Node(ref, kind, action, dict(input_mapping), dict(output_mapping), retries, timeout_ms)


def _placeholders(template: str, input_mapping: dict, ref: str, field: str) -> None:
    """Every `{name}` of an http template (url, idempotency_key) must be a plain key of the
    node's input_mapping."""
    what = field.rsplit(".", 1)[-1]
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        fail(f"node {ref!r}: bad {what} template: {exc}", ref=ref, field=field)
    for name in fields:
        if not name.isidentifier() or name not in input_mapping:
            fail(
                f"node {ref!r}: {what} placeholder {{{name}}} must be a key of input_mapping",
                ref=ref,
                field=field,
            )


def _retries(raw, ref: str) -> None:
    from workflows.decisions import retry_policy
    from workflows.errors import WorkflowError

    try:
        retry_policy(raw)
    except WorkflowError as exc:
        fail(f"retries of {ref!r}: {exc.message}", ref=ref, field="retries")


def parse(doc, *, known_workflows=None, publishing: bool = False) -> Graph:
    """The Graph for `doc`, or InvalidGraph naming what is wrong. `publishing` adds the checks
    a published version was not always held to (schema references), so that parsing a version
    published earlier, to run it, never refuses what its publish accepted."""
    if known_workflows is None:
        from workflows.authoring import registry

        known_workflows = set(registry.names())
    if not isinstance(doc, dict):
        fail("a graph definition must be a JSON object")
    keys(doc, TOP_KEYS, ref=doc.get("name"), what="definition")
    name = doc.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        fail(f"name {name!r} must match {NAME.pattern}", field="name")
    raw_nodes = doc.get("nodes")
    if not isinstance(raw_nodes, list) or not 1 <= len(raw_nodes) <= MAX_NODES:
        fail(f"nodes must be a list of 1…{MAX_NODES} nodes", field="nodes")
    nodes: dict[str, Node] = {}
    for raw in raw_nodes:
        node = _node(raw, known_workflows)
        if node.ref in nodes:
            fail(f"node ref {node.ref!r} is used twice", ref=node.ref, field="ref")
        nodes[node.ref] = node
    initial = doc.get("initial_node")
    if initial not in nodes:
        fail(f"initial_node {initial!r} is not a node", ref=initial, field="initial_node")
    raw_transitions = doc.get("transitions", [])
    if not isinstance(raw_transitions, list) or len(raw_transitions) > MAX_TRANSITIONS:
        fail(f"transitions must be a list of at most {MAX_TRANSITIONS}", field="transitions")
    transitions: list[Transition] = []
    refs: set[str] = set()
    for index, raw in enumerate(raw_transitions):
        t = routes.parse_transition(raw, index, nodes, refs)
        refs.add(t.ref)
        transitions.append(t)
    routes.check_fan_ins(transitions)
    timeout_ms = None
    if doc.get("timeout") is not None:
        timeout_ms = duration(doc["timeout"], ref=name, field="timeout")
    on_timeout = doc.get("on_timeout", "fail")
    if on_timeout not in RUN_TIMEOUT_ACTIONS:
        fail(f"on_timeout must be one of {RUN_TIMEOUT_ACTIONS}", field="on_timeout")
    gate = _timeout_gate(doc.get("timeout_gate"), on_timeout, nodes)
    routes.check_reachable(nodes, [initial] + ([gate] if gate else []), transitions)
    routes.check_cycles([initial] + ([gate] if gate else []), transitions)
    routes.check_taken(nodes, transitions, publishing=publishing)
    return Graph(
        name=name,
        initial_node=initial,
        nodes=nodes,
        transitions=tuple(transitions),
        input_schema=schemas.check(doc.get("input_schema"), "input_schema", refs=publishing),
        context_schema=schemas.check(doc.get("context_schema"), "context_schema", refs=publishing),
        timeout_ms=timeout_ms,
        on_timeout=on_timeout,
        timeout_gate=gate,
        output_schema=schemas.check(doc.get("output_schema"), "output_schema", refs=publishing),
        tags=check_tags(doc.get("tags")),
        four_eyes=_four_eyes(doc.get("four_eyes", False)),
    )


def _four_eyes(raw) -> bool:
    """four_eyes: true keeps whoever started a run from answering its human nodes."""
    if not isinstance(raw, bool):
        fail("four_eyes must be true or false", field="four_eyes")
    return raw


def _timeout_gate(raw, on_timeout: str, nodes: dict) -> str | None:
    """The human node a timed-out run waits at: named exactly when on_timeout is human_gate."""
    if on_timeout != "human_gate":
        if raw is not None:
            fail("timeout_gate is only for on_timeout: human_gate", field="timeout_gate")
        return None
    node = nodes.get(raw)
    if node is None or node.kind != "human":
        fail(
            f"on_timeout human_gate needs timeout_gate naming a human node, got {raw!r}",
            ref=raw if isinstance(raw, str) else None,
            field="timeout_gate",
        )
    return raw


def check_tags(raw) -> tuple[str, ...]:
    """A definition's tags: at most MAX_TAGS distinct short names (filters in the API and the
    console); InvalidGraph otherwise."""
    if raw is None:
        return ()
    if (
        not isinstance(raw, list)
        or len(raw) > MAX_TAGS
        or any(not isinstance(t, str) or not TAG.match(t) for t in raw)
        or len(set(raw)) != len(raw)
    ):
        fail(
            f"tags must be a list of at most {MAX_TAGS} distinct names matching {TAG.pattern}",
            field="tags",
        )
    return tuple(raw)
