"""The graph interpreter's machinery (graphs/workflows.py registers the workflows): the
Executor runs a graph run's decisions as durable steps and stores the projection.

Each replay rebuilds the run's state from the stored step results: start from the definition
and the input, ask graphs.decisions what to do, run each dispatched node as a durable step, feed
the result back, repeat. Node kinds map to engine primitives:

    python / http / set → step.do("<token path> <node>")   (retries and timeout per node)
    human               → step.wait_for_event (timeout → output {"timed_out": true})
    sleep               → step.sleep
    workflow            → step.run_workflow (the child's output)

Tokens, run events and the run context are a projection of that state: a step registers
(step.tx.mutate) the rows produced since the last write, so they commit with it and a replay
never writes them twice. Node steps write them about once a second (a write costs a commit of
its own); the "start" step of human/sleep/workflow nodes and the run's `finish`/`fail` steps
always write.

`Executor.run` is graph-run v1's loop: fan-out branches one after another in token order, so a
branch waiting on a human holds the branches after it. v2 (graphs/lanes.py) reuses the node
and projection parts and runs each fan-out's branches as lanes of one step.parallel. Changing
what v1's loop asks for (step names, order) would break the replay of v1 runs.
"""

import copy
import time
from datetime import UTC, datetime, timedelta

from django.db.models import Q

from graphs import actions, decisions, http_action, services, spec
from graphs.errors import GraphError
from graphs.models import GraphRun, GraphRunEvent, GraphToken
from graphs.shapes import FAILURE
from workflows import (
    ChildWorkflowError,
    NonRetryableError,
    WaitForEventTimeout,
    durations,
    runtime,
)
from workflows.decisions import DEFAULT_TIMEOUT_MS as DEFAULT_STEP_TIMEOUT_MS
from workflows.selectors import instance_steps

# Projection rows (tokens, run events, context) trail the engine by about this long, or this
# many events, whichever comes first; human/sleep/workflow nodes and the run's end write at once.
FLUSH_INTERVAL_S = 1.0
FLUSH_MAX_EVENTS = 500


class GraphRunFailed(Exception):
    """The graph decided to fail (a node failed for good, no transition matched, a fan-in could
    not be satisfied, a timeout): the engine instance ends errored with this message."""


def to_ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


