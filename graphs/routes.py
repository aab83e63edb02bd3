"""Transitions of a graph definition: parse each one (known refs, priority, condition, fan-out,
fan-in, loop), then check the routes as a whole — every fan-in pairs with a fan-out whose
branches reach it, every node is reachable, and a transition that closes a cycle has
loop_config.max_iterations. Refusals are InvalidGraph naming the transition's ref."""

from graphs import conditions
from graphs.shapes import (
    DEFAULT_PRIORITY,
    FAILURE,
    SUCCESS,
    Merge,
    Sync,
    Transition,
    duration,
    fail,
    keys,
    pointer,
)

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
    "on",
}
MERGE_STRATEGIES = ("append", "merge_object", "keyed_by_branch", "last_wins")
FAN_IN_TIMEOUT_ACTIONS = ("proceed_with_available", "fail")
MAX_SPAWN = 1000
# Node kinds that never fail for good (a human node's timeout is an output): a failure route
# from one can never be taken. A `workflow` node naming a code workflow fails only when its
# child does, which it routes only with "catch": true.
CANNOT_FAIL = ("human", "sleep", "set")


def parse_transition(raw, index: int, nodes: dict, seen_refs: set) -> Transition:
    if not isinstance(raw, dict):
        fail("every transition must be an object", field="transitions")
    source, target = raw.get("from"), raw.get("to")
    ref = raw.get("ref") or f"{source}->{target}"
    if ref in seen_refs:
        ref = raw.get("ref") or f"{ref}#{index}"
        if ref in seen_refs:
            fail(f"transition ref {ref!r} is used twice", ref=ref, field="ref")
    if not isinstance(ref, str) or not ref or len(ref) > 140:
        fail(f"transition ref {ref!r} must be a short string", ref=str(ref), field="ref")
    keys(raw, TRANSITION_KEYS, ref=ref, what="transition")
    for end, value in (("from", source), ("to", target)):
        if value not in nodes:
            fail(f"transition {ref!r}: unknown node ref {value!r} in {end!r}", ref=ref, field=end)
    on = raw.get("on", SUCCESS)
    if on not in (SUCCESS, FAILURE):
        fail(f"transition {ref!r}: on must be {SUCCESS!r} or {FAILURE!r}", ref=ref, field="on")
    priority = raw.get("priority", DEFAULT_PRIORITY)
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
        fail(f"transition {ref!r}: priority must be an integer ≥ 0", ref=ref, field="priority")
    condition = raw.get("condition")
    if condition is not None:
        try:
            conditions.check(condition)
        except conditions.ConditionError as exc:
            fail(f"transition {ref!r}: {exc}", ref=ref, field="condition")
    foreach = raw.get("foreach")
    if foreach is not None:
        keys(foreach, {"collection"}, ref=ref, what="foreach")
        foreach = pointer(foreach.get("collection"), ref=ref, field="foreach.collection")
    spawn = raw.get("spawn_count")
    if spawn is not None and (
        isinstance(spawn, bool) or not isinstance(spawn, int) or not 1 <= spawn <= MAX_SPAWN
    ):
        fail(f"transition {ref!r}: spawn_count must be 1…{MAX_SPAWN}", ref=ref, field="spawn_count")
    if foreach is not None and spawn is not None:
        fail(f"transition {ref!r}: foreach or spawn_count, not both", ref=ref, field="foreach")
    loop = raw.get("loop_config")
    max_iterations = None
    if loop is not None:
        keys(loop, {"max_iterations"}, ref=ref, what="loop_config")
        max_iterations = loop.get("max_iterations")
        if (
            isinstance(max_iterations, bool)
            or not isinstance(max_iterations, int)
            or max_iterations < 1
        ):
            fail(
                f"transition {ref!r}: loop_config.max_iterations must be an integer ≥ 1",
                ref=ref,
                field="loop_config",
            )
    sync = None
    if raw.get("synchronization") is not None:
        if foreach is not None or spawn is not None:
            fail(
                f"transition {ref!r}: a fan-in cannot also fan out",
                ref=ref,
                field="synchronization",
            )
        sync = _sync(raw["synchronization"], ref)
    return Transition(
        ref, source, target, priority, condition, foreach, spawn, sync, max_iterations, on
    )


