"""Pure coordination of a graph run: given the definition and the run's state, decide what
happens next and apply results. No database, no clock, no I/O — the executor
(graphs/executor.py) runs the actions as durable steps and feeds their results back here.

The state (graphs/state.py) holds contexts per scope, tokens, fan-out groups, loop counters
and a journal of run events that the executor stores. Time is logical: `clock_ms` only moves
when a result carries a time. Fan-out and fan-in rules live in graphs/fanin.py.

Transition rules: the outgoing transitions of a node form tiers by `priority` (lower first); the
first tier with any match wins and every matching transition in it fires. A node that succeeds
takes its `on: success` transitions; one that fails for good (after its retries) writes its
error {name, message, node, attempts} to /errors/<ref> of its scope and takes its `on: failure`
transitions the same way — with none, or none matching, the run fails (or, in a branch, the
branch ends) as it always did. A fan-out (foreach / spawn_count) opens one branch scope per
item with /branch = {index, total, item}, after checking its size against the run's fan-out
maximum and the steps the run has left (too many fails the node at once); a fan-in
(`synchronization`) waits for its fan-out's branches (all | any | m_of_n), merges
`merge.source` of each arrived branch into `merge.target` of the parent scope, cancels what is
left of the other branches and continues in the parent scope. A run past its `timeout` fails,
completes (cancel_all), or — human_gate — waits at its timeout gate, a human node.
"""

import copy
from dataclasses import dataclass

from graphs import conditions, pointers, schemas
from graphs.fanin import (  # noqa: F401 - apply_fan_in_timeout, merge_values: part of this API
    MergeError,
    apply_fan_in_timeout,
    arrive,
    branch_ended,
    fan_in_timeout_ms,
    merge_values,
    open_fan_out,
)
from graphs.shapes import FAILURE, SUCCESS
from graphs.spec import Graph, Transition
from graphs.state import (  # noqa: F401 - re-exported for the executor and tests
    CANCELLED,
    COMPLETED,
    EXECUTING,
    FAILED,
    LIVE,
    PENDING,
    TIMED_OUT,
    WAITING,
    RunState,
    Token,
    advance_clock,
    context_updated,
    fail_run,
    record_event,
    spawn,
    take_journal,
    touch,
)


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
    if past_deadline(graph, state):
        return [RunTimeout()]
    for group in state.groups.values():
        timeout = fan_in_timeout_ms(graph, group)
        if not group.done and timeout is not None and state.clock_ms - group.started_ms >= timeout:
            return [FanInTimeout(group.id)]
    pending = sorted((t for t in state.tokens.values() if t.status == PENDING), key=lambda t: t.seq)
    if pending:
        return [Dispatch(t.path, t.node) for t in pending]
    if any(t.status in LIVE for t in state.tokens.values()):
        return []
    return [Complete(state.context)]


def past_deadline(graph: Graph, state: RunState) -> bool:
    """Whether the run's timeout applies now (never again once a human gate opened)."""
    return (
        graph.timeout_ms is not None
        and not state.gated
        and state.clock_ms - state.started_ms >= graph.timeout_ms
    )


def start(
    graph: Graph,
    run_input,
    *,
    now_ms: int,
    max_fan_out: int | None = None,
    max_steps: int | None = None,
) -> RunState:
    """The state a run starts from. `max_fan_out`: the most branches one fan-out may open;
    `max_steps`: the engine's steps per run (each node visit takes at least one)."""
    state = RunState(
        contexts={"": {"input": copy.deepcopy(run_input)}},
        started_ms=now_ms,
        clock_ms=now_ms,
        max_fan_out=max_fan_out,
        max_steps=max_steps,
    )
    record_event(state, "run_started", data={"input": run_input})
    spawn(state, graph.initial_node, scope="", parent=None)
    return state


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


def node_started(state: RunState, path: str) -> None:
    token = state.tokens[path]
    token.status = EXECUTING
    state.visits += 1
    touch(state, token)
    record_event(state, "node_started", token=token)


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
    touch(state, token)
    record_event(
        state, "node_completed", token=token, data={"output": output, "timed_out": timed_out}
    )
    if changes:
        context_updated(state, token.scope, changes, token=token)
        problems = context_problems(graph, state) if not token.scope else []
        if problems:
            fail_run(
                state,
                {"name": "ContextInvalid", "message": problems[0]["message"], "errors": problems},
                token=token,
            )
            return
    _route(graph, state, token)


def context_problems(graph: Graph, state: RunState) -> list[dict]:
    """The run context against the context_schema (only a change of the run scope can change
    it: a branch's writes stay in the branch)."""
    return schemas.problems(graph.context_schema, state.context, field="context_schema")


def node_failed(
    graph: Graph, state: RunState, path: str, error: dict, *, at_ms: int, routable: bool = True
) -> None:
    """A node failed for good. `error`: {"name", "message"} and, when known, "attempts" (and
    "child" for a workflow node's child). With failure routes (and `routable`: a workflow
    node's child failure is routable only with catch), the error is written to /errors/<ref>
    and the routes are taken; otherwise the run fails, or in a branch the branch ends."""
    token = state.tokens[path]
    state.clock_ms = max(state.clock_ms, at_ms)
    entry = {
        "name": error.get("name", "Error"),
        "message": error.get("message", ""),
        "node": token.node,
        "attempts": error.get("attempts", 1),
        **({"child": error["child"]} if "child" in error else {}),
    }
    token.status, token.error = FAILED, entry
    touch(state, token)
    record_event(state, "node_failed", token=token, data={"error": entry})
    if routable and graph.outgoing(token.node, FAILURE):
        target = f"/errors/{token.node}"
        try:
            pointers.set(state.contexts[token.scope], target, entry)
        except pointers.PointerError as exc:  # /errors holds something else than an object
            fail_run(state, {"name": "MappingError", "message": str(exc)}, token=token)
            return
        context_updated(state, token.scope, {target: entry}, token=token)
        problems = context_problems(graph, state) if not token.scope else []
        if problems:
            fail_run(
                state,
                {"name": "ContextInvalid", "message": problems[0]["message"], "errors": problems},
                token=token,
            )
            return
        if _route(graph, state, token, FAILURE):
            token.handled = True
            return
    if token.scope:
        branch_ended(graph, state, token)
    else:
        fail_run(
            state,
            {
                "name": "NodeFailed",
                "message": f"node {token.node!r} failed: {entry['message']}",
                "node": token.node,
            },
            token=token,
        )


