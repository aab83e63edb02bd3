"""Pure coordination of a graph run: given the definition and the run's state, decide what
happens next and apply results. No database, no clock, no I/O — the executor
(graphs/workflows.py) runs the actions as durable steps and feeds their results back here.

The state is a plain dataclass: contexts per scope ("" = the run context, "0.1" = branch 1 of
the fan-out made by token 0), tokens (one per node visit, `path` like "0.1.2" = token 2 of that
branch), fan-out groups, loop counters, and a journal of run events with their sequence numbers
that the executor stores. Time is logical: `clock_ms` only moves when a result carries a time.

Transition rules: the outgoing transitions of a node form tiers by `priority` (lower first); the
first tier with any match wins and every matching transition in it fires. A fan-out (foreach /
spawn_count) opens one branch scope per item with /branch = {index, total, item}; a fan-in
(`synchronization`) waits for its fan-out's branches (all | any | m_of_n), merges
`merge.source` of each arrived branch into `merge.target` of the parent scope, cancels what is
left of the other branches and continues in the parent scope.
"""

import copy
from dataclasses import dataclass, field

from jsonschema.validators import validator_for

from graphs import conditions, pointers
from graphs.spec import Graph, Transition

# Token statuses (the GraphToken table uses the same words).
PENDING = "pending"
EXECUTING = "executing"
WAITING = "waiting_for_siblings"
COMPLETED = "completed"
FAILED = "failed"
TIMED_OUT = "timed_out"
CANCELLED = "cancelled"
LIVE = (PENDING, EXECUTING)

EVENT_TYPES = (
    "run_started",
    "token_spawned",
    "node_started",
    "node_completed",
    "node_failed",
    "fan_in_waiting",
    "fan_in_completed",
    "context_updated",
    "run_completed",
    "run_failed",
)


@dataclass
class Token:
    path: str
    node: str
    status: str
    scope: str
    seq: int
    parent: str | None = None
    fan_out: str | None = None
    branch_index: int | None = None
    branch_total: int | None = None
    output: object = None
    error: dict | None = None


@dataclass
class Group:
    id: str
    fan_out: str
    fan_in: str | None
    origin: str
    parent_scope: str
    scopes: list[str]
    started_ms: int
    arrived: list[int] = field(default_factory=list)  # branch indexes, in arrival order
    done: bool = False


@dataclass
class RunState:
    contexts: dict[str, dict]
    started_ms: int
    clock_ms: int
    tokens: dict[str, Token] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    scope_group: dict[str, str] = field(default_factory=dict)
    loops: dict[str, int] = field(default_factory=dict)
    seq: int = 0
    token_seq: int = 0
    journal: list[dict] = field(default_factory=list)
    dirty: set[str] = field(default_factory=set)  # token paths changed since the last flush
    context_dirty: bool = False
    outcome: tuple | None = None  # ("completed", output) | ("failed", error)

    @property
    def context(self) -> dict:
        return self.contexts[""]


# -- decisions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dispatch:
    path: str
    node: str


@dataclass(frozen=True)
class FanInTimeout:
    group: str


@dataclass(frozen=True)
class RunTimeout:
    pass


@dataclass(frozen=True)
class Complete:
    output: object


@dataclass(frozen=True)
class Fail:
    error: dict


def decide(graph: Graph, state: RunState) -> list:
    """What to do next: [Complete] / [Fail] once the run is over, a timeout to apply, or the
    pending tokens to dispatch (in creation order). [] means: wait for executing tokens."""
    if state.outcome is not None:
        kind, value = state.outcome
        return [Complete(value) if kind == "completed" else Fail(value)]
    if graph.timeout_ms is not None and state.clock_ms - state.started_ms >= graph.timeout_ms:
        return [RunTimeout()]
    for group in state.groups.values():
        timeout = _fan_in_timeout_ms(graph, group)
        if not group.done and timeout is not None and state.clock_ms - group.started_ms >= timeout:
            return [FanInTimeout(group.id)]
    pending = sorted((t for t in state.tokens.values() if t.status == PENDING), key=lambda t: t.seq)
    if pending:
        return [Dispatch(t.path, t.node) for t in pending]
    if any(t.status in LIVE for t in state.tokens.values()):
        return []
    return [Complete(state.context)]


