"""Server-side SVG of a graph definition for the console (no JavaScript, no CDN).

Layout: nodes in columns by their longest distance from the initial node (edges that close a
cycle are ignored for layering), rows in definition order; edges are straight arrows labelled
with what makes them special (priority, condition, foreach, fan-in, loop); failure routes are
red and say "on failure". Every text goes
through escape(), since definitions are user data.
"""

from django.utils.html import escape

from graphs import routes, spec

NODE_W, NODE_H, COL_GAP, ROW_GAP, PAD = 160, 46, 140, 34, 24
KIND_COLORS = {
    "python": "#dbeafe",
    "http": "#fde68a",
    "workflow": "#e9d5ff",
    "human": "#bbf7d0",
    "set": "#e5e7eb",
    "sleep": "#fecaca",
}


def _layers(graph: spec.Graph) -> dict[str, int]:
    back = {
        t.ref
        for t in routes.back_edges(
            [graph.initial_node, *([graph.timeout_gate] if graph.timeout_gate else [])],
            graph.transitions,
        )
    }
    forward = [t for t in graph.transitions if t.ref not in back]
    layer = {graph.initial_node: 0}
    for _ in range(len(graph.nodes)):  # longest path on a DAG: relax |V| times
        changed = False
        for t in forward:
            if t.source in layer and layer.get(t.target, -1) < layer[t.source] + 1:
                layer[t.target] = layer[t.source] + 1
                changed = True
        if not changed:
            break
    for ref in graph.nodes:
        layer.setdefault(ref, 0)
    return layer


def _label(t: spec.Transition) -> str:
    parts = ["on failure"] if t.on == spec.FAILURE else []
    if t.priority != spec.DEFAULT_PRIORITY:
        parts.append(f"p{t.priority}")
    if t.condition is not None:
        parts.append("if")
    if t.foreach is not None:
        parts.append(f"foreach {t.foreach}")
    if t.spawn_count is not None:
        parts.append(f"spawn {t.spawn_count}")
    if t.sync is not None:
        strategy = f"{t.sync.m} of n" if t.sync.strategy == "m_of_n" else t.sync.strategy
        parts.append(f"join {strategy}")
    if t.max_iterations is not None:
        parts.append(f"≤{t.max_iterations}×")
    return " ".join(parts)


# A run's drawing: each node's state from its tokens (graphs.admin), worst first when a node
# was visited by several tokens.
STATE_STYLE = {  # state: (fill, border, legend)
    "failed": ("#fecaca", "#dc2626", "failed"),
    "waiting": ("#fef08a", "#ca8a04", "waiting for a person"),
    "running": ("#bfdbfe", "#2563eb", "running"),
    "done": ("#bbf7d0", "#16a34a", "done"),
    "not_reached": ("#f9fafb", "#d1d5db", "not reached"),
}
STATE_RANK = list(STATE_STYLE)


def node_states(tokens, human_nodes: set[str]) -> dict[str, str]:
    """{node ref: state} from (node_ref, status) pairs of a run's tokens. An executing token at a
    human node waits for a person; nodes no token visited are absent (not reached)."""
    states: dict[str, str] = {}
    for ref, status in tokens:
        if status in ("failed", "timed_out"):
            state = "failed"
        elif status == "executing" and ref in human_nodes:
            state = "waiting"
        elif status in ("pending", "executing", "waiting_for_siblings"):
            state = "running"
        elif status == "completed":
            state = "done"
        else:  # cancelled: its branch lost a race or the run ended first
            state = "not_reached"
        current = states.get(ref)
        if current is None or STATE_RANK.index(state) < STATE_RANK.index(current):
            states[ref] = state
    return states


