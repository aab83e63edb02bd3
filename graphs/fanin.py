"""Fan-out and fan-in: open one branch scope per item (/branch = {index, total, item}), count
arrivals at the fan-in (all | any | m_of_n), fail once the strategy can no longer be met, apply
the fan-in timeout, merge each arrived branch's `merge.source` into the parent scope's
`merge.target` (append | merge_object | keyed_by_branch | last_wins), cancel what is left of
the other branches and continue in the parent scope. Pure, like graphs.decisions.
"""

import copy

from graphs import pointers
from graphs.spec import Graph, Transition
from graphs.state import (
    CANCELLED,
    COMPLETED,
    EXECUTING,
    FAILED,
    LIVE,
    PENDING,
    WAITING,
    Group,
    RunState,
    Token,
    context_updated,
    fail_run,
    in_scope,
    record_event,
    spawn,
    touch,
)


def fan_in_timeout_ms(graph: Graph, group: Group) -> int | None:
    if group.fan_in is None:
        return None
    return graph.transition(group.fan_in).sync.timeout_ms


def open_fan_out(graph: Graph, state: RunState, token: Token, transition: Transition) -> None:
    context = state.contexts[token.scope]
    if transition.foreach is not None:
        items = pointers.get(context, transition.foreach)
        if not isinstance(items, list):
            fail_run(
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
        # The parent's values, shared: writes copy what they change (pointers.set), so a
        # branch costs its own top-level dict, not a copy of the whole context.
        branch_context = {k: v for k, v in context.items() if k != "branch"}
        branch_context["branch"] = {
            "index": index,
            "total": len(items),
            "item": copy.deepcopy(item),
        }
        state.contexts[scope] = branch_context
        state.scope_group[scope] = group.id
        spawn(
            state,
            transition.target,
            scope=scope,
            parent=token.path,
            branch=(transition.ref, index, len(items)),
        )
    if not items and fan_in is not None:
        complete_group(graph, state, group, graph.transition(fan_in))


def group_for(state: RunState, scope: str, fan_out: str) -> tuple[Group, int] | None:
    """The open group of `fan_out` that `scope` lies in, and the branch index within it."""
    while scope:
        group = state.groups[state.scope_group[scope]]
        if group.fan_out == fan_out:
            return group, group.scopes.index(scope)
        scope = group.parent_scope
    return None


def arrive(graph: Graph, state: RunState, token: Token, transition: Transition) -> None:
    found = group_for(state, token.scope, transition.sync.fan_out)
    if found is None:
        fail_run(
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
    if group.lane_arrivals is not None:  # inside a branch lane: the join counts it
        note_lane_arrival(state, group, index, token)
        return
    timeout = fan_in_timeout_ms(graph, group)
    if not group.done and timeout is not None and state.clock_ms - group.started_ms >= timeout:
        apply_fan_in_timeout(graph, state, group.id)  # this arrival came too late to count
    if group.done or index in group.arrived:
        return  # the group already moved on, or this branch arrived by another path first
    group.arrived.append(index)
    token.status = WAITING
    touch(state, token)
    record_event(
        state,
        "fan_in_waiting",
        token=token,
        data={"group": group.id, "arrived": len(group.arrived), "total": len(group.scopes)},
    )
    check_group(graph, state, group, transition)


def note_lane_arrival(state: RunState, group: Group, index: int, token: Token) -> None:
    if any(a["index"] == index for a in group.lane_arrivals):
        return  # this branch arrived by another path first
    group.lane_arrivals.append(
        {"group": group.id, "index": index, "token": token.path, "at_ms": state.clock_ms}
    )
    token.status = WAITING
    touch(state, token)
    record_event(
        state,
        "fan_in_waiting",
        token=token,
        data={"group": group.id, "branch": index, "total": len(group.scopes)},
    )


def needed_arrivals(transition: Transition, total: int) -> int:
    sync = transition.sync
    if sync.strategy == "all":
        return total
    if sync.strategy == "any":
        return min(1, total)
    return sync.m


def check_group(graph: Graph, state: RunState, group: Group, transition: Transition) -> None:
    needed = needed_arrivals(transition, len(group.scopes))
    if len(group.arrived) >= needed:
        complete_group(graph, state, group, transition)
        return
    alive = len(alive_branches(state, group) - set(group.arrived))
    if len(group.arrived) + alive < needed:
        fail_run(
            state,
            {
                "name": "FanInUnsatisfiable",
                "message": f"fan-in {transition.ref!r} needs {needed} of {len(group.scopes)} branches; "
                f"{len(group.arrived)} arrived and {alive} can still arrive",
                "transition": transition.ref,
            },
        )


def alive_branches(state: RunState, group: Group) -> set[int]:
    """Indexes of the group's branches that still have a live token (nested branches included),
    in one pass over the tokens: checking branch by branch made a 100-branch fan-in quadratic."""
    index = {scope: i for i, scope in enumerate(group.scopes)}
    prefix = group.origin + "."
    found = set()
    for t in state.tokens.values():
        if t.status in (PENDING, EXECUTING, WAITING) and t.scope.startswith(prefix):
            head = prefix + t.scope[len(prefix) :].split(".", 1)[0]
            if head in index:
                found.add(index[head])
    return found


def branch_ended(graph: Graph, state: RunState, token: Token) -> None:
    """A token inside a branch failed or reached an end without arriving at its fan-in: the
    innermost group may no longer be satisfiable. With no fan-in, a failure fails the run."""
    group = state.groups[state.scope_group[token.scope]]
    if group.done or group.lane_arrivals is not None:  # a lane's end is judged at the join
        return
    if group.fan_in is None:
        if token.status == FAILED:
            fail_run(
                state,
                {
                    "name": "NodeFailed",
                    "message": f"node {token.node!r} failed",
                    "node": token.node,
                },
                token=token,
            )
        return
    check_group(graph, state, group, graph.transition(group.fan_in))


def complete_group(
    graph: Graph, state: RunState, group: Group, transition: Transition, values=None
) -> None:
    """`values` ({branch index: merge.source value or MISSING}): what the branches' contexts
    held, when they are not in `state` (a join of branch lanes); else read from the contexts."""
    group.done = True
    cancelled = []
    for t in state.tokens.values():
        if not any(in_scope(t.scope, s) for s in group.scopes):
            continue
        if t.status == WAITING:
            t.status = COMPLETED
            touch(state, t)
        elif t.status in LIVE:
            t.status = CANCELLED
            cancelled.append(t.path)
            touch(state, t)
    parent_context = state.contexts[group.parent_scope]
    merge = transition.sync.merge
    data = {"group": group.id, "arrived": list(group.arrived), "cancelled": cancelled}
    if merge is not None:
        try:
            merged = merge_values(
                merge.strategy,
                [
                    (
                        i,
                        values[i]
                        if values is not None
                        else pointers.get(state.contexts[group.scopes[i]], merge.source),
                    )
                    for i in group.arrived
                ],
                existing=pointers.get(parent_context, merge.target),
            )
        except MergeError as exc:
            fail_run(
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
    record_event(state, "fan_in_completed", data=data)
    if merge is not None:
        context_updated(state, group.parent_scope, {merge.target: merged}, token=None)
    origin = state.tokens[group.origin]
    spawn(state, transition.target, scope=group.parent_scope, parent=origin.path)


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


def apply_fan_in_timeout(graph: Graph, state: RunState, group_id: str, values=None) -> None:
    group = state.groups[group_id]
    transition = graph.transition(group.fan_in)
    if transition.sync.on_timeout == "proceed_with_available":
        complete_group(graph, state, group, transition, values)
        return
    group.done = True
    fail_run(
        state,
        {
            "name": "FanInTimeout",
            "message": f"fan-in {transition.ref!r} timed out with {len(group.arrived)} of {len(group.scopes)} branches",
            "transition": transition.ref,
        },
    )