def _fan_in_timeout_ms(graph: Graph, group: Group) -> int | None:
    if group.fan_in is None:
        return None
    return graph.transition(group.fan_in).sync.timeout_ms


# -- starting -------------------------------------------------------------------------------


def start(graph: Graph, run_input, *, now_ms: int) -> RunState:
    state = RunState(
        contexts={"": {"input": copy.deepcopy(run_input)}}, started_ms=now_ms, clock_ms=now_ms
    )
    _event(state, "run_started", data={"input": run_input})
    _spawn(state, graph.initial_node, scope="", parent=None)
    return state


def _event(state: RunState, type_: str, *, token: Token | None = None, data=None) -> None:
    state.seq += 1
    state.journal.append(
        {
            "sequence_number": state.seq,
            "type": type_,
            "token": token.path if token else "",
            "node": token.node if token else "",
            "data": data,
            "at_ms": state.clock_ms,
        }
    )


def _touch(state: RunState, token: Token) -> None:
    state.dirty.add(token.path)


def _spawn(state: RunState, node: str, *, scope: str, parent: str | None, branch=None) -> Token:
    number = state.counters.get(scope, 0)
    state.counters[scope] = number + 1
    path = f"{scope}.{number}" if scope else str(number)
    inherited = _branch_of(state, scope)
    branch = branch or inherited
    state.token_seq += 1
    token = Token(
        path=path,
        node=node,
        status=PENDING,
        scope=scope,
        seq=state.token_seq,
        parent=parent,
        fan_out=branch[0] if branch else None,
        branch_index=branch[1] if branch else None,
        branch_total=branch[2] if branch else None,
    )
    state.tokens[path] = token
    _touch(state, token)
    _event(state, "token_spawned", token=token, data={"parent": parent})
    return token


def _branch_of(state: RunState, scope: str):
    """(fan_out ref, index, total) of the innermost branch `scope` lies in, or None."""
    if not scope:
        return None
    group = state.groups[state.scope_group[scope]]
    index = group.scopes.index(scope)
    return (group.fan_out, index, len(group.scopes))


# -- inputs ---------------------------------------------------------------------------------


def resolve(context, operand):
    """A pointer string or {"path"} reads the context (absent → None); {"value"} is a literal."""
    if isinstance(operand, str):
        operand = {"path": operand}
    if "value" in operand:
        return copy.deepcopy(operand["value"])
    found = pointers.get(context, operand["path"])
    return None if found is pointers.MISSING else copy.deepcopy(found)


def token_context(state: RunState, path: str) -> dict:
    return state.contexts[state.tokens[path].scope]


def node_input(graph: Graph, state: RunState, path: str) -> dict:
    token = state.tokens[path]
    context = state.contexts[token.scope]
    mapping = graph.nodes[token.node].input_mapping
    return {key: resolve(context, source) for key, source in mapping.items()}


# -- results --------------------------------------------------------------------------------


def node_started(state: RunState, path: str) -> None:
    token = state.tokens[path]
    token.status = EXECUTING
    _touch(state, token)
    _event(state, "node_started", token=token)


def node_completed(
    graph: Graph, state: RunState, path: str, output, *, at_ms: int, writes=None, timed_out=False
) -> None:
    """Store a node's output: apply `writes` ({pointer: value}, the set action's) and the
    output mapping to the token's scope, validate the run context, then route the token."""
    token = state.tokens[path]
    state.clock_ms = max(state.clock_ms, at_ms)
    node = graph.nodes[token.node]
    context = state.contexts[token.scope]
    changes = dict(writes or {})
    for target, source in node.output_mapping.items():
        found = pointers.get(output, source)
        changes[target] = None if found is pointers.MISSING else found
    try:
        for target, value in changes.items():
            pointers.set(context, target, value)
    except pointers.PointerError as exc:
        node_failed(graph, state, path, {"name": "MappingError", "message": str(exc)}, at_ms=at_ms)
        return
    token.status = TIMED_OUT if timed_out else COMPLETED
    token.output = output
    _touch(state, token)
    _event(state, "node_completed", token=token, data={"output": output, "timed_out": timed_out})
    if changes:
        _context_updated(state, token.scope, changes, token=token)
        problems = context_problems(graph, state)
        if problems:
            _fail_run(
                state,
                {"name": "ContextInvalid", "message": problems[0]["message"], "errors": problems},
                token=token,
            )
            return
    _route(graph, state, token)