def _sync(raw, ref: str) -> Sync:
    keys(
        raw,
        {"fan_out", "strategy", "timeout", "on_timeout", "merge"},
        ref=ref,
        what="synchronization",
    )
    if not isinstance(raw.get("fan_out"), str):
        fail(
            f"fan-in {ref!r} must name its fan-out transition (synchronization.fan_out)",
            ref=ref,
            field="synchronization.fan_out",
        )
    strategy, m = raw.get("strategy", "all"), None
    if isinstance(strategy, dict) and set(strategy) == {"m_of_n"}:
        m = strategy["m_of_n"]
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            fail(
                f"fan-in {ref!r}: m_of_n must be an integer ≥ 1",
                ref=ref,
                field="synchronization.strategy",
            )
        strategy = "m_of_n"
    elif strategy not in ("all", "any"):
        fail(
            f"fan-in {ref!r}: strategy must be all, any or {{'m_of_n': k}}",
            ref=ref,
            field="synchronization.strategy",
        )
    timeout_ms = None
    if raw.get("timeout") is not None:
        timeout_ms = duration(raw["timeout"], ref=ref, field="synchronization.timeout")
    on_timeout = raw.get("on_timeout", "fail")
    if on_timeout not in FAN_IN_TIMEOUT_ACTIONS:
        fail(
            f"fan-in {ref!r}: on_timeout must be one of {FAN_IN_TIMEOUT_ACTIONS}",
            ref=ref,
            field="synchronization.on_timeout",
        )
    merge = None
    if raw.get("merge") is not None:
        keys(raw["merge"], {"source", "target", "strategy"}, ref=ref, what="merge")
        mraw = raw["merge"]
        if mraw.get("strategy", "append") not in MERGE_STRATEGIES:
            fail(
                f"fan-in {ref!r}: merge strategy must be one of {MERGE_STRATEGIES}",
                ref=ref,
                field="merge.strategy",
            )
        merge = Merge(
            source=pointer(mraw.get("source"), ref=ref, field="merge.source"),
            target=pointer(mraw.get("target"), ref=ref, field="merge.target", writable=True),
            strategy=mraw.get("strategy", "append"),
        )
    return Sync(raw["fan_out"], strategy, m, timeout_ms, on_timeout, merge)


def check_fan_ins(transitions: list[Transition]) -> None:
    by_ref = {t.ref: t for t in transitions}
    for t in transitions:
        if t.sync is None:
            continue
        fan_out = by_ref.get(t.sync.fan_out)
        if fan_out is None or not fan_out.fans_out:
            fail(
                f"fan-in {t.ref!r} has no matching fan-out: {t.sync.fan_out!r} is not a "
                "foreach/spawn_count transition",
                ref=t.ref,
                field="synchronization.fan_out",
            )
        if t.source not in reachable(fan_out.target, transitions):
            fail(
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
            fail(
                f"fan-in {t.ref!r}: m_of_n {t.sync.m} exceeds spawn_count",
                ref=t.ref,
                field="synchronization.strategy",
            )


def check_reachable(nodes, roots: list[str], transitions) -> None:
    """Every node is reachable from the initial node (roots[0]) or another root (the timeout
    gate), by success or failure routes."""
    found = set().union(*(reachable(root, transitions) for root in roots))
    for ref in nodes:
        if ref not in found:
            fail(f"node {ref!r} is unreachable from {roots[0]!r}", ref=ref, field="nodes")


def check_cycles(roots: list[str], transitions) -> None:
    for edge in back_edges(roots, transitions):
        if edge.max_iterations is None:
            fail(
                f"transition {edge.ref!r} closes a cycle: it needs loop_config.max_iterations",
                ref=edge.ref,
                field="loop_config",
            )


def check_taken(nodes: dict, transitions, *, publishing: bool) -> None:
    """Every failure route can be taken: its node can fail, and no transition before it (a
    lower priority, always matching) takes every failure first. Success routes are held to the
    same tier rule on publish (versions published earlier are not re-judged when they run)."""
    for t in transitions:
        if t.on != FAILURE:
            continue
        node = nodes[t.source]
        child = node.kind == "workflow" and "workflow" in node.action
        if node.kind in CANNOT_FAIL or (child and not node.action.get("catch")):
            hint = ' (add "catch": true to route its child\'s failure)' if child else ""
            fail(
                f"failure route {t.ref!r}: node {t.source!r} ({node.kind}) cannot fail, so it "
                f"can never be taken{hint}",
                ref=t.ref,
                field="on",
            )
    for source in nodes:
        for on in (FAILURE, SUCCESS) if publishing else (FAILURE,):
            _check_tiers([t for t in transitions if t.source == source and t.on == on])


def _check_tiers(outgoing: list[Transition]) -> None:
    """The first tier holding a transition that always matches (no condition, no loop limit)
    wins every time: a transition in a later tier can never be taken."""
    always = [t.priority for t in outgoing if t.condition is None and t.max_iterations is None]
    if not always:
        return
    for t in outgoing:
        if t.priority > min(always):
            winner = next(w for w in outgoing if w.priority == min(always) and w.condition is None)
            route = "failure route" if t.on == FAILURE else "transition"
            fail(
                f"{route} {t.ref!r} can never be taken: {winner.ref!r} (priority "
                f"{winner.priority}) always matches first",
                ref=t.ref,
                field="priority",
            )


def reachable(start: str, transitions) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        current = todo.pop()
        for t in transitions:
            if t.source == current and t.target not in seen:
                seen.add(t.target)
                todo.append(t.target)
    return seen


def back_edges(roots: list[str], transitions) -> list[Transition]:
    """Transitions that close a cycle, found by a depth-first walk from each root (the initial
    node, then the timeout gate) in definition order (so the same document always blames the
    same transition)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    found: list[Transition] = []
    for root in roots:
        if root not in state:
            state[root] = 1
            _walk(root, transitions, state, found)
    return found


def _walk(root: str, transitions, state: dict, found: list) -> None:
    stack = [(root, iter([t for t in transitions if t.source == root]))]
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