class Executor:
    # How a step stores the projection (run events, tokens, context); graphs/lanes.py numbers
    # run events as it writes them instead.
    write = staticmethod(lambda *args: write_projection(*args))

    def __init__(self, step, run: GraphRun, graph: spec.Graph, state: decisions.RunState):
        self.step = step
        self.run_pk = run.pk
        self.run_id = run.run_id
        self.instance = run.instance
        self.engine_run = run.instance.run_number  # fixed for this run: restart = new number
        state.context_dirty = True  # the first write of a run (re)sets the stored context
        self.graph = graph
        self.state = state
        self.persisted: set[str] = set()  # token paths whose rows exist
        self.flushed_at = time.monotonic()

    def run(self):
        while True:
            batch = decisions.decide(self.graph, self.state)
            if not batch:
                raise RuntimeError("graph run has executing tokens but nothing to run")
            first = batch[0]
            if isinstance(first, decisions.Complete):
                decisions.finish(self.graph, self.state)
                if self.state.outcome[0] == "failed":
                    continue  # the output_schema refused it: decide() says Fail next
                self.record("finish")
                return self.state.context
            if isinstance(first, decisions.Fail):
                self.record("fail")
                raise GraphRunFailed(first.error.get("message", "graph run failed"))
            if isinstance(first, decisions.FanInTimeout):
                decisions.apply_fan_in_timeout(self.graph, self.state, first.group)
            elif isinstance(first, decisions.RunTimeout):
                decisions.apply_run_timeout(self.graph, self.state)
            else:
                self.dispatch(first.path)

    # -- nodes ----------------------------------------------------------------------------

    def dispatch(self, path: str) -> None:
        token = self.state.tokens[path]
        node = self.graph.nodes[token.node]
        name = f"{path} {node.ref}"
        graph, state = self.graph, self.state
        decisions.node_started(state, path)
        timed_out, writes = False, None
        try:
            if node.kind in ("python", "http", "set"):
                key = http_action.idempotency_key(
                    run_id=self.run_id, engine_run=self.engine_run, path=path, node=node.ref
                )
                # The input and the context are read inside the callback, which runs before
                # anything changes them: a replay, which returns the stored result, copies
                # nothing of a context that may be large.
                result = self.durable(
                    name,
                    lambda: run_action(
                        node,
                        decisions.node_input(graph, state, path),
                        decisions.token_context(state, path),
                        key=key,
                    ),
                    retries=node.retries,
                    timeout=node.timeout_ms,
                )
                output, writes, at_ms = result["output"], result.get("writes"), result["at_ms"]
            else:
                started_ms = self.record(f"{name} start")
                node_input = (
                    decisions.node_input(graph, state, path) if node.kind == "workflow" else {}
                )
                output, timed_out, at_ms = self.wait_node(node, name, node_input, started_ms)
        except Exception as exc:  # the node failed for good: the graph decides what follows
            error, routable = self.failure(node, name, exc)
            decisions.node_failed(
                self.graph, self.state, path, error, at_ms=self.state.clock_ms, routable=routable
            )
            return
        decisions.node_completed(
            self.graph, self.state, path, output, at_ms=at_ms, writes=writes, timed_out=timed_out
        )

    def wait_node(self, node: spec.Node, name: str, node_input: dict, started_ms: int):
        action = node.action
        if node.kind == "human":
            timeout = action.get("timeout", spec.DEFAULT_HUMAN_TIMEOUT_MS)
            try:
                event = self.step.wait_for_event(name, type=action["event_type"], timeout=timeout)
            except WaitForEventTimeout:
                return {"timed_out": True}, True, started_ms + durations.to_ms(timeout)
            at = datetime.fromisoformat(event["timestamp"])
            return event["payload"], False, to_ms(at)
        if node.kind == "sleep":
            self.step.sleep(name, action["duration"])
            return None, False, started_ms + durations.to_ms(action["duration"])
        # workflow: a child instance; its output is the node's output.
        if "binding" in action:  # a graph: a graph-run child of the binding's current version
            params = self.durable(
                f"{name} resolve",
                lambda: child_params(action["binding"], node_input),
                retries={"limit": 0},
            )
            output = self.step.run_workflow(name, services.GRAPH_WORKFLOW, params=params)
            return output, False, started_ms
        output = self.step.run_workflow(name, action["workflow"], params=node_input)
        return output, False, started_ms

    def failure(self, node: spec.Node, name: str, exc: Exception) -> tuple[dict, bool]:
        """What a node that failed for good reports, and whether its failure routes may take
        it (a workflow node's child failure only with catch). With failure routes, the
        attempts it took are read from the engine's record of its step, in a step of its own
        (`"<token> <node> failed"`), so a replay sees the same number; a node without them
        asks for no step, so runs of graphs without failure routes replay as before."""
        error = error_of(exc)
        if isinstance(exc, ChildWorkflowError):
            if not node.action.get("catch"):
                return error, False
            child = {
                "workflow": exc.workflow,
                "id": exc.id,
                "status": exc.status,
                "error": exc.error,
            }
            return {**error, "attempts": 1, "child": child}, True
        if not self.graph.outgoing(node.ref, FAILURE):
            return error, True
        attempts = self.durable(
            f"{name} failed", lambda: self.attempts_of(name), retries={"limit": 3}
        )
        return {**error, "attempts": attempts}, True

    def attempts_of(self, name: str) -> int:
        """Attempts of the node's failed step (`name`, or its child's `name resolve`), found by
        its own name at the end of the full step name (a lane's steps carry its location)."""
        match = Q()
        for step_name in (name, f"{name} resolve"):
            match |= Q(name=step_name) | Q(name__endswith=f"/{step_name}")
        found = instance_steps(instance=self.instance, run_number=self.engine_run).filter(
            match, status="errored"
        )
        return max(found.values_list("attempts", flat=True), default=1)

    # -- durable steps and the projection -------------------------------------------------

    def record(self, name: str) -> int:
        """A step that stores the projection so far; returns its (stored) time."""
        return self.durable(name, lambda: to_ms(runtime.now()), retries={"limit": 3}, flush=True)

    def durable(self, name: str, fn, *, retries=None, timeout=None, flush=False):
        """step.do(name, fn) that may also write the projection rows pending so far. Writing
        them forces a commit of its own (step.tx.mutate), so a node step writes them only
        when FLUSH_INTERVAL_S has passed or many are pending; whether it did is part of the
        step's stored result, so a replay knows which rows are already written."""
        events, tokens, context_changed = decisions.take_journal(self.state)
        rows = [(t.path not in self.persisted, token_row(t)) for t in tokens]
        run_pk, engine_run, write, state = self.run_pk, self.engine_run, self.write, self.state

        def callback():
            value = fn()
            due = time.monotonic() - self.flushed_at >= FLUSH_INTERVAL_S
            written = flush or due or len(events) >= FLUSH_MAX_EVENTS
            if written:
                # Serialized by the write, which this step's commit runs before the run moves
                # on: no copy is needed, and a replay (no callback) makes none.
                context = state.context if context_changed else None
                self.step.tx.mutate(lambda: write(run_pk, engine_run, events, rows, context))
            return {"value": value, "flushed": written}

        def give_back():
            self.state.journal[:0] = events
            self.state.dirty.update(t.path for t in tokens)
            self.state.context_dirty = self.state.context_dirty or context_changed

        try:
            result = self.step.do(name, callback, retries=retries, timeout=timeout)
        except BaseException:
            give_back()  # not stored: the step that comes next writes them
            raise
        if result["flushed"]:
            self.persisted.update(t.path for t in tokens)
            self.flushed_at = time.monotonic()
        else:
            give_back()
        return result["value"]