def _context_updated(state: RunState, scope: str, changes: dict, *, token: Token | None) -> None:
    if scope == "":
        state.context_dirty = True
    data = {"scope": scope, "changes": [{"path": p, "value": v} for p, v in changes.items()]}
    _event(state, "context_updated", token=token, data=data)


def context_problems(graph: Graph, state: RunState) -> list[dict]:
    if graph.context_schema is None:
        return []
    validator = validator_for(graph.context_schema)(graph.context_schema)
    return schema_errors(validator, state.context)


def schema_errors(validator, document) -> list[dict]:
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [
        {"path": "/" + "/".join(str(p) for p in e.absolute_path), "message": e.message}
        for e in errors
    ]


def node_failed(graph: Graph, state: RunState, path: str, error: dict, *, at_ms: int) -> None:
    token = state.tokens[path]
    state.clock_ms = max(state.clock_ms, at_ms)
    token.status, token.error = FAILED, error
    _touch(state, token)
    _event(state, "node_failed", token=token, data={"error": error})
    if token.scope:
        _branch_ended(graph, state, token)
    else:
        _fail_run(
            state,
            {
                "name": "NodeFailed",
                "message": f"node {token.node!r} failed: {error.get('message', '')}",
                "node": token.node,
            },
            token=token,
        )


def _fail_run(state: RunState, error: dict, *, token: Token | None = None) -> None:
    if state.outcome is not None:
        return
    for other in state.tokens.values():
        if other.status in (PENDING, EXECUTING, WAITING):
            other.status = CANCELLED
            _touch(state, other)
    state.outcome = ("failed", error)
    _event(state, "run_failed", token=token, data={"error": error})


def finish(state: RunState) -> None:
    """Record run_completed (the executor calls this when decide() says Complete)."""
    if state.outcome is None:
        state.outcome = ("completed", state.context)
        _event(state, "run_completed", data=None)


# -- routing --------------------------------------------------------------------------------


def _route(graph: Graph, state: RunState, token: Token) -> None:
    outgoing = graph.outgoing(token.node)
    if not outgoing:
        if token.scope:
            _branch_ended(graph, state, token)
        return
    context = state.contexts[token.scope]
    for priority in sorted({t.priority for t in outgoing}):
        tier = [t for t in outgoing if t.priority == priority and _matches(state, t, context)]
        if tier:
            for transition in tier:
                _fire(graph, state, token, transition)
                if state.outcome is not None:
                    return
            return
    if token.scope:
        _branch_ended(graph, state, token)
        return
    _fail_run(
        state,
        {
            "name": "NoTransition",
            "message": f"no transition from {token.node!r} matched",
            "node": token.node,
        },
        token=token,
    )


def _matches(state: RunState, transition: Transition, context: dict) -> bool:
    if (
        transition.max_iterations is not None
        and state.loops.get(transition.ref, 0) >= transition.max_iterations
    ):
        return False
    return conditions.evaluate(transition.condition, context)


def _fire(graph: Graph, state: RunState, token: Token, transition: Transition) -> None:
    if transition.max_iterations is not None:
        state.loops[transition.ref] = state.loops.get(transition.ref, 0) + 1
    if transition.sync is not None:
        _arrive(graph, state, token, transition)
    elif transition.fans_out:
        _fan_out(graph, state, token, transition)
    else:
        _spawn(state, transition.target, scope=token.scope, parent=token.path)