def svg(
    document: dict,
    *,
    states: dict[str, str] | None = None,
    taken: set[tuple[str, str]] | None = None,
) -> str:
    """The drawing, or a short SVG saying why the document cannot be drawn (a broken draft).
    With `states` (a run's node_states) nodes are coloured by state, unvisited ones "not
    reached"; `taken` (source, target) edges are drawn bold: the path the run took."""
    try:
        graph = spec.parse(document)
    except Exception as exc:  # drafts may be invalid; the page still renders
        message = escape(getattr(exc, "message", str(exc)))[:200]
        return f'<svg xmlns="http://www.w3.org/2000/svg" width="600" height="40"><text x="10" y="25" fill="#b91c1c">cannot draw: {message}</text></svg>'
    layers = _layers(graph)
    rows: dict[int, int] = {}
    pos = {}
    for ref in graph.nodes:
        col = layers[ref]
        row = rows.get(col, 0)
        rows[col] = row + 1
        pos[ref] = (PAD + col * (NODE_W + COL_GAP), PAD + row * (NODE_H + ROW_GAP))
    columns, most_rows = max(layers.values()) + 1, max(rows.values())
    width = PAD * 2 + columns * NODE_W + (columns - 1) * COL_GAP
    height = PAD * 2 + most_rows * NODE_H + (most_rows - 1) * ROW_GAP + 20  # self-loop arcs
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" '
        'markerHeight="9" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
        'fill="#374151"/></marker></defs>',
    ]
    for t in graph.transitions:
        (x1, y1), (x2, y2) = pos[t.source], pos[t.target]
        if t.source == t.target:
            out.append(
                f'<path d="M {x1 + NODE_W - 30} {y1} C {x1 + NODE_W - 30} {y1 - 30}, {x1 + NODE_W} {y1 - 30}, {x1 + NODE_W} {y1 + 10}" fill="none" stroke="#374151" marker-end="url(#arrow)"/>'
            )
            lx, ly = x1 + NODE_W - 20, y1 - 22
        else:
            sx, sy = x1 + NODE_W, y1 + NODE_H / 2
            ex, ey = (x2, y2 + NODE_H / 2) if x2 > x1 else (x2 + NODE_W / 2, y2 + NODE_H)
            dash = ' stroke-dasharray="4 3"' if t.sync is not None else ""
            color = "#b91c1c" if t.on == spec.FAILURE else "#374151"
            on_path = taken is not None and (t.source, t.target) in taken
            width = ' stroke-width="3" class="vf-taken"' if on_path else ""
            if taken is not None and not on_path:
                color = "#d1d5db" if t.on != spec.FAILURE else "#fca5a5"
            out.append(
                f'<line x1="{sx}" y1="{sy}" x2="{ex}" y2="{ey}" stroke="{color}"{dash}{width} marker-end="url(#arrow)"/>'
            )
            lx, ly = (sx + ex) / 2, (sy + ey) / 2 - 4
        label = _label(t)
        if label:
            out.append(
                f'<text x="{lx}" y="{ly}" text-anchor="middle" fill="#1f2937">{escape(label)}</text>'
            )
    for ref, node in graph.nodes.items():
        x, y = pos[ref]
        border = "#111827" if ref == graph.initial_node else "#6b7280"
        fill = KIND_COLORS.get(node.kind, "#fff")
        state, stroke = "", 2 if ref == graph.initial_node else 1
        if states is not None:
            state = states.get(ref, "not_reached")
            fill, border, _ = STATE_STYLE[state]
            stroke = 1 if state == "not_reached" else 2.5
        out.append(
            f'<g class="vf-node" data-node="{escape(ref)}" data-state="{state}">'
            f"<title>{escape(ref)}: {escape(node.kind)}{': ' + STATE_STYLE[state][2] if state else ''}</title>"
            f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="8" fill="{fill}" stroke="{border}" stroke-width="{stroke}"/>'
            f'<text x="{x + NODE_W / 2}" y="{y + 19}" text-anchor="middle" font-weight="bold">{escape(_cut(ref, 22))}</text>'
            f'<text x="{x + NODE_W / 2}" y="{y + 35}" text-anchor="middle" fill="#374151">{escape(_cut(_kind_label(node), 25))}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind_label(node: spec.Node) -> str:
    action = node.action
    detail = {
        "python": action.get("name", ""),
        "http": action.get("method", "POST"),
        "workflow": action.get("workflow", ""),
        "human": action.get("event_type", ""),
        "sleep": str(action.get("duration", "")),
    }.get(node.kind, "")
    return f"{node.kind} {detail}".strip()