def finish(graph: Graph, state: RunState) -> None:
    """The run completes with its context (the executor calls this when decide() says
    Complete) — or fails with OutputInvalid when the context breaks the output_schema."""
    if state.outcome is None:
        _complete(graph, state, None)


def _complete(graph: Graph, state: RunState, data) -> None:
    problems = schemas.problems(graph.output_schema, state.context, field="output_schema")
    if problems:
        first = problems[0]
        fail_run(
            state,
            {
                "name": "OutputInvalid",
                "message": f"the final context does not match the output_schema: "
                f"{first['path']}: {first['message']}",
                "errors": problems,
            },
        )
        return
    state.outcome = ("completed", state.context)
    record_event(state, "run_completed", data=data)


def _route(graph: Graph, state: RunState, token: Token, on: str = SUCCESS) -> bool:
    """Fire the first tier of the node's `on` transitions with a match; False when none
    matched (a failure then fails as if it had no route). A tier's fan-outs are sized first:
    one too large fails the node instead (fan_out_refusal)."""
    outgoing = graph.outgoing(token.node, on)
    if not outgoing and on == SUCCESS:
        if token.scope:
            branch_ended(graph, state, token)
        return True
    context = state.contexts[token.scope]
    for priority in sorted({t.priority for t in outgoing}):
        tier = [t for t in outgoing if t.priority == priority and _matches(state, t, context)]
        if tier:
            refusal = fan_out_refusal(graph, state, context, tier)
            if refusal is not None and on == FAILURE:  # no second failure of the same node
                fail_run(state, {**refusal, "node": token.node}, token=token)
                return True
            if refusal is not None:
                node_failed(graph, state, token.path, refusal, at_ms=state.clock_ms)
                return True
            for transition in tier:
                _fire(graph, state, token, transition)
                if state.outcome is not None:
                    return True
            return True
    if on == FAILURE:
        return False
    if token.scope:
        branch_ended(graph, state, token)
        return True
    fail_run(
        state,
        {
            "name": "NoTransition",
            "message": f"no transition from {token.node!r} matched",
            "node": token.node,
        },
        token=token,
    )
    return True


def fan_out_refusal(
    graph: Graph, state: RunState, context: dict, tier: list[Transition]
) -> dict | None:
    """FanOutTooLarge when a fan-out of `tier` would open more branches than the run's maximum,
    or when together their branches need more engine steps than the run has left (each
    branch at least state.branch_steps of its first node's kind; each node visit so far took at
    least one) — judged on the collection's length, before anything of it is copied. A foreach
    over a non-array is left to open_fan_out (it fails the run, as it always did)."""
    need = 0
    for t in tier:
        if t.foreach is not None:
            items = pointers.get(context, t.foreach)
            size = len(items) if isinstance(items, list) else 0
        elif t.spawn_count is not None:
            size = t.spawn_count
        else:
            continue
        need += size * state.branch_steps.get(graph.nodes[t.target].kind, 1)
        if state.max_fan_out is not None and size > state.max_fan_out:
            return {
                "name": "FanOutTooLarge",
                "message": f"fan-out {t.ref!r} would open {size} branches; the most one "
                f"fan-out may open is {state.max_fan_out} (GRAPHS_MAX_FAN_OUT)",
            }
    if state.max_steps is not None and need:
        left = state.max_steps - state.visits
        if need > left:
            return {
                "name": "FanOutTooLarge",
                "message": f"the fan-out's branches need at least {need} steps, but this run "
                f"has {left} of its {state.max_steps} steps left",
            }
    return None


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
        arrive(graph, state, token, transition)
    elif transition.fans_out:
        open_fan_out(graph, state, token, transition)
    else:
        spawn(state, transition.target, scope=token.scope, parent=token.path)


def apply_run_timeout(graph: Graph, state: RunState) -> None:
    live = [t for t in state.tokens.values() if t.status in (PENDING, EXECUTING, WAITING)]
    if graph.on_timeout == "cancel_all":
        for t in live:
            t.status = CANCELLED
            touch(state, t)
        _complete(graph, state, {"cancelled": True, "reason": "timeout"})
        return
    for t in live:
        t.status = TIMED_OUT
        touch(state, t)
    if graph.on_timeout == "human_gate":
        # The run waits for a person at its gate instead of failing: what was running stops,
        # open fan-ins are abandoned, and the run's timeout does not apply again.
        state.gated = True
        for group in state.groups.values():
            group.done = True
        record_event(state, "run_timed_out", data={"gate": graph.timeout_gate})
        spawn(state, graph.timeout_gate, scope="", parent=None)
        return
    fail_run(state, {"name": "RunTimeout", "message": "the run exceeded its timeout"})