def _fan_out(graph: Graph, state: RunState, token: Token, transition: Transition) -> None:
    context = state.contexts[token.scope]
    if transition.foreach is not None:
        items = pointers.get(context, transition.foreach)
        if not isinstance(items, list):
            _fail_run(
                state,
                {
                    "name": "ForeachNotArray",
                    "message": f"foreach {transition.ref!r}: {transition.foreach} is not an array",
                    "transition": transition.ref,
                },
                token=token,
            )
            return
    else:
        items = [None] * transition.spawn_count
    first = state.counters.get(f"branches:{token.path}", 0)
    state.counters[f"branches:{token.path}"] = first + len(items)
    scopes = [f"{token.path}.{first + i}" for i in range(len(items))]
    fan_in = next(
        (t.ref for t in graph.transitions if t.sync and t.sync.fan_out == transition.ref), None
    )
    group = Group(
        id=f"{token.path}:{transition.ref}",
        fan_out=transition.ref,
        fan_in=fan_in,
        origin=token.path,
        parent_scope=token.scope,
        scopes=scopes,
        started_ms=state.clock_ms,
    )
    state.groups[group.id] = group
    for index, (scope, item) in enumerate(zip(scopes, items, strict=True)):
        branch_context = copy.deepcopy({k: v for k, v in context.items() if k != "branch"})
        branch_context["branch"] = {
            "index": index,
            "total": len(items),
            "item": copy.deepcopy(item),
        }
        state.contexts[scope] = branch_context
        state.scope_group[scope] = group.id
        _spawn(
            state,
            transition.target,
            scope=scope,
            parent=token.path,
            branch=(transition.ref, index, len(items)),
        )
    if not items and fan_in is not None:
        _complete_group(graph, state, group, graph.transition(fan_in))


def _group_for(state: RunState, scope: str, fan_out: str) -> tuple[Group, int] | None:
    """The open group of `fan_out` that `scope` lies in, and the branch index within it."""
    while scope:
        group = state.groups[state.scope_group[scope]]
        if group.fan_out == fan_out:
            return group, group.scopes.index(scope)
        scope = group.parent_scope
    return None


def _arrive(graph: Graph, state: RunState, token: Token, transition: Transition) -> None:
    found = _group_for(state, token.scope, transition.sync.fan_out)
    if found is None:
        _fail_run(
            state,
            {
                "name": "FanInOutsideFanOut",
                "message": f"fan-in {transition.ref!r} reached outside a branch of {transition.sync.fan_out!r}",
                "transition": transition.ref,
            },
            token=token,
        )
        return
    group, index = found
    timeout = _fan_in_timeout_ms(graph, group)
    if not group.done and timeout is not None and state.clock_ms - group.started_ms >= timeout:
        apply_fan_in_timeout(graph, state, group.id)  # this arrival came too late to count
    if group.done or index in group.arrived:
        return  # the group already moved on, or this branch arrived by another path first
    group.arrived.append(index)
    token.status = WAITING
    _touch(state, token)
    _event(
        state,
        "fan_in_waiting",
        token=token,
        data={"group": group.id, "arrived": len(group.arrived), "total": len(group.scopes)},
    )
    _check_group(graph, state, group, transition)


def _needed(transition: Transition, total: int) -> int:
    sync = transition.sync
    if sync.strategy == "all":
        return total
    if sync.strategy == "any":
        return min(1, total)
    return sync.m


def _check_group(graph: Graph, state: RunState, group: Group, transition: Transition) -> None:
    needed = _needed(transition, len(group.scopes))
    if len(group.arrived) >= needed:
        _complete_group(graph, state, group, transition)
        return
    alive = sum(
        1
        for index, scope in enumerate(group.scopes)
        if index not in group.arrived and _scope_alive(state, scope)
    )
    if len(group.arrived) + alive < needed:
        _fail_run(
            state,
            {
                "name": "FanInUnsatisfiable",
                "message": f"fan-in {transition.ref!r} needs {needed} of {len(group.scopes)} branches; "
                f"{len(group.arrived)} arrived and {alive} can still arrive",
                "transition": transition.ref,
            },
        )


def _in_scope(token_scope: str, scope: str) -> bool:
    return token_scope == scope or token_scope.startswith(scope + ".")


def _scope_alive(state: RunState, scope: str) -> bool:
    return any(
        t.status in (PENDING, EXECUTING, WAITING) and _in_scope(t.scope, scope)
        for t in state.tokens.values()
    )


def _branch_ended(graph: Graph, state: RunState, token: Token) -> None:
    """A token inside a branch failed or reached an end without arriving at its fan-in: the
    innermost group may no longer be satisfiable. With no fan-in, a failure fails the run."""
    group = state.groups[state.scope_group[token.scope]]
    if group.done:
        return
    if group.fan_in is None:
        if token.status == FAILED:
            _fail_run(
                state,
                {
                    "name": "NodeFailed",
                    "message": f"node {token.node!r} failed",
                    "node": token.node,
                },
                token=token,
            )
        return
    _check_group(graph, state, group, graph.transition(group.fan_in))