def error_of(exc: BaseException) -> dict:
    """{"name", "message"} as the engine stores a step's error (a replayed failure carries the
    original exception's name as error_name)."""
    return {
        "name": getattr(exc, "error_name", None) or type(exc).__name__,
        "message": str(exc)[:2048],
    }


def child_params(binding: str, node_input: dict) -> dict:
    try:
        return services.child_run_params(binding_name=binding, run_input=node_input)
    except GraphError as exc:  # no such binding, nothing published, input refused: for good
        raise NonRetryableError(f"{exc.code}: {exc.message}") from exc


def run_action(node: spec.Node, node_input: dict, context: dict, *, key: str = "") -> dict:
    """One attempt of a python/http/set node → {"output", "writes"?, "at_ms"}. `key`: the
    execution's idempotency key (http)."""
    action = node.action
    if node.kind == "python":
        fn = actions.get(action["name"])
        if fn is None:
            raise NonRetryableError(f"python action {action['name']!r} is not registered")
        output = fn(node_input)
        return {"output": output, "at_ms": to_ms(runtime.now())}
    if node.kind == "set":
        writes = {target: decisions.resolve(context, op) for target, op in action["values"].items()}
        return {"output": writes, "writes": writes, "at_ms": to_ms(runtime.now())}
    body = decisions.resolve(context, action["body"]) if "body" in action else None
    output = http_action.call(
        action,
        node_input,
        body,
        idempotency_key=http_action.node_key(action, node_input, key),
        budget_ms=node.timeout_ms or DEFAULT_STEP_TIMEOUT_MS,
    )
    return {"output": output, "at_ms": to_ms(runtime.now())}


def token_row(token: decisions.Token) -> dict:
    return {
        "path_id": token.path,
        "node_ref": token.node,
        "status": token.status,
        "parent_path": token.parent or "",
        "fan_out": token.fan_out or "",
        "branch_index": token.branch_index,
        "branch_total": token.branch_total,
        "output": copy.deepcopy(token.output),
        "error": token.error,
        "sequence": token.seq,
    }


def write_projection(run_pk: int, engine_run: int, events: list[dict], rows: list, context) -> None:
    """Runs inside the step's commit transaction (step.tx.mutate)."""
    now = runtime.now()
    GraphRunEvent.objects.bulk_create(
        GraphRunEvent(
            run_id=run_pk,
            engine_run=engine_run,
            sequence_number=e["sequence_number"],
            type=e["type"],
            token_path=e["token"],
            node_ref=e["node"],
            data=e["data"],
            created_at=now,
        )
        for e in events
    )
    # One upsert for new and changed tokens alike (an UPDATE per token made a 100-branch
    # fan-in's write take seconds); created_at stays the first write's.
    GraphToken.objects.bulk_create(
        [
            GraphToken(run_id=run_pk, engine_run=engine_run, created_at=now, updated_at=now, **row)
            for _, row in rows
        ],
        update_conflicts=True,
        unique_fields=["run", "engine_run", "path_id"],
        update_fields=["status", "output", "error", "updated_at"],
    )
    if context is not None:
        GraphRun.objects.filter(pk=run_pk).update(context=context, updated_at=now)