def _complete_group(graph: Graph, state: RunState, group: Group, transition: Transition) -> None:
    group.done = True
    cancelled = []
    for t in state.tokens.values():
        if not any(_in_scope(t.scope, s) for s in group.scopes):
            continue
        if t.status == WAITING:
            t.status = COMPLETED
            _touch(state, t)
        elif t.status in LIVE:
            t.status = CANCELLED
            cancelled.append(t.path)
            _touch(state, t)
    parent_context = state.contexts[group.parent_scope]
    merge = transition.sync.merge
    data = {"group": group.id, "arrived": list(group.arrived), "cancelled": cancelled}
    if merge is not None:
        try:
            merged = merge_values(
                merge.strategy,
                [
                    (i, pointers.get(state.contexts[group.scopes[i]], merge.source))
                    for i in group.arrived
                ],
                existing=pointers.get(parent_context, merge.target),
            )
        except MergeError as exc:
            _fail_run(
                state,
                {
                    "name": "MergeError",
                    "message": f"fan-in {transition.ref!r}: {exc}",
                    "transition": transition.ref,
                },
            )
            return
        pointers.set(parent_context, merge.target, merged)
        data["merged_into"] = merge.target
    _event(state, "fan_in_completed", data=data)
    if merge is not None:
        _context_updated(state, group.parent_scope, {merge.target: merged}, token=None)
    origin = state.tokens[group.origin]
    _spawn(state, transition.target, scope=group.parent_scope, parent=origin.path)


class MergeError(ValueError):
    pass


def merge_values(strategy: str, values: list[tuple[int, object]], *, existing=pointers.MISSING):
    """Merge each arrived branch's value (branch index, value) in arrival order. Branches whose
    source is absent contribute nothing (and are not an error: a branch may legitimately skip
    the node that writes it)."""
    present = [(i, v) for i, v in values if v is not pointers.MISSING]
    if strategy == "append":
        base = list(existing) if isinstance(existing, list) else []
        return base + [v for _, v in present]
    if strategy == "merge_object":
        base = dict(existing) if isinstance(existing, dict) else {}
        for index, value in present:
            if not isinstance(value, dict):
                raise MergeError(f"merge_object: branch {index}'s value is not an object")
            base.update(value)
        return base
    if strategy == "keyed_by_branch":
        return {str(i): v for i, v in present}
    if strategy == "last_wins":
        return present[-1][1] if present else None
    raise MergeError(f"unknown merge strategy {strategy!r}")


# -- timeouts -------------------------------------------------------------------------------


def apply_fan_in_timeout(graph: Graph, state: RunState, group_id: str) -> None:
    group = state.groups[group_id]
    transition = graph.transition(group.fan_in)
    if transition.sync.on_timeout == "proceed_with_available":
        _complete_group(graph, state, group, transition)
        return
    group.done = True
    _fail_run(
        state,
        {
            "name": "FanInTimeout",
            "message": f"fan-in {transition.ref!r} timed out with {len(group.arrived)} of {len(group.scopes)} branches",
            "transition": transition.ref,
        },
    )


def apply_run_timeout(graph: Graph, state: RunState) -> None:
    if graph.on_timeout == "cancel_all":
        for t in state.tokens.values():
            if t.status in (PENDING, EXECUTING, WAITING):
                t.status = CANCELLED
                _touch(state, t)
        state.outcome = ("completed", state.context)
        _event(state, "run_completed", data={"cancelled": True, "reason": "timeout"})
        return
    for t in state.tokens.values():
        if t.status in (PENDING, EXECUTING, WAITING):
            t.status = TIMED_OUT
            _touch(state, t)
    _fail_run(state, {"name": "RunTimeout", "message": "the run exceeded its timeout"})


def advance_clock(state: RunState, now_ms: int) -> None:
    state.clock_ms = max(state.clock_ms, now_ms)


def take_journal(state: RunState) -> tuple[list[dict], list[Token], bool]:
    """(events, changed tokens, run context changed) since the last take; clears them."""
    events, state.journal = state.journal, []
    tokens = [state.tokens[p] for p in sorted(state.dirty, key=lambda p: state.tokens[p].seq)]
    state.dirty = set()
    changed, state.context_dirty = state.context_dirty, False
    return events, tokens, changed
